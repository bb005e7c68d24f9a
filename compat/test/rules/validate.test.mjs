// `.validate` rules (--dev): refusals reach the SDK as PERMISSION_DENIED for set(), update()
// and transactions, nothing of a refused write is stored, and other clients never see it.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { get, set, update, push, remove, runTransaction, serverTimestamp } from 'firebase/database';
import { useHearth, T } from '../../lib/harness.mjs';
import { recordValues, roundTrip } from '../../lib/util.mjs';
import { adminWith, expectDenied, putRules } from '../../lib/rules.mjs';

const RULES = `{
  // Everyone may read and write, but the data must have the right shape.
  "rules": {
    ".read": true,
    ".write": true,
    "people": {
      "$id": {
        "age": { ".validate": "newData.isNumber() && newData.val() >= 0" },
        "name": { ".validate": "newData.isString() && newData.val().length > 0" },
      },
    },
    "counter": { ".validate": "newData.isNumber() && newData.val() <= 3" },
    "posts": {
      "$post": { ".validate": "newData.hasChildren(['title']) && !newData.child('spam').exists()" },
    },
  },
}`;

describe('rules: .validate', () => {
  const h = useHearth();

  it('set() of invalid data is refused with PERMISSION_DENIED; valid data is stored', T, async () => {
    const ns = h.ns('val');
    await putRules(h.server, ns, RULES);
    const [a, b] = [h.client(ns), h.client(ns)];
    const rec = recordValues(b.ref('people/p1'));
    await rec.first();
    await set(a.ref('people/p1/age'), 30);
    await rec.untilVal({ age: 30 });
    for (const bad of ['thirty', -1, true, { years: 3 }]) {
      const err = await expectDenied(set(a.ref('people/p1/age'), bad), `set(age, ${JSON.stringify(bad)})`);
      assert.equal(err.code, 'PERMISSION_DENIED');
    }
    await expectDenied(set(a.ref('people/p1'), { age: -5, name: 'ok' }), 'set(p1, {age: -5})');
    await expectDenied(set(a.ref('people/p1/name'), ''), "set(name, '')");
    // Deleting is not validated (newData is null).
    await set(a.ref('people/p1/age'), null);
    await rec.untilVal(null);
    await set(a.ref('people/p1'), { age: 0, name: 'Zed' });
    await rec.untilVal({ age: 0, name: 'Zed' });
    await roundTrip(b);
    // The other client saw only the valid states: no optimistic value of a refused write.
    assert.deepEqual(rec.values, [null, { age: 30 }, null, { age: 0, name: 'Zed' }]);
    assert.deepEqual((await get(h.client(ns).ref('people'))).val(), { p1: { age: 0, name: 'Zed' } });
    rec.off();
  });

  it('an update() with one invalid child is refused as a whole', T, async () => {
    const ns = h.ns('val');
    await putRules(h.server, ns, RULES);
    const [a, b] = [h.client(ns), h.client(ns)];
    await set(a.ref('people/p2'), { age: 20, name: 'Pat' });
    const rec = recordValues(b.ref('people'));
    await rec.untilVal({ p2: { age: 20, name: 'Pat' } });
    const err = await expectDenied(update(a.ref('people/p2'), { age: 'old', name: 'Patricia' }), 'update(p2, {age: "old"})');
    assert.equal(err.code, 'PERMISSION_DENIED');
    await expectDenied(
      update(a.ref('/'), { 'people/p3/name': 'New', 'people/p2/age': -1, 'elsewhere/x': 1 }),
      'multi-location update with a negative age',
    );
    await expectDenied(update(a.ref('posts'), { p1: { title: 'T', spam: true } }), 'update(posts) with spam');
    // Nothing of them was applied.
    assert.deepEqual((await get(h.client(ns).ref('/'))).val(), { people: { p2: { age: 20, name: 'Pat' } } });
    await update(a.ref('people/p2'), { age: 21, name: 'Patricia' });
    await rec.untilVal({ p2: { age: 21, name: 'Patricia' } });
    await update(a.ref('/'), { 'people/p3/name': 'New', 'posts/x': { title: 'Hello' } });
    assert.deepEqual((await get(h.client(ns).ref('/'))).val(), {
      people: { p2: { age: 21, name: 'Patricia' }, p3: { name: 'New' } },
      posts: { x: { title: 'Hello' } },
    });
    await expectDenied(push(a.ref('posts'), { body: 'no title' }), 'push(posts) without a title');
    rec.off();
  });

  it('a transaction producing invalid data is refused; the stored value is unchanged', T, async () => {
    const ns = h.ns('val');
    await putRules(h.server, ns, RULES);
    const [a, b] = [h.client(ns), h.client(ns)];
    const rec = recordValues(b.ref('counter'));
    await rec.first();
    for (let i = 1; i <= 3; i++) {
      const r = await runTransaction(a.ref('counter'), (v) => (v || 0) + 1);
      assert.equal(r.committed, true);
      assert.equal(r.snapshot.val(), i);
    }
    await rec.untilVal(3);
    // 4 fails `newData.val() <= 3`.
    await expectDenied(runTransaction(a.ref('counter'), (v) => (v || 0) + 1), 'transaction counter 3 -> 4');
    await expectDenied(runTransaction(a.ref('people/p1/age'), () => 'not a number'), 'transaction age -> string');
    // Another app's transaction is refused the same way (not b: its listener would see the
    // local optimistic value).
    await expectDenied(runTransaction(h.client(ns).ref('counter'), (v) => (v || 0) + 10), 'c: transaction counter 3 -> 13');
    assert.equal((await get(h.client(ns).ref('counter'))).val(), 3);
    const r = await runTransaction(a.ref('counter'), (v) => v - 1);
    assert.equal(r.committed, true);
    await rec.untilVal(2);
    await roundTrip(b);
    assert.deepEqual(rec.values, [null, 1, 2, 3, 2]);
    rec.off();
  });

  it('the admin SDK is not validated; an admin with an authvar override is', T, async () => {
    const ns = h.ns('val');
    await putRules(h.server, ns, RULES);
    const admin = adminWith(h.server, ns);
    h.defer(admin.dispose);
    const asUser = adminWith(h.server, ns, { authOverride: { uid: 'u1' } });
    h.defer(asUser.dispose);
    await admin.ref('people/p9/age').set('admin may');
    await expectDenied(asUser.ref('people/p9/age').set('user may not'), 'admin-as-u1 set(age, string)');
    await expectDenied(asUser.ref('counter').transaction(() => 99), 'admin-as-u1 transaction(counter, 99)');
    assert.equal((await get(h.client(ns).ref('people/p9/age'))).val(), 'admin may');
  });

  it('rules that read data, root and now: create-only nodes, bans, server timestamps', T, async () => {
    const ns = h.ns('val');
    await putRules(h.server, ns, {
      rules: {
        '.read': true,
        registry: { $name: { '.write': 'auth != null && !data.exists() && newData.exists()' } },
        bans: { '.write': false },
        posts: {
          $id: {
            '.write': "auth != null && !root.child('bans').child(auth.uid).exists()",
            '.validate': "newData.child('at').val() == now && newData.child('by').val() == auth.uid",
          },
        },
      },
    });
    const user = (uid) => h.client(ns, { emulatorMockUserToken: { sub: uid, user_id: uid } });
    const alice = user('alice');
    const bob = user('bob');
    await set(alice.ref('registry/alpha'), 'alice');
    await expectDenied(set(bob.ref('registry/alpha'), 'bob'), 'overwrite of a create-only node');
    await expectDenied(remove(alice.ref('registry/alpha')), 'delete of a create-only node');
    await set(bob.ref('registry/beta'), 'bob');
    assert.deepEqual((await get(h.client(ns).ref('registry'))).val(), { alpha: 'alice', beta: 'bob' });

    const admin = adminWith(h.server, ns);
    h.defer(admin.dispose);
    await admin.ref('bans/mallory').set(true);
    const mallory = user('mallory');
    await expectDenied(set(mallory.ref('posts/m1'), { at: serverTimestamp(), by: 'mallory' }), 'banned user post');
    // The server timestamp equals `now`; a client clock value does not.
    await set(alice.ref('posts/a1'), { at: serverTimestamp(), by: 'alice' });
    await expectDenied(set(alice.ref('posts/a2'), { at: Date.now() - 5_000, by: 'alice' }), 'post with a client time');
    await expectDenied(set(alice.ref('posts/a3'), { at: serverTimestamp(), by: 'bob' }), 'post in the name of bob');
    const posts = (await get(h.client(ns).ref('posts'))).val();
    assert.deepEqual(Object.keys(posts), ['a1']);
    assert.equal(typeof posts.a1.at, 'number');
    // Unbanned, mallory may post.
    await admin.ref('bans/mallory').remove();
    await set(mallory.ref('posts/m2'), { at: serverTimestamp(), by: 'mallory' });
  });
});
