// Namespaces (the `ns` URL parameter) are fully independent databases.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { get, set, push, runTransaction, onDisconnect, goOffline } from 'firebase/database';
import { useHearth, T } from '../lib/harness.mjs';
import { recordValues, keysOf } from '../lib/util.mjs';

describe('namespaces', () => {
  const h = useHearth();

  it('same path in two namespaces holds different data', T, async () => {
    const ns1 = h.ns('one');
    const ns2 = h.ns('two');
    const a1 = h.client(ns1);
    const a2 = h.client(ns2);
    await set(a1.ref('shared'), 'one');
    await set(a2.ref('shared'), 'two');
    assert.equal((await get(h.client(ns1).ref('shared'))).val(), 'one');
    assert.equal((await get(h.client(ns2).ref('shared'))).val(), 'two');
    assert.deepEqual((await get(h.client(ns1).ref('/'))).val(), { shared: 'one' });
  });

  it('a listener in one namespace never sees writes of another', T, async () => {
    const ns1 = h.ns('one');
    const ns2 = h.ns('two');
    const w1 = h.client(ns1);
    const w2 = h.client(ns2);
    const obs2 = h.client(ns2);
    const rec = recordValues(obs2.ref('x'));
    await rec.first();
    await set(w1.ref('x'), 'from-ns1');
    await set(w1.ref('x/deeper'), 'still-ns1');
    await set(w2.ref('x'), 'mine');
    await rec.untilVal('mine');
    assert.deepEqual(rec.values, [null, 'mine']);
    rec.off();
  });

  it('a fresh namespace is empty and is created on first use', T, async () => {
    const ns = h.ns('fresh');
    const c = h.client(ns);
    assert.equal((await get(c.ref('/'))).val(), null);
    await set(c.ref('created'), true);
    assert.deepEqual((await get(h.client(ns).ref('/'))).val(), { created: true });
  });

  it('push, transactions and onDisconnect stay within their namespace', T, async () => {
    const ns1 = h.ns('one');
    const ns2 = h.ns('two');
    const a1 = h.client(ns1);
    const a2 = h.client(ns2);
    const k1 = push(a1.ref('list'), 'in-1').key;
    await set(a1.ref('counter'), 10);
    await runTransaction(a2.ref('counter'), (v) => (v ?? 0) + 1);
    await set(a2.ref('warm'), true);
    await onDisconnect(a2.ref('presence')).set('gone');
    const obs1 = h.client(ns1);
    const obs2 = h.client(ns2);
    const rec2 = recordValues(obs2.ref('presence'));
    await rec2.first();
    goOffline(a2.db);
    await rec2.untilVal('gone');
    rec2.off();
    assert.deepEqual(keysOf(await get(obs1.ref('list'))), [k1]);
    assert.equal((await get(obs2.ref('list'))).val(), null);
    assert.equal((await get(obs1.ref('counter'))).val(), 10);
    assert.equal((await get(obs2.ref('counter'))).val(), 1);
    assert.equal((await get(obs1.ref('presence'))).val(), null);
  });

  it('admin apps are bound to their namespace too', T, async () => {
    const ns1 = h.ns('one');
    const ns2 = h.ns('two');
    const ad1 = h.admin(ns1);
    const ad2 = h.admin(ns2);
    await ad1.ref('cfg').set({ v: 1 });
    await ad2.ref('cfg').set({ v: 2 });
    assert.deepEqual((await ad1.ref('cfg').once('value')).val(), { v: 1 });
    assert.deepEqual((await get(h.client(ns2).ref('cfg'))).val(), { v: 2 });
  });
});
