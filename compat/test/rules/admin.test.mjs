// firebase-admin and rules (--dev): the `owner` admin bypasses rules; with
// databaseAuthVariableOverride the rules see the given auth variable, or none for null.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { get } from 'firebase/database';
import { useHearth, T } from '../../lib/harness.mjs';
import { recordValues } from '../../lib/util.mjs';
import { adminWith, expectDenied, putRules, getRules } from '../../lib/rules.mjs';

const RULES = {
  rules: {
    // Nothing is open at the root: only the users' own nodes.
    '.read': false,
    '.write': false,
    users: {
      $uid: {
        '.read': 'auth != null && auth.uid == $uid',
        '.write': 'auth != null && auth.uid == $uid',
      },
    },
    locked: { '.read': false, '.write': false, '.validate': false },
  },
};

describe('rules: admin SDK', () => {
  const h = useHearth();
  const admin = (ns, o) => {
    const a = adminWith(h.server, ns, o);
    h.defer(a.dispose);
    return a;
  };
  const user = (ns, uid) => h.client(ns, { emulatorMockUserToken: { sub: uid, user_id: uid } });

  it('the owner admin reads and writes everywhere, past .read/.write/.validate', T, async () => {
    const ns = h.ns('adm');
    await putRules(h.server, ns, RULES);
    const a = admin(ns);
    await a.ref('locked/x').set({ y: 1 });
    await a.ref('users/bob').set({ name: 'Bob' });
    await a.ref('/').update({ 'users/alice/name': 'Alice', 'top': 'level' });
    const t = await a.ref('locked/count').transaction((v) => (v || 0) + 1);
    assert.equal(t.committed, true);
    assert.deepEqual((await a.ref('/').once('value')).val(), {
      locked: { x: { y: 1 }, count: 1 },
      users: { bob: { name: 'Bob' }, alice: { name: 'Alice' } },
      top: 'level',
    });
    assert.deepEqual((await a.ref('locked').get()).val(), { x: { y: 1 }, count: 1 });
    // The rules still apply to clients: alice sees her node (written by the admin) only.
    const alice = user(ns, 'alice');
    const rec = recordValues(alice.ref('users/alice'));
    await rec.untilVal({ name: 'Alice' });
    await a.ref('users/alice/name').set('Alice Admin-Edited');
    await rec.untilVal({ name: 'Alice Admin-Edited' });
    rec.off();
    await expectDenied(get(alice.ref('locked')), 'alice get(locked)');
    await expectDenied(get(alice.ref('users/bob')), 'alice get(users/bob)');
    // The rules in force are the ones uploaded.
    const rules = await getRules(h.server, ns);
    assert.equal(rules.status, 200);
    assert.deepEqual(JSON.parse(rules.text), RULES);
  });

  it("an admin with authvar {uid: 'alice'} may write alice's node and is denied bob's", T, async () => {
    const ns = h.ns('adm');
    await putRules(h.server, ns, RULES);
    const asAlice = admin(ns, { authOverride: { uid: 'alice' } });
    await asAlice.ref('users/alice').set({ via: 'admin-as-alice' });
    assert.deepEqual((await asAlice.ref('users/alice').once('value')).val(), { via: 'admin-as-alice' });
    assert.deepEqual((await asAlice.ref('users/alice').get()).val(), { via: 'admin-as-alice' });
    const err = await expectDenied(asAlice.ref('users/bob').set({ via: 'admin-as-alice' }), 'admin-as-alice set(users/bob)');
    assert.equal(err.code, 'PERMISSION_DENIED');
    await expectDenied(asAlice.ref('users').update({ 'bob/x': 1 }), 'admin-as-alice update(users/bob/x)');
    await expectDenied(asAlice.ref('users/bob').once('value'), 'admin-as-alice once(users/bob)');
    await expectDenied(asAlice.ref('users/bob').get(), 'admin-as-alice get(users/bob)');
    await expectDenied(asAlice.ref('locked/t').transaction(() => 1), 'admin-as-alice transaction(locked/t)');
    // A real alice client sees what the overridden admin wrote; the full admin confirms
    // nothing reached bob's node.
    assert.deepEqual((await get(user(ns, 'alice').ref('users/alice'))).val(), { via: 'admin-as-alice' });
    assert.equal((await admin(ns).ref('users/bob').once('value')).val(), null);
    assert.equal((await admin(ns).ref('locked').once('value')).val(), null);
  });

  it('an admin with authvar null is unauthenticated: denied everywhere the rules need auth', T, async () => {
    const ns = h.ns('adm');
    await putRules(h.server, ns, {
      rules: {
        ...RULES.rules,
        public: { '.read': true, '.write': 'auth == null' },
      },
    });
    const anon = admin(ns, { authOverride: null });
    const full = admin(ns);
    await full.ref('users/alice').set({ name: 'Alice' });
    await expectDenied(anon.ref('users/alice').set({ name: 'x' }), 'admin-as-null set(users/alice)');
    await expectDenied(anon.ref('users/alice').once('value'), 'admin-as-null once(users/alice)');
    await expectDenied(anon.ref('users/alice').get(), 'admin-as-null get(users/alice)');
    // `auth == null` holds for it, as for an unauthenticated client.
    await anon.ref('public/note').set('from nobody');
    assert.equal((await anon.ref('public/note').once('value')).val(), 'from nobody');
    await expectDenied(admin(ns, { authOverride: { uid: 'alice' } }).ref('public/note').set('x'), 'admin-as-alice set(public/note)');
    assert.deepEqual((await full.ref('/').once('value')).val(), { users: { alice: { name: 'Alice' } }, public: { note: 'from nobody' } });
  });
});
