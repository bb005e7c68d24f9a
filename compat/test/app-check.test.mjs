// App Check (docs/app-check.md): tokens signed by a test key set, served as the App Check JWKS
// would be (a JWKS over HTTP with a Cache-Control max-age, `--app-check-jwks-url`), are verified for
// the official JavaScript SDK (`firebase/app-check` with a custom provider, as an app attests
// itself), for raw connections and for REST; missing and forged ones are counted while the
// database does not enforce App Check and refused once it does, with the shutdown reasons
// Firebase gives; admins are never asked for one.

import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { initializeApp, deleteApp, onLog } from 'firebase/app';
import { initializeAppCheck, CustomProvider } from 'firebase/app-check';
import { getDatabase, ref, get, set } from 'firebase/database';
import { useHearth, T, uniqueNs } from '../lib/harness.mjs';
import { RawClient } from '../lib/raw.mjs';
import { withTimeout } from '../lib/util.mjs';

const KEYS = path.join(import.meta.dirname, '..', '..', 'crates', 'auth', 'testdata', 'keys');
const PRIVATE_KEY = fs.readFileSync(path.join(KEYS, 'rsa-private.pem'), 'utf8');
const NUMBER = '123456789';

/** An App Check token as Firebase's backend issues one, with `change`s to its claims. */
function appCheckToken(change = {}, { key = PRIVATE_KEY, kid = 'test-kid' } = {}) {
  const now = Math.floor(Date.now() / 1000);
  const claims = {
    iss: `https://firebaseappcheck.googleapis.com/${NUMBER}`,
    aud: [`projects/${NUMBER}`, 'projects/demo-hearth'],
    sub: `1:${NUMBER}:web:hearth`,
    iat: now,
    exp: now + 3600,
    ...change,
  };
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const body = `${b64({ alg: 'RS256', typ: 'JWT', kid })}.${b64(claims)}`;
  const signature = crypto.createSign('RSA-SHA256').update(body).sign(key, 'base64url');
  return `${body}.${signature}`;
}

// The key set, served as https://firebaseappcheck.googleapis.com/v1/jwks serves it.
let jwksFetches = 0;
const jwksServer = http.createServer((request, response) => {
  jwksFetches += 1;
  response.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'public, max-age=21600' });
  response.end(fs.readFileSync(path.join(KEYS, 'rsa-jwks.json')));
});
await new Promise((resolve) => jwksServer.listen(0, '127.0.0.1', resolve));
after(() => jwksServer.close());

const OTHER_KEY = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' });

