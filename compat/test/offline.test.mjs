// goOffline()/goOnline(): queued writes, re-established listeners, .info/connected.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { get, set, update, push, remove, goOffline, goOnline, query, orderByKey, limitToLast } from 'firebase/database';
import { useHearth, T } from '../lib/harness.mjs';
import { recordValues, keysOf } from '../lib/util.mjs';

describe('offline', () => {
  const h = useHearth();

  it('writes queued while offline are delivered, in order, after goOnline', T, async () => {
    const ns = h.ns();
    const [a, b, c] = h.clients(3, ns);
    await set(a.ref('q/start'), true);
    const rec = recordValues(b.ref('q'));
    await rec.untilVal({ start: true });
    goOffline(a.db);
    const pending = [
      set(a.ref('q/x'), 1),
      update(a.ref('q'), { y: 2, start: null }),
      push(a.ref('q/list'), 'p1'),
      set(a.ref('q/x'), 3),
    ];
    // While a is offline nothing reaches the server; c's write is a barrier for b.
    await set(c.ref('q/marker'), 'm');
    const atMarker = await rec.until((s) => s.hasChild('marker'), 10_000, 'marker');
    assert.deepEqual(Object.keys(atMarker.val()).sort(), ['marker', 'start']);
    goOnline(a.db);
    await Promise.all(pending);
    const snap = await rec.until((s) => s.child('x').val() === 3 && s.hasChild('list'), 10_000, 'offline writes');
    assert.equal(snap.child('y').val(), 2);
    assert.equal(snap.hasChild('start'), false);
    assert.deepEqual(Object.values(snap.child('list').val()), ['p1']);
    // b saw x become 1, then 3: every queued write is applied and pushed on its own, in
    // commit order (none skipped or merged into the next).
    const xs = rec.values.map((v) => (v ? v.x : undefined)).filter((x) => x !== undefined);
    const distinct = xs.filter((x, i) => i === 0 || x !== xs[i - 1]);
    assert.deepEqual(distinct, [1, 3], `x values seen: ${JSON.stringify(xs)}`);
    rec.off();
  });

  it('.info/connected goes false on goOffline and true on goOnline', T, async () => {
    const ns = h.ns();
    const a = h.client(ns);
    const conn = recordValues(a.ref('.info/connected'));
    await conn.untilVal(true);
    goOffline(a.db);
    await conn.untilVal(false);
    goOnline(a.db);
    await conn.untilVal(true);
    const vals = conn.values;
    assert.equal(vals[vals.length - 1], true);
    assert.ok(vals.lastIndexOf(false) > vals.indexOf(true));
    conn.off();
  });

  it('listeners are re-established after goOnline and catch up on missed changes', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    await set(b.ref('catch'), { v: 'before' });
    const rec = recordValues(a.ref('catch'));
    await rec.untilVal({ v: 'before' });
    const conn = recordValues(a.ref('.info/connected'));
    await conn.untilVal(true);
    goOffline(a.db);
    await conn.untilVal(false);
    await set(b.ref('catch'), { v: 'during', extra: 1 });
    await remove(b.ref('catch/extra'));
    goOnline(a.db);
    await rec.untilVal({ v: 'during' });
    await set(b.ref('catch/v'), 'after');
    await rec.untilVal({ v: 'after' });
    conn.off();
    rec.off();
  });

  it('local (latency-compensated) events while offline, reconciled with the server', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    await set(a.ref('local'), { n: 0 });
    const mine = recordValues(a.ref('local'));
    await mine.untilVal({ n: 0 });
    goOffline(a.db);
    const w = set(a.ref('local/n'), 1);
    await mine.untilVal({ n: 1 }); // raised locally although offline
    goOnline(a.db);
    await w;
    assert.equal((await get(b.ref('local/n'))).val(), 1);
    mine.off();
  });

  it('a query listener resumes after goOnline with the server window', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    await set(b.ref('win'), { a: 1, b: 2, c: 3 });
    const rec = recordValues(query(a.ref('win'), orderByKey(), limitToLast(2)));
    await rec.until((s) => keysOf(s).join() === 'b,c');
    const conn = recordValues(a.ref('.info/connected'));
    await conn.untilVal(true);
    goOffline(a.db);
    await conn.untilVal(false);
    await set(b.ref('win/d'), 4);
    await set(b.ref('win/e'), 5);
    goOnline(a.db);
    await rec.until((s) => keysOf(s).join() === 'd,e', 10_000, 'window d,e');
    conn.off();
    rec.off();
  });
});
