// Servers started without --dev: with no --rules every database is locked (admins only, via
// --admin-token); with --rules FILE every fresh database starts with the file's rules.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { get, set } from 'firebase/database';
import { T } from '../../lib/harness.mjs';
import {
  Listen,
  expectDenied,
  getRules,
  http,
  putRules,
  putRulesRaw,
  tempDir,
  unsignedJwt,
  useRulesServer,
  writeTemp,
} from '../../lib/rules.mjs';

const ADMIN_TOKEN = 'compat-admin-token-0123456789';
const BEARER = { authorization: `Bearer ${ADMIN_TOKEN}` };

describe('rules: locked server (no --dev, no --rules)', () => {
  const h = useRulesServer({ dev: false, args: ['--admin-token', ADMIN_TOKEN] });
  const listen = (q, label) => {
    const l = new Listen(q, label);
    h.defer(() => l.off());
    return l;
  };

  it('warns at start that every database is locked', T, async () => {
    const log = h.server.log();
    assert.match(log, /locked/i, `no warning in the server log:\n${h.server.logTail(20)}`);
    assert.match(log, /WARN/, `the message is not a warning:\n${h.server.logTail(20)}`);
  });

  it('anonymous REST requests are denied; the admin token reads and writes', T, async () => {
    const ns = h.ns('lock');
    const anonGet = await http(h.server.url(ns, 'x'));
    assert.equal(anonGet.status, 401, anonGet.text);
    assert.deepEqual(anonGet.json, { error: 'Permission denied' });
    const anonPut = await http(h.server.url(ns, 'x'), { method: 'PUT', body: 1 });
    assert.equal(anonPut.status, 401, anonPut.text);
    assert.equal((await http(h.server.url(ns, ''))).status, 401, 'anonymous GET /');

    const put = await http(h.server.url(ns, 'x'), { method: 'PUT', body: { v: 1 }, headers: BEARER });
    assert.equal(put.status, 200, put.text);
    const got = await http(h.server.url(ns, 'x'), { headers: BEARER });
    assert.equal(got.status, 200, got.text);
    assert.deepEqual(got.json, { v: 1 });
    const viaParam = await http(h.server.url(ns, 'x', { auth: ADMIN_TOKEN }));
    assert.equal(viaParam.status, 200, viaParam.text);
    assert.deepEqual(viaParam.json, { v: 1 });
    // Still denied anonymously after the admin wrote it.
    assert.equal((await http(h.server.url(ns, 'x'))).status, 401);
  });

  it('development credentials are refused outside --dev', T, async () => {
    const ns = h.ns('lock');
    const owner = await http(h.server.url(ns, 'x'), { headers: { authorization: 'Bearer owner' } });
    assert.equal(owner.status, 401, `Bearer owner: ${owner.text}`);
    const ownerParam = await http(h.server.url(ns, 'x', { auth: 'owner' }));
    assert.equal(ownerParam.status, 401, `auth=owner: ${ownerParam.text}`);
    const mock = unsignedJwt({ sub: 'alice', user_id: 'alice', iat: Math.floor(Date.now() / 1000) });
    const unsigned = await http(h.server.url(ns, 'x', { auth: mock }));
    assert.equal(unsigned.status, 401, `alg none: ${unsigned.text}`);
    const wrongAdmin = await http(h.server.url(ns, 'x'), { headers: { authorization: `Bearer ${ADMIN_TOKEN}x` } });
    assert.equal(wrongAdmin.status, 401, `wrong admin token: ${wrongAdmin.text}`);
    assert.equal((await putRulesRaw(h.server, ns, { rules: { '.read': true } }, { token: 'owner' })).status, 401);
  });

  it('client SDK set, get and listen are denied', T, async () => {
    const ns = h.ns('lock');
    const [a, b] = [h.client(ns), h.client(ns)];
    const err = await expectDenied(set(a.ref('x'), 1), 'anonymous set(x)');
    assert.equal(err.code, 'PERMISSION_DENIED');
    await expectDenied(set(b.ref('deep/er/path'), { a: 1 }), 'anonymous set(deep/er/path)');
    await expectDenied(get(h.client(ns).ref('x')), 'anonymous get(x)');
    await listen(b.ref('x'), 'b onValue(x)').cancelled();
    await listen(a.ref('/'), 'a onValue(/)').cancelled();
    const check = await http(h.server.url(ns, ''), { headers: BEARER });
    assert.equal(check.status, 200);
    assert.equal(check.json, null, 'nothing was written');
  });

  it('the admin token may set rules, which then apply to clients', T, async () => {
    const ns = h.ns('lock');
    const before = await getRules(h.server, ns, { token: ADMIN_TOKEN });
    assert.equal(before.status, 200, before.text);
    assert.deepEqual(JSON.parse(before.text), { rules: { '.read': false, '.write': false } });
    await putRules(h.server, ns, { rules: { pub: { '.read': true, '.write': true } } }, { token: ADMIN_TOKEN });
    const [a, b] = [h.client(ns), h.client(ns)];
    const rec = listen(b.ref('pub'), 'b onValue(pub)');
    await rec.untilVal(null);
    await set(a.ref('pub'), 'hello');
    await rec.untilVal('hello');
    await expectDenied(set(a.ref('priv'), 1), 'set(priv)');
    assert.equal((await http(h.server.url(ns, 'pub'))).json, 'hello');
    // Other databases are still locked.
    assert.equal((await http(h.server.url(h.ns('lock'), 'pub'))).status, 401);
  });
});

