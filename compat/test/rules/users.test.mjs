// Security rules with `auth.uid` (emulator mock users, --dev): each user may read and write
// only their own node; writes, get() and listens elsewhere are refused with PERMISSION_DENIED;
// onDisconnect operations are checked when registered and again when they run.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { get, set, update, onDisconnect, goOffline } from 'firebase/database';
import { useHearth, T } from '../../lib/harness.mjs';
import { recordAdminValues } from '../../lib/util.mjs';
import { Listen, expectDenied, putRules, adminWith } from '../../lib/rules.mjs';

const OWN_NODE = {
  rules: {
    users: {
      $uid: {
        '.read': 'auth != null && auth.uid == $uid',
        '.write': 'auth != null && auth.uid == $uid',
      },
    },
  },
};

describe('rules: auth.uid of mock users', () => {
  const h = useHearth();
  const user = (ns, uid) => h.client(ns, { emulatorMockUserToken: { sub: uid, user_id: uid } });
  const admin = (ns, o) => {
    const a = adminWith(h.server, ns, o);
    h.defer(a.dispose);
    return a;
  };

  it('alice sets and gets her own node; another user sees it only if the rules allow', T, async () => {
    const ns = h.ns('uid');
    await putRules(h.server, ns, OWN_NODE);
    const alice = user(ns, 'alice');
    const bob = user(ns, 'bob');
    await set(alice.ref('users/alice'), { name: 'Alice', n: 1 });
    assert.deepEqual((await get(alice.ref('users/alice'))).val(), { name: 'Alice', n: 1 });
    await set(bob.ref('users/bob'), { name: 'Bob' });
    assert.deepEqual((await get(bob.ref('users/bob'))).val(), { name: 'Bob' });
    // A second app of alice (another connection) reads what the first wrote.
    assert.deepEqual((await get(user(ns, 'alice').ref('users/alice/name'))).val(), 'Alice');
    // An admin sees both.
    assert.deepEqual((await admin(ns).ref('users').once('value')).val(), {
      alice: { name: 'Alice', n: 1 },
      bob: { name: 'Bob' },
    });
  });

  it("alice is denied bob's node: set and update reject, get rejects, the listen is cancelled", T, async () => {
    const ns = h.ns('uid');
    await putRules(h.server, ns, OWN_NODE);
    const bob = user(ns, 'bob');
    const alice = user(ns, 'alice');
    await set(bob.ref('users/bob'), { secret: 'b' });

    const err = await expectDenied(set(alice.ref('users/bob'), { hacked: true }), "alice set(users/bob)");
    assert.equal(err.code, 'PERMISSION_DENIED');
    const err2 = await expectDenied(set(alice.ref('users/bob/secret'), 'x'), "alice set(users/bob/secret)");
    assert.equal(err2.code, 'PERMISSION_DENIED');
    await expectDenied(update(alice.ref('users'), { 'alice/ok': 1, 'bob/secret': 'x' }), 'alice multi-path update touching bob');
    await expectDenied(get(alice.ref('users/bob')), "alice get(users/bob)");
    await expectDenied(get(alice.ref('users')), 'alice get(users)');

    const listen = new Listen(alice.ref('users/bob'), 'alice onValue(users/bob)');
    h.defer(() => listen.off());
    await listen.cancelled();

    // Nothing of the refused writes reached the database (the update was atomic, too).
    assert.deepEqual((await get(bob.ref('users/bob'))).val(), { secret: 'b' });
    assert.equal((await admin(ns).ref('users/alice').once('value')).val(), null);
    // An unauthenticated client is denied both.
    const anon = h.client(ns);
    await expectDenied(get(anon.ref('users/alice')), 'anonymous get(users/alice)');
    await expectDenied(set(anon.ref('users/alice'), 1), 'anonymous set(users/alice)');
  });

  it('a denied listen does not disturb the allowed listens of the same connection', T, async () => {
    const ns = h.ns('uid');
    await putRules(h.server, ns, OWN_NODE);
    const alice = user(ns, 'alice');
    const bob = user(ns, 'bob');
    const own = new Listen(alice.ref('users/alice'), 'alice onValue(users/alice)');
    h.defer(() => own.off());
    await own.untilVal(null);
    const foreign = new Listen(alice.ref('users/bob'), 'alice onValue(users/bob)');
    h.defer(() => foreign.off());
    await foreign.cancelled();
    await set(alice.ref('users/alice/mood'), 'fine');
    await own.untilVal({ mood: 'fine' });
    await set(bob.ref('users/bob/mood'), 'hidden');
    // alice's second app also sees her own updates, written by the first.
    const alice2 = new Listen(user(ns, 'alice').ref('users/alice'), 'alice#2 onValue(users/alice)');
    h.defer(() => alice2.off());
    await alice2.untilVal({ mood: 'fine' });
    await set(alice.ref('users/alice/mood'), 'great');
    await own.untilVal({ mood: 'great' });
    await alice2.untilVal({ mood: 'great' });
    assert.deepEqual(foreign.values, [], 'the cancelled listen never got data');
  });

  it('onDisconnect on a path the user cannot write is refused at registration', T, async () => {
    const ns = h.ns('uid');
    await putRules(h.server, ns, OWN_NODE);
    const alice = user(ns, 'alice');
    const err = await expectDenied(onDisconnect(alice.ref('users/bob/status')).set('offline'), 'onDisconnect(users/bob/status).set');
    assert.equal(err.code, 'PERMISSION_DENIED');
    await expectDenied(onDisconnect(alice.ref('users')).update({ 'bob/status': 'x' }), 'onDisconnect(users).update(bob/...)');
    await expectDenied(onDisconnect(alice.ref('users/bob')).remove(), 'onDisconnect(users/bob).remove');
    // Her own node is fine, and the operation runs when she goes away.
    await onDisconnect(alice.ref('users/alice/status')).set('offline');
    const watcher = recordAdminValues(admin(ns).ref('users'));
    await watcher.first();
    goOffline(alice.db);
    await watcher.untilVal({ alice: { status: 'offline' } });
    watcher.off();
  });

  it('an onDisconnect allowed at registration is checked again when it runs', T, async () => {
    const ns = h.ns('uid');
    await putRules(h.server, ns, OWN_NODE);
    const alice = user(ns, 'alice');
    // Registered in this order; the server runs them in order at disconnect.
    await onDisconnect(alice.ref('users/alice/b')).set('b-ran');
    await onDisconnect(alice.ref('users/alice/a')).set('a-ran');
    // New rules: alice may still write users/alice/a, no longer users/alice/b.
    await putRules(h.server, ns, {
      rules: {
        users: {
          $uid: {
            '.read': 'auth != null && auth.uid == $uid',
            a: { '.write': 'auth != null && auth.uid == $uid' },
          },
        },
      },
    });
    const watcher = recordAdminValues(admin(ns).ref('users/alice'));
    await watcher.first();
    goOffline(alice.db);
    await watcher.untilVal({ a: 'a-ran' });
    // users/alice/b was refused when it ran (the server skipped it): only a is there.
    assert.deepEqual((await admin(ns).ref('users/alice').once('value')).val(), { a: 'a-ran' });
    watcher.off();
  });
});
