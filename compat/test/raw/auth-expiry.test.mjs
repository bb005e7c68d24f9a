// Credentials that expire: the server tells the client with an `ac` push (spec §6) and, since
// the connection is anonymous from then on, revokes the listens it may no longer read.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { useHearth, T, uniqueNs } from '../../lib/harness.mjs';
import { RawClient } from '../../lib/raw.mjs';
import { SseStream } from '../rest/rest-client.mjs';

const SECRET = 'compat-test-secret-with-enough-length';

function hs256(claims) {
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const body = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64(claims)}`;
  const signature = crypto.createHmac('sha256', SECRET).update(body).digest('base64url');
  return `${body}.${signature}`;
}

async function putRules(port, ns, rules) {
  const response = await fetch(`http://127.0.0.1:${port}/.settings/rules.json?ns=${ns}`, {
    method: 'PUT',
    headers: { Authorization: 'Bearer owner' },
    body: JSON.stringify(rules),
  });
  assert.equal(response.status, 200, await response.text());
}

describe('auth expiry', () => {
  const h = useHearth({ extraArgs: ['--jwt-secret', SECRET] });

  it('an expiring HS256 token gets an ac push, then its listens are cancelled', T, async () => {
    const ns = uniqueNs();
    await putRules(h.port, ns, {
      rules: { users: { $uid: { '.read': 'auth != null && auth.uid == $uid' } } },
    });
    const c = await RawClient.connect(h.server.wsURL(ns));
    h.defer(() => c.terminate());
    await c.handshake();
    const now = Math.floor(Date.now() / 1000);
    const auth = await c.request('auth', { cred: hs256({ sub: 'erin', iat: now, exp: now + 2 }) });
    assert.equal(auth.s, 'ok');
    const listen = await c.request('q', { p: '/users/erin', h: '' });
    assert.equal(listen.s, 'ok');
    const denied = await c.request('q', { p: '/users/frank', h: '' });
    assert.equal(denied.s, 'permission_denied');

    const { msg: revoked } = await c.waitMessage((m) => m?.t === 'd' && m.d?.a === 'ac', { ms: 8_000, label: 'ac push' });
    assert.equal(revoked.d.b.s, 'expired_token');
    const { msg: cancel } = await c.waitMessage((m) => m?.t === 'd' && m.d?.a === 'c', { ms: 5_000, label: 'cancel push' });
    assert.equal(cancel.d.b.p, '/users/erin');
  });

  it('an event stream whose token expires ends with auth_revoked', T, async () => {
    const ns = uniqueNs();
    await putRules(h.port, ns, {
      rules: { users: { $uid: { '.read': 'auth != null && auth.uid == $uid' } } },
    });
    const now = Math.floor(Date.now() / 1000);
    const token = hs256({ sub: 'gus', iat: now, exp: now + 2 });
    const stream = new SseStream(`http://127.0.0.1:${h.port}/users/gus.json?ns=${ns}&auth=${token}`);
    h.defer(() => stream.close());
    await stream.until((s) => s.events.some((e) => e.event === 'put'), 5_000, 'the first put');
    await stream.until((s) => s.events.some((e) => e.event === 'auth_revoked'), 8_000, 'auth_revoked', { allowEnd: true });
    const revoked = stream.events.find((e) => e.event === 'auth_revoked');
    assert.equal(revoked.data, 'credential is no longer valid');
  });

  it('an expired or forged token is refused with invalid_token', T, async () => {
    const ns = uniqueNs();
    const c = await RawClient.connect(h.server.wsURL(ns));
    h.defer(() => c.terminate());
    await c.handshake();
    const now = Math.floor(Date.now() / 1000);
    const expired = await c.request('auth', { cred: hs256({ sub: 'erin', iat: now - 7200, exp: now - 3600 }) });
    assert.equal(expired.s, 'invalid_token');
    const forged = hs256({ sub: 'erin', iat: now, exp: now + 60 }).slice(0, -2) + 'xx';
    assert.equal((await c.request('auth', { cred: forged })).s, 'invalid_token');
  });
});
