// Rules over REST (--dev): anonymous requests of denied paths get 401 "Permission denied",
// admin requests (Bearer owner) bypass rules, mock tokens in `auth=` are users, and event
// streams get `event: cancel` (and end) when new rules refuse them.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { useHearth, T } from '../../lib/harness.mjs';
import { SseStream } from '../rest/rest-client.mjs';
import { OWNER_HEADERS, http, putRules, unsignedJwt } from '../../lib/rules.mjs';

const RULES = {
  rules: {
    public: { '.read': true, '.write': true },
    secret: { '.read': false, '.write': false },
    users: { $uid: { '.read': 'auth != null && auth.uid == $uid', '.write': 'auth != null && auth.uid == $uid' } },
  },
};

const mockToken = (uid) => unsignedJwt({ sub: uid, user_id: uid, iat: 0, aud: 'demo-hearth', iss: 'https://securetoken.google.com/demo-hearth' });

describe('rules: REST', () => {
  const h = useHearth();
  const url = (ns, p, params = {}) => `http://127.0.0.1:${h.port}/${p}.json?${new URLSearchParams({ ns, ...params })}`;
  const open = (...args) => {
    const s = new SseStream(...args);
    h.defer(() => s.close());
    return s;
  };

  it('an anonymous GET of a denied path is 401 Permission denied; Bearer owner succeeds', T, async () => {
    const ns = h.ns('rest');
    await putRules(h.server, ns, RULES);
    const put = await http(url(ns, 'secret'), { method: 'PUT', body: { code: 42 }, headers: OWNER_HEADERS });
    assert.equal(put.status, 200, put.text);
    const denied = await http(url(ns, 'secret'));
    assert.equal(denied.status, 401, denied.text);
    assert.deepEqual(denied.json, { error: 'Permission denied' });
    const deniedChild = await http(url(ns, 'secret/code'));
    assert.equal(deniedChild.status, 401);
    assert.deepEqual(deniedChild.json, { error: 'Permission denied' });
    const owner = await http(url(ns, 'secret'), { headers: OWNER_HEADERS });
    assert.equal(owner.status, 200, owner.text);
    assert.deepEqual(owner.json, { code: 42 });
    // ...also as ?auth=owner.
    const ownerParam = await http(url(ns, 'secret', { auth: 'owner' }));
    assert.equal(ownerParam.status, 200, ownerParam.text);
    assert.deepEqual(ownerParam.json, { code: 42 });
    // Anonymous writes of denied paths are refused and change nothing.
    for (const method of ['PUT', 'PATCH', 'POST', 'DELETE']) {
      const body = method === 'DELETE' ? undefined : method === 'PATCH' ? { code: 0 } : 'x';
      const r = await http(url(ns, 'secret'), { method, body });
      assert.equal(r.status, 401, `${method}: ${r.text}`);
      assert.deepEqual(r.json, { error: 'Permission denied' }, method);
    }
    assert.deepEqual((await http(url(ns, 'secret'), { headers: OWNER_HEADERS })).json, { code: 42 });
    // The root is not readable anonymously either (no grant at / or above).
    assert.equal((await http(url(ns, ''))).status, 401);
    // Allowed paths work anonymously.
    assert.equal((await http(url(ns, 'public/x'), { method: 'PUT', body: 1 })).status, 200);
    const pub = await http(url(ns, 'public'));
    assert.equal(pub.status, 200);
    assert.deepEqual(pub.json, { x: 1 });
  });

  it('a mock user token in auth= reads and writes its own node only', T, async () => {
    const ns = h.ns('rest');
    await putRules(h.server, ns, RULES);
    const alice = mockToken('alice');
    const w = await http(url(ns, 'users/alice', { auth: alice }), { method: 'PUT', body: { n: 1 } });
    assert.equal(w.status, 200, w.text);
    const r = await http(url(ns, 'users/alice', { auth: alice }));
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json, { n: 1 });
    const other = await http(url(ns, 'users/bob', { auth: alice }));
    assert.equal(other.status, 401);
    assert.deepEqual(other.json, { error: 'Permission denied' });
    const otherWrite = await http(url(ns, 'users/bob', { auth: alice }), { method: 'PUT', body: 1 });
    assert.equal(otherWrite.status, 401);
    const bearer = await http(url(ns, 'users/alice'), { headers: { authorization: `Bearer ${alice}` } });
    assert.equal(bearer.status, 200, bearer.text);
    assert.equal((await http(url(ns, 'users/alice'))).status, 401, 'anonymous');
  });

  it('a denied stream is refused; a stream gets event: cancel and ends when rules change to deny it', T, async () => {
    const ns = h.ns('rest');
    await putRules(h.server, ns, { rules: { '.read': true, '.write': true } });
    await http(url(ns, 'feed'), { method: 'PUT', body: { a: 1 } });
    await http(url(ns, 'open'), { method: 'PUT', body: 'o' });
    const doomed = open(url(ns, 'feed'));
    const doomed2 = open(url(ns, 'feed/a'));
    const survivor = open(url(ns, 'open'));
    await doomed.untilData(1);
    await doomed2.untilData(1);
    await survivor.untilData(1);
    assert.equal(doomed.status, 200);
    assert.deepEqual(doomed.dataEvents[0].data, { path: '/', data: { a: 1 } });

    await putRules(h.server, ns, { rules: { open: { '.read': true, '.write': true } } });
    for (const s of [doomed, doomed2]) {
      await s.until((x) => x.events.some((e) => e.event === 'cancel'), 10_000, 'event: cancel');
      await s.untilEnd();
    }
    const cancel = doomed.events.find((e) => e.event === 'cancel');
    // Firebase REST docs: "The data for this event is null".
    assert.equal(cancel.data, null, `cancel: ${JSON.stringify(cancel)}`);
    // No data after the cancel.
    const after = doomed.events.slice(doomed.events.indexOf(cancel) + 1);
    assert.deepEqual(after.filter((e) => e.event === 'put' || e.event === 'patch'), []);

    // The other stream is still served.
    await http(url(ns, 'open'), { method: 'PUT', body: 'o2' });
    await survivor.untilData(2);
    assert.deepEqual(survivor.dataEvents[1].data, { path: '/', data: 'o2' });
    assert.equal(survivor.ended, false);
    assert.equal(survivor.events.some((e) => e.event === 'cancel'), false);

    // A new anonymous stream of the denied path is refused with 401.
    const refused = open(url(ns, 'feed'));
    await refused.opened.promise;
    assert.equal(refused.status, 401);
    // The admin still streams it.
    const adminStream = open(url(ns, 'feed'), { headers: OWNER_HEADERS });
    await adminStream.untilData(1);
    assert.equal(adminStream.status, 200);
    assert.deepEqual(adminStream.dataEvents[0].data, { path: '/', data: { a: 1 } });
  });

  it('streams with a user token: the own node survives a rules change, the other one is cancelled', T, async () => {
    const ns = h.ns('rest');
    await putRules(h.server, ns, { rules: { '.read': 'auth != null', '.write': 'auth != null' } });
    const alice = mockToken('alice');
    const own = open(url(ns, 'users/alice', { auth: alice }));
    const other = open(url(ns, 'users/bob', { auth: alice }));
    const anon = open(url(ns, 'users/alice'));
    await anon.opened.promise;
    assert.equal(anon.status, 401, 'anonymous stream');
    await own.untilData(1);
    await other.untilData(1);
    await putRules(h.server, ns, RULES);
    await other.until((x) => x.events.some((e) => e.event === 'cancel'), 10_000, 'event: cancel');
    await other.untilEnd();
    const w = await http(url(ns, 'users/alice/n', { auth: alice }), { method: 'PUT', body: 5 });
    assert.equal(w.status, 200, w.text);
    await own.untilData(2);
    assert.deepEqual(own.dataEvents[1].data, { path: '/n', data: 5 });
    assert.equal(own.events.some((e) => e.event === 'cancel'), false);
  });
});
