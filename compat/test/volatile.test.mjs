// Volatile paths (".volatile": true in the rules): written without the log and pushed on a
// tick, through the official SDK unchanged. See docs/volatile.md.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { get, set, update, onDisconnect, goOffline, runTransaction } from 'firebase/database';
import { useHearth, T } from '../lib/harness.mjs';
import { expectDenied, mockUser, tempDir, writeTemp } from '../lib/rules.mjs';
import { recordValues, withTimeout } from '../lib/util.mjs';

const RULES = {
  rules: {
    '.read': true,
    rooms: {
      $room: {
        title: { '.write': 'auth != null' },
        cursors: {
          '.volatile': true,
          $uid: {
            '.write': 'auth != null && auth.uid === $uid',
            '.validate': "newData.hasChildren(['x'])",
          },
        },
        counter: { '.volatile': true, '.write': 'auth != null' },
      },
    },
  },
};

const rulesFile = writeTemp(tempDir('hearth-volatile-'), 'volatile.rules.json', RULES);
const RT = { timeout: 45_000 };

describe('volatile paths', () => {
  const h = useHearth({ extraArgs: ['--rules', rulesFile] });

  it('a volatile set and update settle, and a listener sees them', T, async () => {
    const ns = h.ns();
    const alice = mockUser(h, ns, 'alice');
    const bob = mockUser(h, ns, 'bob');
    const rec = recordValues(bob.ref('rooms/r1/cursors/alice'));
    await rec.first();
    await set(alice.ref('rooms/r1/cursors/alice'), { x: 1, y: 1 });
    await rec.untilVal({ x: 1, y: 1 });
    await update(alice.ref('rooms/r1/cursors/alice'), { y: 2 });
    await rec.untilVal({ x: 1, y: 2 });
    rec.off();
  });

  it('a listener gets fewer pushes than writes made faster than the tick, ending with the newest', T, async () => {
    const ns = h.ns();
    const alice = mockUser(h, ns, 'alice');
    const bob = mockUser(h, ns, 'bob');
    const rec = recordValues(bob.ref('rooms/r1/cursors/alice'));
    await rec.first();
    const writes = 200;
    const acks = [];
    for (let x = 1; x <= writes; x++) acks.push(set(alice.ref('rooms/r1/cursors/alice'), { x }));
    await Promise.all(acks);
    await rec.untilVal({ x: writes });
    assert.ok(rec.snaps.length < writes, `${rec.snaps.length} pushes for ${writes} writes`);
    rec.off();
  });

  it("the writer's own view never falls back to an older value", T, async () => {
    const ns = h.ns();
    const alice = mockUser(h, ns, 'alice');
    const rec = recordValues(alice.ref('rooms/r1/cursors/alice'));
    await rec.first();
    for (let x = 1; x <= 15; x++) await set(alice.ref('rooms/r1/cursors/alice'), { x });
    await rec.untilVal({ x: 15 });
    const seen = rec.values.filter((v) => v !== null).map((v) => v.x);
    for (let i = 1; i < seen.length; i++) {
      assert.ok(seen[i] >= seen[i - 1], `the view went back: ${JSON.stringify(seen)}`);
    }
    rec.off();
  });

  it('a late listener gets the current value at once', T, async () => {
    const ns = h.ns();
    const alice = mockUser(h, ns, 'alice');
    await set(alice.ref('rooms/r1/cursors/alice'), { x: 7 });
    const late = mockUser(h, ns, 'carol');
    const rec = recordValues(late.ref('rooms/r1/cursors'));
    const first = await rec.first();
    assert.deepEqual(first.val(), { alice: { x: 7 } });
    assert.deepEqual((await get(h.client(ns).ref('rooms/r1/cursors/alice'))).val(), { x: 7 });
    rec.off();
  });

  it('rules refuse unauthorised and invalid volatile writes', T, async () => {
    const ns = h.ns();
    const bob = mockUser(h, ns, 'bob');
    await expectDenied(set(bob.ref('rooms/r1/cursors/alice'), { x: 1 }), "bob writes alice's cursor");
    await expectDenied(set(h.client(ns).ref('rooms/r1/cursors/bob'), { x: 1 }), 'anonymous');
    await expectDenied(set(bob.ref('rooms/r1/cursors/bob'), { y: 1 }), '.validate');
    assert.equal((await get(bob.ref('rooms/r1/cursors'))).val(), null);
  });

  it('onDisconnect removes a volatile entry', T, async () => {
    const ns = h.ns();
    const alice = mockUser(h, ns, 'alice');
    const bob = mockUser(h, ns, 'bob');
    await set(alice.ref('rooms/r1/cursors/alice'), { x: 3 });
    await onDisconnect(alice.ref('rooms/r1/cursors/alice')).remove();
    const rec = recordValues(bob.ref('rooms/r1/cursors/alice'));
    await rec.untilVal({ x: 3 });
    goOffline(alice.db);
    await rec.untilVal(null);
    rec.off();
  });

  it('a write mixing volatile and durable paths is refused, and changes nothing', T, async () => {
    const ns = h.ns();
    const alice = mockUser(h, ns, 'alice');
    const mixed = update(alice.ref('rooms/r1'), { title: 'hello', 'cursors/alice': { x: 1 } });
    const error = await withTimeout(
      mixed.then(
        () => null,
        (err) => err,
      ),
      10_000,
      'mixed update',
    );
    assert.ok(error, 'the mixed update was accepted');
    assert.match(`${error.code} ${error.message}`, /invalid_data/i);
    assert.match(error.message, /may not mix volatile and durable paths/);
    assert.equal((await get(alice.ref('rooms/r1'))).val(), null);
  });

  it('a durable write beside volatile ones is unaffected, and a transaction on a volatile path works', T, async () => {
    const ns = h.ns();
    const alice = mockUser(h, ns, 'alice');
    const bob = mockUser(h, ns, 'bob');
    const rec = recordValues(bob.ref('rooms/r1'));
    await rec.first();
    await set(alice.ref('rooms/r1/cursors/alice'), { x: 1 });
    await set(alice.ref('rooms/r1/title'), 'durable');
    await Promise.all([1, 2, 3].map(() => runTransaction(alice.ref('rooms/r1/counter'), (n) => (n ?? 0) + 1)));
    await Promise.all([1, 2].map(() => runTransaction(bob.ref('rooms/r1/counter'), (n) => (n ?? 0) + 1)));
    await rec.untilVal({ title: 'durable', cursors: { alice: { x: 1 } }, counter: 5 });
    rec.off();
  });

  it('a volatile write over REST is pushed to listeners', T, async () => {
    const ns = h.ns();
    const bob = mockUser(h, ns, 'bob');
    const rec = recordValues(bob.ref('rooms/r1/counter'));
    await rec.first();
    const url = `http://127.0.0.1:${h.port}/rooms/r1/counter.json?ns=${ns}`;
    const answer = await fetch(url, { method: 'PUT', body: '41', headers: { authorization: 'Bearer owner' } });
    assert.equal(answer.status, 200);
    assert.equal(await answer.text(), '41');
    await rec.untilVal(41);
    rec.off();
  });

  it('a restart loses volatile data and nothing else', RT, async () => {
    const ns = h.ns();
    const alice = mockUser(h, ns, 'alice');
    await set(alice.ref('rooms/r1/title'), 'kept');
    await set(alice.ref('rooms/r1/cursors/alice'), { x: 9 });
    await set(alice.ref('rooms/r1/counter'), 4);
    await set(alice.ref('rooms/r2/title'), 'kept too');
    await h.server.restart();
    const fresh = h.client(ns);
    const value = await withTimeout(get(fresh.ref('rooms')), 20_000, 'get after restart');
    assert.deepEqual(value.val(), { r1: { title: 'kept' }, r2: { title: 'kept too' } });
  });
});

// With 4 shards, about three in four connections sit on a core that does not own the
// database: their volatile pushes and held acknowledgements cross cores in the owner's
// batches. Eight listeners make it near certain that some do (see cores.test.mjs).
describe('volatile paths across cores', () => {
  const h = useHearth({ extraArgs: ['--rules', rulesFile], threads: 4 });

  it('listeners on every core get the newest value, and every write settles', T, async () => {
    const ns = h.ns();
    const alice = mockUser(h, ns, 'alice');
    const listeners = Array.from({ length: 8 }, (_, i) => mockUser(h, ns, `l${i}`));
    const recs = listeners.map((c) => recordValues(c.ref('rooms/r1/cursors')));
    await Promise.all(recs.map((r) => r.first()));
    const acks = [];
    for (let x = 1; x <= 50; x++) acks.push(set(alice.ref('rooms/r1/cursors/alice'), { x }));
    await Promise.all(acks);
    await Promise.all(recs.map((r) => r.untilVal({ alice: { x: 50 } })));
    for (const r of recs) {
      const xs = r.values.filter((v) => v !== null).map((v) => v.alice.x);
      assert.deepEqual(xs, [...xs].sort((a, b) => a - b), 'pushes arrive in order');
      r.off();
    }
  });
});
