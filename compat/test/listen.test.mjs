// Realtime listeners: what a second client observes while another one writes.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  get,
  set,
  update,
  remove,
  push,
  onValue,
  onChildAdded,
  query,
  orderByChild,
  limitToLast,
} from 'firebase/database';
import { useHearth, T } from '../lib/harness.mjs';
import { recordValues, keysOf, roundTrip, deferred, withTimeout } from '../lib/util.mjs';
import { ChildEventRecorder } from '../lib/events.mjs';

describe('listen', () => {
  const h = useHearth();

  it('value events of another client arrive in commit order', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    const rec = recordValues(b.ref('v'));
    await rec.first();
    await set(a.ref('v'), 'x');
    await rec.untilVal('x');
    await set(a.ref('v'), { y: 1 });
    await rec.untilVal({ y: 1 });
    await remove(a.ref('v'));
    await rec.untilVal(null);
    assert.deepEqual(rec.values, [null, 'x', { y: 1 }, null]);
    rec.off();
  });

  it('initial value of existing data is delivered exactly once', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    await set(a.ref('init'), { a: 1, b: { c: 2 } });
    const rec = recordValues(b.ref('init'));
    await rec.first();
    await roundTrip(b);
    // No spurious null before the data (listen data must precede the listen's ok).
    assert.deepEqual(rec.values, [{ a: 1, b: { c: 2 } }]);
    rec.off();
  });

  it('child_added / child_changed / child_removed sequence with previous keys', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    await set(a.ref('kids'), { a: 1, b: 2 });
    const rec = new ChildEventRecorder(b.ref('kids'));
    await rec.untilWindow(['a', 'b']);
    assert.deepEqual(rec.events.map((e) => [e.type, e.key, e.prev]), [
      ['child_added', 'a', null],
      ['child_added', 'b', 'a'],
    ]);
    rec.clear();
    await set(a.ref('kids/c'), 3);
    await rec.untilWindow(['a', 'b', 'c']);
    await set(a.ref('kids/a'), 10);
    await rec.until((r) => r.lastValue.val().a === 10, 10_000, 'a=10');
    await remove(a.ref('kids/b'));
    await rec.untilWindow(['a', 'c']);
    await update(a.ref('kids'), { d: 4, c: null });
    await rec.untilWindow(['a', 'd']);
    await roundTrip(b);
    assert.deepEqual(
      rec.events.map((e) => [e.type, e.key, e.prev, e.val]),
      [
        ['child_added', 'c', 'b', 3],
        ['child_changed', 'a', null, 10],
        ['child_removed', 'b', undefined, 2],
        // One atomic merge: removal first, then addition (SDK event order).
        ['child_removed', 'c', undefined, 3],
        ['child_added', 'd', 'a', 4],
      ],
    );
    rec.off();
  });

  it('child_moved and child_changed on orderByChild when a sort value changes', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    await set(a.ref('m'), { x: { n: 1 }, y: { n: 2 }, z: { n: 3 } });
    const rec = new ChildEventRecorder(query(b.ref('m'), orderByChild('n')));
    await rec.untilWindow(['x', 'y', 'z']);
    rec.clear();
    await set(a.ref('m/x/n'), 5);
    await rec.untilWindow(['y', 'z', 'x']);
    await roundTrip(b);
    assert.deepEqual(rec.events.map((e) => [e.type, e.key, e.prev]), [
      ['child_moved', 'x', 'z'],
      ['child_changed', 'x', 'z'],
    ]);
    rec.off();
  });

  it('a listener on a parent sees writes to deep children', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    const rec = recordValues(b.ref('deep'));
    await rec.first();
    await set(a.ref('deep/a/b/c/d'), 5);
    await rec.untilVal({ a: { b: { c: { d: 5 } } } });
    await update(a.ref('deep/a'), { 'b/c/e': 'e', 'x/y': true });
    await rec.untilVal({ a: { b: { c: { d: 5, e: 'e' } }, x: { y: true } } });
    await remove(a.ref('deep/a/b'));
    await rec.untilVal({ a: { x: { y: true } } });
    rec.off();
  });

  it('a listener on a child sees writes made at an ancestor', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    const rec = recordValues(b.ref('anc/x/y'));
    await rec.first();
    await set(a.ref('anc'), { x: { y: 'set-at-ancestor', z: 1 } });
    await rec.untilVal('set-at-ancestor');
    await update(a.ref('/'), { 'anc/x/y': 'merged-at-root' });
    await rec.untilVal('merged-at-root');
    await set(a.ref('anc'), { other: true });
    await rec.untilVal(null);
    assert.deepEqual(rec.values, [null, 'set-at-ancestor', 'merged-at-root', null]);
    rec.off();
  });

  it('unsubscribing one of two listeners stops only its events', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    const r1 = recordValues(b.ref('off'));
    const r2 = recordValues(b.ref('off'));
    await r1.first();
    await r2.first();
    await set(a.ref('off'), 1);
    await r1.untilVal(1);
    await r2.untilVal(1);
    r1.off();
    const n1 = r1.snaps.length;
    await set(a.ref('off'), 2);
    await r2.untilVal(2); // the SDK raises both listeners' events together
    assert.equal(r1.snaps.length, n1, 'unsubscribed listener got no event');
    r2.off();
  });

  it('after off() the client stops listening and get() fetches fresh data', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    const rec = recordValues(b.ref('off2'));
    await rec.first();
    await set(a.ref('off2'), 'one');
    await rec.untilVal('one');
    rec.off();
    const n = rec.snaps.length;
    await set(a.ref('off2'), 'two');
    assert.equal((await get(b.ref('off2'))).val(), 'two');
    await roundTrip(b);
    assert.equal(rec.snaps.length, n, 'no events after off()');
  });

  it('a query listener sees only its window while another client pushes (chat pattern)', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    const q = query(b.ref('chat'), limitToLast(2));
    const seen = [];
    const got3 = deferred();
    const unsub = onChildAdded(q, (s) => {
      seen.push(s.val().text);
      if (seen.length === 3) got3.resolve();
    });
    // Wait for the listen to be established on an empty list, then push.
    const rec = recordValues(q);
    await rec.first();
    const texts = (s) => JSON.stringify(Object.values(s.val() || {}).map((m) => m.text));
    const windows = ['["one"]', '["one","two"]', '["two","three"]'];
    for (const [i, text] of ['one', 'two', 'three'].entries()) {
      await push(a.ref('chat'), { text });
      await rec.until((s) => texts(s) === windows[i], 10_000, `window ${windows[i]}`);
    }
    await withTimeout(got3.promise, 10_000, '3 child_added events');
    assert.deepEqual(seen, ['one', 'two', 'three']);
    unsub();
    rec.off();
  });

  it('several listeners on different paths of one client each get their own data', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    const paths = ['multi/a', 'multi/b/c', 'multi/d'];
    const recs = paths.map((p) => recordValues(b.ref(p)));
    await Promise.all(recs.map((r) => r.first()));
    await update(a.ref('multi'), { a: 1, 'b/c': 2, d: { e: 3 } });
    await recs[0].untilVal(1);
    await recs[1].untilVal(2);
    await recs[2].untilVal({ e: 3 });
    for (const r of recs) r.off();
  });

  it('listeners in one client at parent and child both see a child write', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    await set(a.ref('pc'), { c: { v: 0 }, other: 1 });
    const parent = recordValues(b.ref('pc'));
    const child = recordValues(b.ref('pc/c/v'));
    await parent.first();
    await child.first();
    await set(a.ref('pc/c/v'), 9);
    await parent.untilVal({ c: { v: 9 }, other: 1 });
    await child.untilVal(9);
    assert.deepEqual(keysOf(parent.last), ['c', 'other']);
    parent.off();
    child.off();
  });

  it('a listener on a path that is created, replaced and deleted', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    const seen = [];
    const done = deferred();
    const unsub = onValue(b.ref('life'), (s) => {
      seen.push(s.exists());
      if (seen.length === 4) done.resolve();
    });
    const rec = recordValues(b.ref('life'));
    await rec.first();
    await set(a.ref('life'), { x: 1 });
    await rec.untilVal({ x: 1 });
    await set(a.ref('life/x'), null);
    await rec.untilVal(null);
    await set(a.ref('life'), 'back');
    await withTimeout(done.promise, 10_000, '4 value events');
    assert.deepEqual(seen, [false, true, false, true]);
    unsub();
    rec.off();
  });
});
