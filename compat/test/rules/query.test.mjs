// Query-based rules (--dev): `.read` rules that look at `query.*` allow some queries of a
// location and refuse others (and the plain read).

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { get, set, query, limitToFirst, limitToLast, orderByKey, orderByChild, equalTo } from 'firebase/database';
import { useHearth, T } from '../../lib/harness.mjs';
import { keysOf } from '../../lib/util.mjs';
import { Listen, adminWith, expectDenied, putRules } from '../../lib/rules.mjs';

describe('rules: query-based rules', () => {
  const h = useHearth();
  const listen = (q, label) => {
    const l = new Listen(q, label);
    h.defer(() => l.off());
    return l;
  };

  async function seed(ns, n = 120) {
    const admin = adminWith(h.server, ns);
    h.defer(admin.dispose);
    const msgs = {};
    for (let i = 0; i < n; i++) msgs[`m${String(i).padStart(3, '0')}`] = { n: i, owner: i % 2 ? 'alice' : 'bob' };
    await admin.ref('messages').set(msgs);
    return msgs;
  }

  it('limitToFirst(10) is allowed, limitToFirst(100) and the plain read are denied', T, async () => {
    const ns = h.ns('q');
    await putRules(h.server, ns, { rules: { messages: { '.read': 'query.limitToFirst <= 50', '.write': true } } });
    await seed(ns);
    // Each check on its own client: no SDK cache can answer for the server.
    const small = await get(query(h.client(ns).ref('messages'), limitToFirst(10)));
    assert.deepEqual(keysOf(small), Array.from({ length: 10 }, (_, i) => `m00${i}`));
    const fifty = await get(query(h.client(ns).ref('messages'), orderByKey(), limitToFirst(50)));
    assert.equal(keysOf(fifty).length, 50);
    await expectDenied(get(query(h.client(ns).ref('messages'), limitToFirst(100))), 'get limitToFirst(100)');
    await expectDenied(get(query(h.client(ns).ref('messages'), limitToFirst(51))), 'get limitToFirst(51)');
    await expectDenied(get(h.client(ns).ref('messages')), 'get(messages) without a query');
    await expectDenied(get(query(h.client(ns).ref('messages'), limitToLast(10))), 'get limitToLast(10)');

    // The same for listens, two apps.
    const [c1, c2] = [h.client(ns), h.client(ns)];
    const ok = listen(query(c1.ref('messages'), limitToFirst(10)), 'c1 limitToFirst(10)');
    const big = listen(query(c2.ref('messages'), limitToFirst(100)), 'c2 limitToFirst(100)');
    const plain = listen(c2.ref('messages'), 'c2 messages');
    await big.cancelled();
    await plain.cancelled();
    const first = await ok.first();
    assert.equal(Object.keys(first).length, 10);
    // The allowed query keeps receiving changes, written by the other app (.write: true).
    await set(c2.ref('messages/m000/n'), 'changed');
    await ok.untilVal({ ...first, m000: { ...first.m000, n: 'changed' } });
  });

  it('rules on orderBy and equalTo: only the query for the own owner is allowed', T, async () => {
    const ns = h.ns('q');
    await putRules(h.server, ns, {
      rules: {
        messages: {
          '.indexOn': ['owner'],
          '.read': "auth != null && query.orderByChild == 'owner' && query.equalTo == auth.uid",
        },
      },
    });
    await seed(ns, 10);
    const alice = h.client(ns, { emulatorMockUserToken: { sub: 'alice', user_id: 'alice' } });
    const mine = await get(query(alice.ref('messages'), orderByChild('owner'), equalTo('alice')));
    assert.deepEqual(keysOf(mine), ['m001', 'm003', 'm005', 'm007', 'm009']);
    const alice2 = h.client(ns, { emulatorMockUserToken: { sub: 'alice', user_id: 'alice' } });
    await expectDenied(get(query(alice2.ref('messages'), orderByChild('owner'), equalTo('bob'))), "alice: equalTo('bob')");
    const alice3 = h.client(ns, { emulatorMockUserToken: { sub: 'alice', user_id: 'alice' } });
    await expectDenied(get(query(alice3.ref('messages'), orderByChild('n'), equalTo(1))), 'alice: orderByChild(n)');
    await expectDenied(get(query(h.client(ns).ref('messages'), orderByChild('owner'), equalTo('alice'))), 'anonymous query');
  });
});
