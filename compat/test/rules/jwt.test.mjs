// Signed tokens without --dev: HS256 (--jwt-secret), RS256 from a JWKS file (--jwt-keys) and
// Firebase ID tokens (--firebase-project + --firebase-jwks). Rules see `auth.uid` from the
// token; expired, unsigned, forged and wrong-audience tokens are refused.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { get, set } from 'firebase/database';
import { T } from '../../lib/harness.mjs';
import {
  Listen,
  expectDenied,
  hs256,
  http,
  nowSecs,
  rs256,
  rsaKeyPair,
  tempDir,
  unsignedJwt,
  useRulesServer,
  writeTemp,
} from '../../lib/rules.mjs';

const SECRET = 'compat-jwt-secret-with-enough-entropy-42';
const PROJECT = 'demo-hearth-jwt';

const RULES = {
  rules: {
    users: {
      $uid: {
        '.read': 'auth != null && auth.uid == $uid',
        '.write': 'auth != null && auth.uid == $uid',
      },
    },
    whoami: {
      $uid: { '.write': "auth != null && newData.val() == auth.provider + ':' + auth.uid" },
      '.read': true,
    },
  },
};

describe('rules: signed tokens (no --dev)', () => {
  const dir = tempDir();
  const rulesFile = writeTemp(dir, 'rules.json', RULES);
  const own = rsaKeyPair('own-key-1');
  const firebase = rsaKeyPair('firebase-key-1');
  const stranger = rsaKeyPair('own-key-1'); // same kid, different key: a forgery
  const keysFile = writeTemp(dir, 'keys.jwks.json', own.jwks);
  const firebaseFile = writeTemp(dir, 'firebase.jwks.json', firebase.jwks);
  const h = useRulesServer({
    dev: false,
    args: [
      '--rules', rulesFile,
      '--jwt-secret', SECRET,
      '--jwt-keys', keysFile,
      '--firebase-project', PROJECT,
      '--firebase-jwks', firebaseFile,
    ],
  });
  const url = (ns, p, token) => h.server.url(ns, p, token === undefined ? {} : { auth: token });
  const claims = (sub, extra = {}) => {
    const now = nowSecs();
    return { sub, iat: now, exp: now + 3600, ...extra };
  };
  const firebaseClaims = (sub, extra = {}) => {
    const now = nowSecs();
    return {
      iss: `https://securetoken.google.com/${PROJECT}`,
      aud: PROJECT,
      sub,
      user_id: sub,
      iat: now,
      auth_time: now,
      exp: now + 3600,
      firebase: { sign_in_provider: 'password', identities: {} },
      ...extra,
    };
  };
  async function seed(ns) {
    // carol and dave write their own nodes with their own tokens.
    for (const uid of ['carol', 'dave']) {
      const r = await http(url(ns, `users/${uid}`, hs256(SECRET, claims(uid))), { method: 'PUT', body: { name: uid } });
      assert.equal(r.status, 200, `${uid} PUT: ${r.text}`);
    }
  }

  it('HS256: carol reads her node and is denied dave’s (REST)', T, async () => {
    const ns = h.ns('jwt');
    await seed(ns);
    const carol = hs256(SECRET, claims('carol'));
    const mine = await http(url(ns, 'users/carol', carol));
    assert.equal(mine.status, 200, mine.text);
    assert.deepEqual(mine.json, { name: 'carol' });
    const theirs = await http(url(ns, 'users/dave', carol));
    assert.equal(theirs.status, 401, theirs.text);
    assert.deepEqual(theirs.json, { error: 'Permission denied' });
    const write = await http(url(ns, 'users/dave/name', carol), { method: 'PUT', body: 'x' });
    assert.equal(write.status, 401, write.text);
    // As a bearer token, too.
    const bearer = await http(url(ns, 'users/carol'), { headers: { authorization: `Bearer ${carol}` } });
    assert.equal(bearer.status, 200, bearer.text);
    // Anonymous: denied.
    assert.equal((await http(url(ns, 'users/carol'))).status, 401);
  });

  it('HS256: expired, alg none, forged and wrongly-signed tokens get 401', T, async () => {
    const ns = h.ns('jwt');
    await seed(ns);
    const now = nowSecs();
    const cases = {
      expired: hs256(SECRET, { sub: 'carol', iat: now - 7200, exp: now - 3600 }),
      'alg none': unsignedJwt({ sub: 'carol', user_id: 'carol', iat: now, exp: now + 3600 }),
      'wrong secret': hs256(`${SECRET}-not`, claims('carol')),
      'tampered claims': (() => {
        const [head, , sig] = hs256(SECRET, claims('dave')).split('.');
        return `${head}.${Buffer.from(JSON.stringify(claims('carol'))).toString('base64url')}.${sig}`;
      })(),
      'not a jwt': 'definitely-not-a-token',
      'no exp': hs256(SECRET, { sub: 'carol', iat: now }),
    };
    for (const [what, token] of Object.entries(cases)) {
      const r = await http(url(ns, 'users/carol', token));
      assert.equal(r.status, 401, `${what}: ${r.status} ${r.text}`);
      assert.equal(typeof r.json?.error, 'string', `${what}: ${r.text}`);
      const w = await http(url(ns, 'users/carol', token), { method: 'PUT', body: 'pwned' });
      assert.equal(w.status, 401, `${what} (PUT): ${w.status} ${w.text}`);
    }
    const still = await http(url(ns, 'users/carol', hs256(SECRET, claims('carol'))));
    assert.deepEqual(still.json, { name: 'carol' });
  });

  it('HS256 over the SDK: a client with carol’s token writes her node, not dave’s', T, async () => {
    const ns = h.ns('jwt');
    await seed(ns);
    // connectDatabaseEmulator's mockUserToken may be a ready-made token string: the SDK sends
    // it as is in an `auth` request.
    const carol = h.client(ns, { emulatorMockUserToken: hs256(SECRET, claims('carol')) });
    const other = h.client(ns, { emulatorMockUserToken: hs256(SECRET, claims('carol')) });
    const rec = new Listen(other.ref('users/carol'), 'carol#2 users/carol');
    h.defer(() => rec.off());
    await rec.untilVal({ name: 'carol' });
    await set(carol.ref('users/carol/name'), 'Carol');
    await rec.untilVal({ name: 'Carol' });
    assert.deepEqual((await get(carol.ref('users/carol'))).val(), { name: 'Carol' });
    const err = await expectDenied(set(carol.ref('users/dave/name'), 'x'), 'carol set(users/dave)');
    assert.equal(err.code, 'PERMISSION_DENIED');
    await expectDenied(get(carol.ref('users/dave')), 'carol get(users/dave)');
    const denied = new Listen(carol.ref('users/dave'), 'carol users/dave');
    h.defer(() => denied.off());
    await denied.cancelled();
    // auth.provider is 'custom' for tokens that do not name a Firebase sign-in provider.
    await set(carol.ref('whoami/carol'), 'custom:carol');
  });

  it('RS256 with a key from --jwt-keys (JWKS) is accepted; a foreign key is not', T, async () => {
    const ns = h.ns('jwt');
    await seed(ns);
    const token = rs256(own.privateKey, claims('carol'), { kid: own.kid });
    const ok = await http(url(ns, 'users/carol', token));
    assert.equal(ok.status, 200, ok.text);
    assert.deepEqual(ok.json, { name: 'carol' });
    const denied = await http(url(ns, 'users/dave', token));
    assert.equal(denied.status, 401);
    assert.deepEqual(denied.json, { error: 'Permission denied' });
    // Without a kid the configured keys are tried.
    const noKid = rs256(own.privateKey, claims('carol'));
    assert.equal((await http(url(ns, 'users/carol', noKid))).status, 200);
    // Signed by another key (under the same kid): refused.
    const forged = rs256(stranger.privateKey, claims('carol'), { kid: own.kid });
    assert.equal((await http(url(ns, 'users/carol', forged))).status, 401);
    const expired = rs256(own.privateKey, { sub: 'carol', iat: nowSecs() - 7200, exp: nowSecs() - 3600 }, { kid: own.kid });
    assert.equal((await http(url(ns, 'users/carol', expired))).status, 401);
    // And over the SDK.
    const client = h.client(ns, { emulatorMockUserToken: token });
    await set(client.ref('users/carol/rs'), 256);
    await expectDenied(set(client.ref('users/dave/rs'), 256), 'RS256 client set(users/dave)');
  });

  it('Firebase ID tokens: the right project is accepted; a wrong audience or issuer is refused', T, async () => {
    const ns = h.ns('jwt');
    await seed(ns);
    const good = rs256(firebase.privateKey, firebaseClaims('carol'), { kid: firebase.kid });
    const ok = await http(url(ns, 'users/carol', good));
    assert.equal(ok.status, 200, `correct Firebase ID token: ${ok.text}`);
    assert.equal((await http(url(ns, 'users/dave', good))).status, 401);
    // auth.provider comes from firebase.sign_in_provider.
    assert.equal((await http(url(ns, 'whoami/carol', good), { method: 'PUT', body: 'password:carol' })).status, 200);

    const wrongAud = rs256(firebase.privateKey, firebaseClaims('carol', { aud: 'some-other-project' }), { kid: firebase.kid });
    const r1 = await http(url(ns, 'users/carol', wrongAud));
    assert.equal(r1.status, 401, `wrong audience: ${r1.text}`);
    const wrongIss = rs256(
      firebase.privateKey,
      firebaseClaims('carol', { iss: 'https://securetoken.google.com/some-other-project' }),
      { kid: firebase.kid },
    );
    const r2 = await http(url(ns, 'users/carol', wrongIss));
    assert.equal(r2.status, 401, `wrong issuer: ${r2.text}`);
    // A Firebase key does not make plain tokens (no iss/aud) acceptable.
    const plain = rs256(firebase.privateKey, claims('carol'), { kid: firebase.kid });
    assert.equal((await http(url(ns, 'users/carol', plain))).status, 401, 'plain token signed with the Firebase key');
    // Over the SDK, the correct Firebase ID token is carol.
    const good2 = h.client(ns, { emulatorMockUserToken: good });
    await set(good2.ref('users/carol/fb'), true);
    assert.deepEqual((await get(good2.ref('users/carol'))).val(), { name: 'carol', fb: true });
  });
});
