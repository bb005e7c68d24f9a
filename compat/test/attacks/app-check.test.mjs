// Attack: getting past App Check on a database that enforces it (docs/app-check.md). An
// attacker has the database's address and no app to attest: it tries tokens that look right
// (unsigned, signed by its own key with the project's claims, another project's, expired, a
// key id that does not exist, an oversized one, the SDK's placeholder), sends a good-looking
// token and withdraws it, mixes the header and the URL, and asks REST and event streams; none
// reaches the data, and the server stays up for the app's real clients.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { useHearth, T, uniqueNs } from '../../lib/harness.mjs';
import { RawClient } from '../../lib/raw.mjs';

const KEYS = path.join(import.meta.dirname, '..', '..', '..', 'crates', 'auth', 'testdata', 'keys');
const NUMBER = '123456789';
const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');

function claims(change = {}) {
  const now = Math.floor(Date.now() / 1000);
  return {
    iss: `https://firebaseappcheck.googleapis.com/${NUMBER}`,
    aud: [`projects/${NUMBER}`],
    sub: `1:${NUMBER}:web:attacker`,
    iat: now,
    exp: now + 3600,
    ...change,
  };
}

function signed(key, header, body) {
  const text = `${b64(header)}.${b64(body)}`;
  return `${text}.${crypto.createSign('RSA-SHA256').update(text).sign(key, 'base64url')}`;
}

const REAL_KEY = fs.readFileSync(path.join(KEYS, 'rsa-private.pem'), 'utf8');
const OWN_KEY = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' });
const HEADER = { alg: 'RS256', typ: 'JWT', kid: 'test-kid' };

const FORGERIES = {
  unsigned: `${b64({ alg: 'none', typ: 'JWT', kid: 'test-kid' })}.${b64(claims())}.`,
  'HS256 with the public key as secret': (() => {
    const text = `${b64({ alg: 'HS256', typ: 'JWT', kid: 'test-kid' })}.${b64(claims())}`;
    const secret = fs.readFileSync(path.join(KEYS, 'rsa-public.pem'));
    return `${text}.${crypto.createHmac('sha256', secret).update(text).digest('base64url')}`;
  })(),
  'its own key under the real kid': signed(OWN_KEY, HEADER, claims()),
  'an ID token issuer': signed(REAL_KEY, HEADER, claims({ iss: 'https://securetoken.google.com/demo-hearth' })),
  'another project': signed(REAL_KEY, HEADER, claims({ aud: ['projects/1'], iss: 'https://firebaseappcheck.googleapis.com/1' })),
  expired: signed(REAL_KEY, HEADER, claims({ exp: 1 })),
  'an unknown kid': signed(REAL_KEY, { ...HEADER, kid: 'nope' }, claims()),
  'no subject': signed(REAL_KEY, HEADER, claims({ sub: '' })),
  oversized: signed(REAL_KEY, HEADER, claims({ pad: 'x'.repeat(9000) })),
  'the SDK placeholder': 'eyJlcnJvciI6IlVOS05PV05fRVJST1IifQ==',
  garbage: '\u0000\u0001{}..',
};

describe('attack: App Check', () => {
  const h = useHearth({
    extraArgs: ['--app-check-project-number', NUMBER, '--app-check-jwks', path.join(KEYS, 'rsa-jwks.json'),
      '--app-check-jwks-url', 'http://127.0.0.1:9/v1/jwks', '--app-check-enforce'],
  });

  it('no forged token reaches the data, over a WebSocket, REST or an event stream', T, async () => {
    const ns = uniqueNs('attack-appcheck');
    await fetch(`http://127.0.0.1:${h.port}/secret.json?ns=${ns}`, { method: 'PUT', headers: { authorization: 'Bearer owner' }, body: '"s3cret"' });
    for (const [name, token] of Object.entries(FORGERIES)) {
      // In the URL.
      const byUrl = await RawClient.connect(`${h.server.wsURL(ns)}&ac=${encodeURIComponent(token)}`);
      await byUrl.handshake();
      byUrl.sendRequest('g', { p: '/secret' });
      const shut = await byUrl.waitMessage((m) => m.t === 'c' && m.d?.t === 's', { label: `${name} in the URL` });
      assert.equal(shut.msg.d.d, 'Invalid appcheck token', name);
      assert.ok(!JSON.stringify(byUrl.messages).includes('s3cret'), `${name}: the data leaked`);
      byUrl.terminate();
      // In band, on a connection without one.
      const inBand = await RawClient.connect(h.server.wsURL(ns));
      await inBand.handshake();
      const reply = await inBand.request('appcheck', { token });
      assert.equal(reply.s, 'invalid_token', name);
      inBand.sendRequest('q', { p: '/secret', h: '' });
      await inBand.waitMessage((m) => m.t === 'c' && m.d?.t === 's', { label: `${name} in band` });
      assert.ok(!JSON.stringify(inBand.messages).includes('s3cret'), `${name}: the data leaked`);
      inBand.terminate();
      // Over REST and as an event stream, in the header.
      if (/^[\x21-\x7e]*$/.test(token)) {
        const rest = await fetch(`http://127.0.0.1:${h.port}/secret.json?ns=${ns}`, { headers: { 'X-Firebase-AppCheck': token } });
        assert.equal(rest.status, 401, name);
        assert.ok(!(await rest.text()).includes('s3cret'), name);
        const stream = await fetch(`http://127.0.0.1:${h.port}/secret.json?ns=${ns}`, { headers: { 'X-Firebase-AppCheck': token, accept: 'text/event-stream' } });
        assert.equal(stream.status, 401, name);
        await stream.body?.cancel();
      }
    }
    // A valid token given, then withdrawn: the session loses its way in.
    const good = signed(REAL_KEY, HEADER, claims());
    const c = await RawClient.connect(`${h.server.wsURL(ns)}&ac=${good}`);
    h.defer(() => c.terminate());
    await c.handshake();
    assert.equal((await c.request('g', { p: '/secret' })).s, 'ok');
    assert.equal((await c.request('unappcheck', {})).s, 'ok');
    c.sendRequest('g', { p: '/secret' });
    const shut = await c.waitMessage((m) => m.t === 'c' && m.d?.t === 's');
    assert.equal(shut.msg.d.d, 'Missing appcheck token');
    // The server is still there for the app's clients.
    const app = await RawClient.connect(h.server.wsURL(ns), { headers: { 'X-Firebase-AppCheck': good } });
    h.defer(() => app.terminate());
    await app.handshake();
    const read = await app.request('g', { p: '/secret' });
    assert.equal(read.s, 'ok');
    assert.equal(read.d, 's3cret');
  });
});
