// Rules that change under live listens (--dev): every listen the new rules no longer allow
// is cancelled (onValue's cancel callback fires with PERMISSION_DENIED); the others keep
// receiving data.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { set, query, orderByKey, limitToFirst } from 'firebase/database';
import { useHearth, T } from '../../lib/harness.mjs';
import { recordAdminValues } from '../../lib/util.mjs';
import { Listen, adminWith, expectDenied, putRules } from '../../lib/rules.mjs';

const OPEN = { rules: { '.read': true, '.write': true } };

describe('rules: listens revoked by a rules change', () => {
  const h = useHearth();
  const user = (ns, uid) => h.client(ns, { emulatorMockUserToken: { sub: uid, user_id: uid } });
  const listen = (q, label) => {
    const l = new Listen(q, label);
    h.defer(() => l.off());
    return l;
  };
  const admin = (ns) => {
    const a = adminWith(h.server, ns);
    h.defer(a.dispose);
    return a;
  };

  it('stricter rules cancel the listens they refuse, and only those', T, async () => {
    const ns = h.ns('rev');
    await putRules(h.server, ns, OPEN);
    const a = admin(ns);
    await a.ref('/').set({ users: { alice: { n: 0 }, bob: { n: 0 } }, public: { feed: 'f0' } });
    const alice = user(ns, 'alice');
    const anon = h.client(ns);

    const aliceOwn = listen(alice.ref('users/alice'), 'alice users/alice');
    const aliceBob = listen(alice.ref('users/bob'), 'alice users/bob');
    const aliceFeed = listen(alice.ref('public/feed'), 'alice public/feed');
    const anonFeed = listen(anon.ref('public/feed'), 'anon public/feed');
    const anonAlice = listen(anon.ref('users/alice'), 'anon users/alice');
    await aliceOwn.untilVal({ n: 0 });
    await aliceBob.untilVal({ n: 0 });
    await aliceFeed.untilVal('f0');
    await anonFeed.untilVal('f0');
    await anonAlice.untilVal({ n: 0 });

    await putRules(h.server, ns, {
      rules: {
        public: { '.read': true },
        users: { $uid: { '.read': 'auth != null && auth.uid == $uid', '.write': 'auth != null && auth.uid == $uid' } },
      },
    });
    await aliceBob.cancelled();
    await anonAlice.cancelled();

    // The still-allowed listens (on both connections) keep receiving data.
    await a.ref('users/alice/n').set(1);
    await a.ref('public/feed').set('f1');
    await a.ref('users/bob/n').set(1);
    await aliceOwn.untilVal({ n: 1 });
    await aliceFeed.untilVal('f1');
    await anonFeed.untilVal('f1');
    // Alice's own write is answered after every push the server queued for her connection
    // before it, so users/bob/n = 1 would have reached her by now.
    await set(alice.ref('users/alice/n'), 2);
    await aliceOwn.untilVal({ n: 2 });
    assert.equal(aliceOwn.error, null);
    assert.equal(aliceFeed.error, null);
    assert.equal(anonFeed.error, null);
    // The cancelled ones got nothing after their last value before the change: alice's write
    // above was a round trip on her connection after users/bob/n = 1, and anon's feed f1 was
    // pushed to anon after users/alice/n = 1.
    assert.deepEqual(aliceBob.values, [{ n: 0 }]);
    assert.deepEqual(anonAlice.values, [{ n: 0 }]);
    // And a new listen on a refused path is refused right away.
    await listen(user(ns, 'alice').ref('users/bob'), 'alice#2 users/bob').cancelled();
    await expectDenied(set(anon.ref('public/feed'), 'nope'), 'anon set(public/feed)');
  });

  it('a listen on a parent is cancelled when only part of it becomes unreadable', T, async () => {
    const ns = h.ns('rev');
    await putRules(h.server, ns, OPEN);
    const a = admin(ns);
    await a.ref('room').set({ open: { m: 1 }, secret: { m: 2 } });
    const [c1, c2] = [h.client(ns), h.client(ns)];
    const parent = listen(c1.ref('room'), 'c1 room');
    const child = listen(c2.ref('room/open'), 'c2 room/open');
    await parent.untilVal({ open: { m: 1 }, secret: { m: 2 } });
    await child.untilVal({ m: 1 });
    await putRules(h.server, ns, { rules: { room: { open: { '.read': true } } } });
    // The parent's read granted at /room is gone; the child's at /room/open remains.
    await parent.cancelled();
    await a.ref('room/open/m').set(10);
    await child.untilVal({ m: 10 });
  });

  it('a query listen is cancelled when a query rule stops allowing it', T, async () => {
    const ns = h.ns('rev');
    await putRules(h.server, ns, { rules: { msgs: { '.read': 'query.limitToFirst <= 50', '.write': true } } });
    const a = admin(ns);
    await a.ref('msgs').set({ a: 1, b: 2, c: 3 });
    const c = h.client(ns);
    const q20 = listen(query(c.ref('msgs'), orderByKey(), limitToFirst(20)), 'limitToFirst(20)');
    const q2 = listen(query(c.ref('msgs'), orderByKey(), limitToFirst(2)), 'limitToFirst(2)');
    await q20.untilVal({ a: 1, b: 2, c: 3 });
    await q2.untilVal({ a: 1, b: 2 });
    await putRules(h.server, ns, { rules: { msgs: { '.read': 'query.limitToFirst <= 10', '.write': true } } });
    await q20.cancelled();
    await a.ref('msgs/a').set(100);
    await q2.untilVal({ a: 100, b: 2 });
  });

  it('rules that grant more do not disturb existing listens; a refused path opens up', T, async () => {
    const ns = h.ns('rev');
    await putRules(h.server, ns, { rules: { pub: { '.read': true, '.write': true } } });
    const c = h.client(ns);
    const pub = listen(c.ref('pub'), 'pub');
    await pub.untilVal(null);
    const priv = listen(c.ref('priv'), 'priv');
    await priv.cancelled();
    await putRules(h.server, ns, { rules: { '.read': true, '.write': true } });
    await set(c.ref('priv'), 'now open');
    const again = listen(h.client(ns).ref('priv'), 'priv (new listen)');
    await again.untilVal('now open');
    await set(c.ref('pub'), 'still here');
    await pub.untilVal('still here');
    assert.equal(pub.error, null);
  });

  it('admin listens: overridden (authvar) ones are cancelled, the owner admin keeps its listen', T, async () => {
    const ns = h.ns('rev');
    await putRules(h.server, ns, OPEN);
    const full = admin(ns);
    await full.ref('users').set({ alice: { n: 0 }, bob: { n: 0 } });
    const asAlice = adminWith(h.server, ns, { authOverride: { uid: 'alice' } });
    h.defer(asAlice.dispose);
    const cancelled = [];
    const onBob = asAlice.ref('users/bob').on('value', () => {}, (err) => cancelled.push(err));
    h.defer(() => asAlice.ref('users/bob').off('value', onBob));
    const aliceOwn = recordAdminValues(asAlice.ref('users/alice'), 'admin-as-alice users/alice');
    const ownerAll = recordAdminValues(full.ref('users'), 'owner users');
    h.defer(() => aliceOwn.off());
    h.defer(() => ownerAll.off());
    await aliceOwn.untilVal({ n: 0 });
    await ownerAll.untilVal({ alice: { n: 0 }, bob: { n: 0 } });
    await putRules(h.server, ns, {
      rules: { users: { $uid: { '.read': 'auth != null && auth.uid == $uid', '.write': 'auth != null && auth.uid == $uid' } } },
    });
    await full.ref('users/bob/n').set(1);
    await ownerAll.untilVal({ alice: { n: 0 }, bob: { n: 1 } });
    await asAlice.ref('users/alice/n').set(1);
    await aliceOwn.untilVal({ n: 1 });
    await ownerAll.untilVal({ alice: { n: 1 }, bob: { n: 1 } });
    // The cancel push precedes the data written after the rules change.
    assert.equal(cancelled.length, 1, 'admin-as-alice users/bob cancel callback');
    assert.equal(cancelled[0].code, 'PERMISSION_DENIED', String(cancelled[0]));
    assert.equal(aliceOwn.error, null);
    assert.equal(ownerAll.error, null);
  });
});
