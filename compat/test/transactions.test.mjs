// runTransaction(): compare-and-set with the node hash (spec §10).

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { get, set, setWithPriority, runTransaction } from 'firebase/database';
import { useHearth, T } from '../lib/harness.mjs';
import { recordValues } from '../lib/util.mjs';

describe('transactions', () => {
  const h = useHearth();

  it('simple transaction increments and is seen by another client', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    await set(a.ref('tx/n'), 1);
    const rec = recordValues(b.ref('tx/n'));
    await rec.untilVal(1);
    const res = await runTransaction(a.ref('tx/n'), (v) => (v ?? 0) + 1);
    assert.equal(res.committed, true);
    assert.equal(res.snapshot.val(), 2);
    await rec.untilVal(2);
    rec.off();
  });

  it('transaction on a non-existent node creates it', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    const seen = [];
    const res = await runTransaction(a.ref('tx/new'), (v) => {
      seen.push(v);
      return v === null ? { created: true, n: 1 } : undefined;
    });
    assert.equal(res.committed, true);
    assert.deepEqual(res.snapshot.val(), { created: true, n: 1 });
    assert.equal(seen[0], null);
    assert.deepEqual((await get(b.ref('tx/new'))).val(), { created: true, n: 1 });
  });

  it('stale first attempt (empty cache) is retried with the server value', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    await set(a.ref('tx/stale'), 5);
    // b has never read this path: its first attempt runs on null and must be rejected
    // (datastale), the retry sees 5.
    const seen = [];
    const res = await runTransaction(b.ref('tx/stale'), (v) => {
      seen.push(v);
      return (v ?? 0) + 1;
    });
    assert.equal(res.committed, true);
    assert.equal(res.snapshot.val(), 6);
    // One attempt on the empty cache, refused as stale; one retry on the server's value.
    assert.deepEqual(seen, [null, 5]);
    assert.equal((await get(h.client(ns).ref('tx/stale'))).val(), 6);
  });

  it('aborting (returning undefined) leaves the value untouched', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    await set(a.ref('tx/abort'), { keep: 'me' });
    let calls = 0;
    // Return a value for the empty-cache attempt so the server is involved, then abort.
    const res = await runTransaction(b.ref('tx/abort'), (v) => {
      calls++;
      return v === null ? 'overwrite' : undefined;
    });
    assert.equal(res.committed, false);
    assert.deepEqual(res.snapshot.val(), { keep: 'me' });
    assert.ok(calls >= 2);
    assert.deepEqual((await get(h.client(ns).ref('tx/abort'))).val(), { keep: 'me' });
    // Abort on the very first attempt never writes.
    const res2 = await runTransaction(a.ref('tx/abort'), () => undefined);
    assert.equal(res2.committed, false);
    assert.deepEqual((await get(h.client(ns).ref('tx/abort'))).val(), { keep: 'me' });
  });

  it('contention: 2 clients x 25 sequential transactions => all committed, 50', { timeout: 60_000 }, async () => {
    const ns = h.ns();
    const [a, b, c] = h.clients(3, ns);
    await set(a.ref('tx/counter'), 0);
    const loop = async (client) => {
      let committed = 0;
      for (let i = 0; i < 25; i++) {
        const res = await runTransaction(client.ref('tx/counter'), (v) => (v ?? 0) + 1);
        if (res.committed) committed++;
      }
      return committed;
    };
    const [ca, cb] = await Promise.all([loop(a), loop(b)]);
    assert.equal(ca, 25);
    assert.equal(cb, 25);
    const rec = recordValues(c.ref('tx/counter'));
    await rec.untilVal(50);
    rec.off();
  });

  it('contention: 2 clients firing 25 concurrent transactions each => 50', { timeout: 60_000 }, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    await set(a.ref('tx/burst'), 0);
    const all = [];
    for (let i = 0; i < 25; i++) {
      all.push(runTransaction(a.ref('tx/burst'), (v) => (v ?? 0) + 1));
      all.push(runTransaction(b.ref('tx/burst'), (v) => (v ?? 0) + 1));
    }
    const results = await Promise.all(all);
    assert.equal(results.filter((r) => r.committed).length, 50);
    assert.equal((await get(h.client(ns).ref('tx/burst'))).val(), 50);
  });

  it('transaction on a node with a priority keeps the priority', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    await setWithPriority(a.ref('tx/prio'), 5, 10);
    const res = await runTransaction(b.ref('tx/prio'), (v) => (v ?? 0) + 1);
    assert.equal(res.committed, true);
    assert.equal(res.snapshot.val(), 6);
    const snap = await get(h.client(ns).ref('tx/prio'));
    assert.equal(snap.val(), 6);
    assert.equal(snap.priority, 10);
  });

  it('hash-sensitive data (priorities, floats, unicode, integer-like keys) commits quickly', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    // Each of these values makes the hash depend on a rule from spec §10.
    const data = {
      p: { x: { '.value': 'A', '.priority': 10 }, y: { '.value': 'B', '.priority': 'aa' }, z: 'C' },
      obj: { k: 1, '.priority': 7 },
      floats: { a: 0.1, b: -2.5, c: 1e21, d: 9007199254740991, e: 1 / 3 },
      uni: { '｡': 1, '😀': 2, héllo: '☃ 😀' },
      ints: { 10: true, 9: true, a: true, b: true, '007': 'x', '-1': 4 },
      bools: { t: true, f: false, s: 'true', e: '' },
    };
    await set(a.ref('tx/hash'), data);
    for (const key of Object.keys(data)) {
      let attempts = 0;
      const res = await runTransaction(b.ref(`tx/hash/${key}`), (v) => {
        attempts++;
        if (v === null) return { placeholder: true }; // empty cache; must be rejected
        return { ...v, touched: key };
      });
      assert.equal(res.committed, true, `${key} committed`);
      assert.ok(attempts <= 4, `${key}: ${attempts} attempts (hash mismatch between client and server?)`);
      assert.equal(res.snapshot.child('touched').val(), key);
    }
    // The whole tree at once (parent hash over children with priorities).
    let attempts = 0;
    const res = await runTransaction(h.client(ns).ref('tx/hash'), (v) => {
      attempts++;
      return v === null ? 0 : { ...v, all: true };
    });
    assert.equal(res.committed, true);
    assert.ok(attempts <= 4, `root: ${attempts} attempts`);
    const final = (await get(h.client(ns).ref('tx/hash'))).val();
    assert.equal(final.all, true);
    assert.equal(final.p.x, 'A');
    assert.equal(final.uni['😀'], 2);
  });

  it('transaction result is seen live by a listening client; deleting via transaction', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    const rec = recordValues(b.ref('tx/live'));
    await rec.first();
    await runTransaction(a.ref('tx/live'), () => ({ state: 'open', n: 1 }));
    await rec.untilVal({ state: 'open', n: 1 });
    const res = await runTransaction(a.ref('tx/live'), (v) => (v && v.state === 'open' ? null : v));
    assert.equal(res.committed, true);
    assert.equal(res.snapshot.val(), null);
    await rec.untilVal(null);
    rec.off();
  });
});