const FILE_RULES = `{
  // Default rules of every database on this server.
  "rules": {
    "open": { ".read": true, ".write": true },
    "ro": { ".read": true },
    "num": { ".read": true, ".write": true, ".validate": "newData.isNumber()" },
  }
}
`;

describe('rules: --rules FILE without --dev', () => {
  const dir = tempDir();
  const file = writeTemp(dir, 'database.rules.json', FILE_RULES);
  const h = useRulesServer({ dev: false, args: ['--rules', file, '--admin-token', ADMIN_TOKEN] });

  it('the file rules apply to a fresh namespace over the SDK', T, async () => {
    const ns = h.ns('file');
    const [a, b] = [h.client(ns), h.client(ns)];
    const rec = new Listen(b.ref('open'), 'b onValue(open)');
    h.defer(() => rec.off());
    await rec.untilVal(null);
    await set(a.ref('open/x'), 'y');
    await rec.untilVal({ x: 'y' });
    await expectDenied(set(a.ref('ro'), 1), 'set(ro)');
    await expectDenied(set(a.ref('elsewhere'), 1), 'set(elsewhere)');
    await expectDenied(get(a.ref('elsewhere')), 'get(elsewhere)');
    await expectDenied(set(a.ref('num'), 'not a number'), 'set(num, string)');
    await set(a.ref('num'), 7);
    assert.equal((await get(h.client(ns).ref('num'))).val(), 7);
  });

  it('the file rules apply over REST; the rules endpoint shows them', T, async () => {
    const ns = h.ns('file');
    assert.equal((await http(h.server.url(ns, 'open/r'), { method: 'PUT', body: 'rest' })).status, 200);
    const got = await http(h.server.url(ns, 'open'));
    assert.equal(got.status, 200);
    assert.deepEqual(got.json, { r: 'rest' });
    assert.equal((await http(h.server.url(ns, 'ro'), { method: 'PUT', body: 1 })).status, 401);
    assert.equal((await http(h.server.url(ns, 'ro'))).status, 200);
    const root = await http(h.server.url(ns, ''));
    assert.equal(root.status, 401);
    assert.deepEqual(root.json, { error: 'Permission denied' });
    // The admin bypasses them.
    assert.equal((await http(h.server.url(ns, 'ro'), { method: 'PUT', body: 1, headers: BEARER })).status, 200);
    const rules = await getRules(h.server, ns, { token: ADMIN_TOKEN });
    assert.equal(rules.status, 200, rules.text);
    assert.equal(rules.text, FILE_RULES);
  });

  it('replacing one namespace rules leaves the others on the file rules', T, async () => {
    const ns1 = h.ns('file');
    const ns2 = h.ns('file');
    await putRules(h.server, ns1, { rules: { '.read': true, '.write': true } }, { token: ADMIN_TOKEN });
    assert.equal((await http(h.server.url(ns1, 'elsewhere'), { method: 'PUT', body: 1 })).status, 200);
    assert.equal((await http(h.server.url(ns2, 'elsewhere'), { method: 'PUT', body: 1 })).status, 401);
    await expectDenied(set(h.client(ns2).ref('elsewhere'), 1), 'ns2 set(elsewhere)');
    await set(h.client(ns1).ref('elsewhere'), 2);
  });
});