describe('App Check', () => {
  const h = useHearth({
    extraArgs: [
      '--app-check-project-number', NUMBER,
      '--app-check-jwks-url', `http://127.0.0.1:${jwksServer.address().port}/v1/jwks`,
    ],
  });
  const base = () => `http://127.0.0.1:${h.port}`;
  const owner = { authorization: 'Bearer owner' };
  const enforce = async (ns, mode) => {
    const res = await fetch(`${base()}/.settings/appCheck.json?ns=${ns}`, { method: 'PUT', headers: owner, body: JSON.stringify(mode) });
    assert.equal(res.status, 200, await res.text());
  };
  const counts = async () => {
    const text = await (await fetch(`${base()}/metrics`, { headers: owner })).text();
    const count = (outcome) => Number(new RegExp(`^hearth_app_check_tokens_total\\{outcome="${outcome}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? NaN);
    return { verified: count('verified'), missing: count('missing'), invalid: count('invalid'), refused: Number(/^hearth_app_check_refused_total (\d+)/m.exec(text)?.[1] ?? NaN) };
  };

  /** An app of the official SDK attesting with `token()` (no App Check at all without it). */
  function sdkClient(ns, token) {
    const app = initializeApp({ databaseURL: h.server.databaseURL(ns), projectId: 'demo-hearth', apiKey: 'fake-api-key', appId: `1:${NUMBER}:web:hearth` }, `app-check-${crypto.randomUUID()}`);
    if (token) {
      initializeAppCheck(app, {
        provider: new CustomProvider({ getToken: async () => ({ token: token(), expireTimeMillis: Date.now() + 3_600_000 }) }),
        isTokenAutoRefreshEnabled: false,
      });
    }
    h.defer(() => deleteApp(app));
    return getDatabase(app);
  }

  it('the SDK\'s token is verified and counted; without enforcement a client without one is served too', T, async () => {
    assert.ok(jwksFetches >= 1, 'the keys were fetched from the JWKS URL');
    const ns = uniqueNs('appcheck');
    const before = await counts();
    const attested = sdkClient(ns, () => appCheckToken());
    await set(ref(attested, 'a'), 1);
    const plain = sdkClient(ns);
    assert.equal((await get(ref(plain, 'a'))).val(), 1);
    const after = await counts();
    assert.ok(after.verified > before.verified, `verified ${before.verified} → ${after.verified}`);
    assert.ok(after.missing > before.missing, `missing ${before.missing} → ${after.missing}`);
    assert.equal(after.refused, before.refused);
  });

  it('an enforcing database serves the attested SDK client and closes one without a token, with the reason the SDK shows', T, async () => {
    const ns = uniqueNs('appcheck');
    await enforce(ns, 'enforced');
    const attested = sdkClient(ns, () => appCheckToken());
    await set(ref(attested, 'ok'), true);
    assert.equal((await get(ref(attested, 'ok'))).val(), true);

    const warned = new Promise((resolve) => onLog(({ message }) => {
      if (message.includes('Missing appcheck token')) resolve(message);
    }, { level: 'warn' }));
    const plain = sdkClient(ns);
    get(ref(plain, 'ok')).catch(() => {});
    await withTimeout(warned, 10_000, 'the SDK\'s warning that the token is missing');
    // Admins need none.
    const admin = h.admin(ns);
    assert.equal((await admin.ref('ok').get()).val(), true);
  });

  it('raw connections: the URL\'s token, a refreshed one in band, one withdrawn, forged and foreign ones', T, async () => {
    const ns = uniqueNs('appcheck');
    await enforce(ns, 'enforced');
    const open = async (token) => {
      const url = token ? `${h.server.wsURL(ns)}&ac=${token}` : h.server.wsURL(ns);
      const c = await RawClient.connect(url);
      h.defer(() => c.terminate());
      await c.handshake();
      return c;
    };
    // The URL's token (the JS SDK's), then a refresh on the live connection.
    const c = await open(appCheckToken());
    assert.equal((await c.request('q', { p: '/x', h: '' })).s, 'ok');
    assert.equal((await c.request('appcheck', { token: appCheckToken() })).s, 'ok');
    assert.equal((await c.request('g', { p: '/x' })).s, 'ok');
    // A bad one in band is refused with invalid_token, and the next read closes the session.
    const bad = await c.request('appcheck', { token: appCheckToken({}, { key: OTHER_KEY }) });
    assert.equal(bad.s, 'invalid_token');
    c.sendRequest('g', { p: '/x' });
    await c.waitMessage((m) => m.t === 'c' && m.d?.t === 's' && m.d.d === 'Invalid appcheck token');
    await c.waitClose();

    // Withdrawn (`unappeck`, as the JS SDK spells it).
    const withdrawn = await open(appCheckToken());
    assert.equal((await withdrawn.request('unappeck', {})).s, 'ok');
    withdrawn.sendRequest('q', { p: '/x', h: '' });
    await withdrawn.waitMessage((m) => m.t === 'c' && m.d?.d === 'Missing appcheck token');

    // The header (Android's way), and what the JS SDK sends when its provider failed.
    const byHeader = await RawClient.connect(h.server.wsURL(ns), { headers: { 'X-Firebase-AppCheck': appCheckToken() } });
    h.defer(() => byHeader.terminate());
    await byHeader.handshake();
    assert.equal((await byHeader.request('g', { p: '/x' })).s, 'ok');
    for (const token of [
      'eyJlcnJvciI6IlVOS05PV05fRVJST1IifQ==',
      appCheckToken({ iss: 'https://firebaseappcheck.googleapis.com/999' }),
      appCheckToken({ aud: ['projects/999'] }),
      appCheckToken({ exp: Math.floor(Date.now() / 1000) - 3600 }),
      appCheckToken({}, { kid: 'another-kid' }),
    ]) {
      const refused = await open(token);
      refused.sendRequest('g', { p: '/x' });
      await refused.waitMessage((m) => m.t === 'c' && m.d?.d === 'Invalid appcheck token', { label: token.slice(0, 40) });
    }
    // A database that does not enforce lets the same connection through.
    const other = uniqueNs('appcheck');
    const c2 = await RawClient.connect(h.server.wsURL(other));
    h.defer(() => c2.terminate());
    await c2.handshake();
    assert.equal((await c2.request('g', { p: '/x' })).s, 'ok');
  });

  it('REST: the header or ac= is verified; an enforcing database answers 401 without a valid one, never to an admin', T, async () => {
    const ns = uniqueNs('appcheck');
    await fetch(`${base()}/d.json?ns=${ns}`, { method: 'PUT', headers: owner, body: '1' });
    await enforce(ns, 'enforced');
    const read = async (headers = {}, params = '') => fetch(`${base()}/d.json?ns=${ns}${params}`, { headers });
    assert.equal((await read({ 'X-Firebase-AppCheck': appCheckToken() })).status, 200);
    assert.equal((await read({}, `&ac=${appCheckToken()}`)).status, 200);
    const missing = await read();
    assert.equal(missing.status, 401);
    assert.match((await missing.json()).error, /Missing appcheck token/);
    const forged = await read({ 'X-Firebase-AppCheck': appCheckToken({}, { key: OTHER_KEY }) });
    assert.equal(forged.status, 401);
    assert.match((await forged.json()).error, /Invalid appcheck token/);
    assert.equal((await read(owner)).status, 200);
    const write = await fetch(`${base()}/d.json?ns=${ns}`, { method: 'PUT', body: '2' });
    assert.equal(write.status, 401);
    // An event stream too.
    const stream = await fetch(`${base()}/d.json?ns=${ns}`, { headers: { accept: 'text/event-stream' } });
    assert.equal(stream.status, 401);
    await stream.body?.cancel();
    // Back to unenforced: served again.
    await enforce(ns, 'unenforced');
    assert.equal((await read()).status, 200);
    const setting = await (await fetch(`${base()}/.settings/appCheck.json?ns=${ns}`, { headers: owner })).json();
    assert.equal(setting, 'unenforced');
  });
});
