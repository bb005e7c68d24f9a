// firebase-admin (Node) in emulator mode (http:// URL => token "owner") together
// with ordinary client apps.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { get, set, push, update, runTransaction } from 'firebase/database';
import { ServerValue } from 'firebase-admin/database';
import { useHearth, T } from '../lib/harness.mjs';
import { recordValues, recordAdminValues, keysOf } from '../lib/util.mjs';

describe('admin', () => {
  const h = useHearth();

  it('admin set() is seen by a client listener and client get()', T, async () => {
    const ns = h.ns();
    const admin = h.admin(ns);
    const c = h.client(ns);
    const rec = recordValues(c.ref('cfg'));
    await rec.first();
    await admin.ref('cfg').set({ mode: 'on', limits: { max: 5 } });
    await rec.untilVal({ mode: 'on', limits: { max: 5 } });
    assert.deepEqual((await get(h.client(ns).ref('cfg/limits'))).val(), { max: 5 });
    rec.off();
  });

  it('client writes are seen by admin once()/get() and admin listeners', T, async () => {
    const ns = h.ns();
    const admin = h.admin(ns);
    const c = h.client(ns);
    const rec = recordAdminValues(admin.ref('from-client'));
    await rec.first();
    await set(c.ref('from-client'), { hello: 'admin' });
    await rec.untilVal({ hello: 'admin' });
    assert.deepEqual((await admin.ref('from-client').once('value')).val(), { hello: 'admin' });
    assert.deepEqual((await h.admin(ns).ref('from-client').get()).val(), { hello: 'admin' });
    rec.off();
  });

  it('admin update(), push() and remove() interoperate with clients', T, async () => {
    const ns = h.ns();
    const admin = h.admin(ns);
    const c = h.client(ns);
    await admin.ref('data').update({ 'a/b': 1, 'c': 'x' });
    const k1 = admin.ref('data/list').push().key;
    await admin.ref(`data/list/${k1}`).set('first');
    const k2 = (await admin.ref('data/list').push('second')).key;
    const p3 = push(c.ref('data/list'), 'third');
    const k3 = p3.key;
    await p3;
    const snap = await admin.ref('data').once('value');
    assert.deepEqual(snap.val().a, { b: 1 });
    assert.deepEqual(keysOf(snap.child('list')), [k1, k2, k3]);
    await admin.ref('data/c').remove();
    assert.equal((await get(h.client(ns).ref('data/c'))).exists(), false);
  });

  it('admin transaction() commits and interleaves with client transactions', { timeout: 40_000 }, async () => {
    const ns = h.ns();
    const admin = h.admin(ns);
    const c = h.client(ns);
    const res = await admin.ref('count').transaction((v) => (v || 0) + 1);
    assert.equal(res.committed, true);
    assert.equal(res.snapshot.val(), 1);
    const loopAdmin = (async () => {
      for (let i = 0; i < 10; i++) await admin.ref('count').transaction((v) => (v || 0) + 1);
    })();
    const loopClient = (async () => {
      for (let i = 0; i < 10; i++) await runTransaction(c.ref('count'), (v) => (v || 0) + 1);
    })();
    await Promise.all([loopAdmin, loopClient]);
    assert.equal((await get(h.client(ns).ref('count'))).val(), 21);
  });

  it('admin ServerValue.TIMESTAMP and increment()', T, async () => {
    const ns = h.ns();
    const admin = h.admin(ns);
    const t0 = Date.now();
    await admin.ref('sv').set({ at: ServerValue.TIMESTAMP, n: 5 });
    await admin.ref('sv/n').set(ServerValue.increment(3));
    const v = (await get(h.client(ns).ref('sv'))).val();
    assert.equal(v.n, 8);
    assert.ok(Math.abs(v.at - t0) < 5_000, `timestamp ${v.at} vs ${t0}`);
  });

  it('admin priorities and ordered queries', T, async () => {
    const ns = h.ns();
    const admin = h.admin(ns);
    await admin.ref('p/x').setWithPriority('X', 3);
    await admin.ref('p/y').setWithPriority('Y', 1);
    await admin.ref('p/z').set('Z');
    const snap = await admin.ref('p').orderByPriority().once('value');
    assert.deepEqual(keysOf(snap), ['z', 'y', 'x']);
    await admin.ref('scores').set({ a: { s: 3 }, b: { s: 1 }, c: { s: 2 } });
    const top2 = await admin.ref('scores').orderByChild('s').limitToLast(2).once('value');
    assert.deepEqual(keysOf(top2), ['c', 'a']);
    const clientSnap = await get(h.client(ns).ref('p/x'));
    assert.equal(clientSnap.priority, 3);
  });

  it('admin child_added listener sees client pushes', T, async () => {
    const ns = h.ns();
    const admin = h.admin(ns);
    const c = h.client(ns);
    const seen = [];
    let resolveAll;
    const all = new Promise((r) => (resolveAll = r));
    const cb = (s) => {
      seen.push(s.val());
      if (seen.length === 3) resolveAll();
    };
    admin.ref('events').on('child_added', cb);
    await admin.ref('events').once('value'); // listener established
    await push(c.ref('events'), 'e1');
    await push(c.ref('events'), 'e2');
    await update(c.ref('events'), { zzz: 'e3' });
    await all;
    admin.ref('events').off('child_added', cb);
    assert.deepEqual(seen, ['e1', 'e2', 'e3']);
  });

  it('client with an emulator mock user token (unsigned JWT) can read and write', T, async () => {
    const ns = h.ns();
    const user = h.client(ns, { emulatorMockUserToken: { sub: 'alice', user_id: 'alice' } });
    const ownerCtx = h.client(ns, { emulatorMockUserToken: 'owner' });
    await set(user.ref('users/alice'), { name: 'Alice' });
    assert.deepEqual((await get(ownerCtx.ref('users/alice'))).val(), { name: 'Alice' });
    const admin = h.admin(ns);
    assert.deepEqual((await admin.ref('users').once('value')).val(), { alice: { name: 'Alice' } });
  });
});
