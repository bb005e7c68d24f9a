// Attack: hidden-data oracles (issue #16, defect 1). A client that is refused must get the same
// answer whatever the data it may not read holds: compare-and-set over WebSocket (`h`), REST
// If-Match and writeSizeLimit, and increments that would overflow. Transactions of allowed
// clients through the real SDK must still work.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { get, runTransaction } from 'firebase/database';
import { T } from '../../lib/harness.mjs';
import { RawClient } from '../../lib/raw.mjs';
import { http, tempDir, useRulesServer, writeTemp } from '../../lib/rules.mjs';

const ADMIN_TOKEN = 'compat-admin-token-oracle-0123456789';
const BEARER = { authorization: `Bearer ${ADMIN_TOKEN}` };
const DENIED_WS = { s: 'permission_denied', d: 'Permission denied' };
const DENIED_REST = { error: 'Permission denied' };
const OVERFLOW = 'invalid server value: the increment would overflow the number stored at the location';
const HUGE = 1.7e308;
const increment = (by) => ({ '.sv': { increment: by } });

/** Writes `value` at `p` as the admin and returns the location's ETag (its node hash). */
async function adminPut(server, ns, p, value) {
  const put = await http(server.url(ns, p), { method: 'PUT', body: value, headers: { ...BEARER, 'x-firebase-etag': 'true' } });
  assert.equal(put.status, 200, put.text);
  return put.headers.get('etag');
}

async function adminGet(server, ns, p) {
  const got = await http(server.url(ns, p), { headers: BEARER });
  assert.equal(got.status, 200, got.text);
  return got.json;
}

async function rawClient(h, ns) {
  const c = await RawClient.connect(h.server.wsURL(ns));
  h.defer(() => c.close());
  await c.handshake();
  return c;
}

describe('attacks: oracles on a locked server (no --dev, no rules)', () => {
  const h = useRulesServer({ dev: false, args: ['--admin-token', ADMIN_TOKEN] });

  it('a WebSocket put with h is permission_denied whether the guess is right, wrong or empty', T, async () => {
    const ns = h.ns('oracle');
    const right = await adminPut(h.server, ns, 'secret', { pin: 4321 });
    const wrong = await adminPut(h.server, ns, 'decoy', { pin: 1234 });
    const c = await rawClient(h, ns);
    const answers = {};
    for (const [label, p, hash] of [
      ['right guess', '/secret', right],
      ['wrong guess', '/secret', wrong],
      ['guess that it is empty', '/secret', ''],
      ['empty path, rightly guessed', '/nothing/here', ''],
    ]) {
      answers[label] = await c.request('p', { p, d: { pin: 0 }, h: hash });
    }
    assert.deepEqual(answers, {
      'right guess': DENIED_WS,
      'wrong guess': DENIED_WS,
      'guess that it is empty': DENIED_WS,
      'empty path, rightly guessed': DENIED_WS,
    });
    assert.equal(c.closed, null, 'the connection stays open');
    assert.deepEqual(await adminGet(h.server, ns, 'secret'), { pin: 4321 });
  });

  it('REST If-Match is 401 with no ETag whether the guess is right, wrong or null_etag', T, async () => {
    const ns = h.ns('oracle');
    const right = await adminPut(h.server, ns, 'secret', { pin: 4321 });
    const results = [];
    for (const [p, guess] of [
      ['secret', right],
      ['secret', 'wrong-guess'],
      ['secret', 'null_etag'],
      ['nothing/here', 'null_etag'],
    ]) {
      const res = await http(h.server.url(ns, p), { method: 'PUT', body: { pin: 0 }, headers: { 'if-match': guess } });
      results.push([p, guess === right ? 'right' : guess, res.status, res.json, res.headers.get('etag')]);
    }
    assert.deepEqual(results, [
      ['secret', 'right', 401, DENIED_REST, null],
      ['secret', 'wrong-guess', 401, DENIED_REST, null],
      ['secret', 'null_etag', 401, DENIED_REST, null],
      ['nothing/here', 'null_etag', 401, DENIED_REST, null],
    ]);
    assert.deepEqual(await adminGet(h.server, ns, 'secret'), { pin: 4321 });
  });

  it('REST writeSizeLimit is 401 whatever the size of the hidden value', T, async () => {
    const ns = h.ns('oracle');
    await adminPut(h.server, ns, 'big', 'x'.repeat(2 * 1024 * 1024));
    await adminPut(h.server, ns, 'small', 1);
    const statuses = {};
    for (const p of ['big', 'small', 'missing']) {
      const res = await http(h.server.url(ns, p, { writeSizeLimit: 'tiny' }), { method: 'DELETE' });
      statuses[p] = [res.status, res.json];
    }
    assert.deepEqual(statuses, {
      big: [401, DENIED_REST],
      small: [401, DENIED_REST],
      missing: [401, DENIED_REST],
    });
    // The admin, who may write, is held to the limit.
    const admin = await http(h.server.url(ns, 'big', { writeSizeLimit: 'tiny' }), { method: 'DELETE', headers: BEARER });
    assert.equal(admin.status, 413, admin.text);
  });

  it('an increment that would overflow is refused and keeps the value; a refused caller sees permission_denied', T, async () => {
    const ns = h.ns('oracle');
    await adminPut(h.server, ns, 'huge', HUGE);
    await adminPut(h.server, ns, 'one', 1);
    const c = await rawClient(h, ns);
    assert.deepEqual(await c.request('p', { p: '/huge', d: increment(1e308) }), DENIED_WS);
    assert.deepEqual(await c.request('p', { p: '/one', d: increment(1e308) }), DENIED_WS);
    const anonymous = await http(h.server.url(ns, 'huge'), { method: 'PUT', body: increment(1e308) });
    assert.deepEqual([anonymous.status, anonymous.json], [401, DENIED_REST]);

    const admin = await http(h.server.url(ns, 'huge'), { method: 'PUT', body: increment(1e308), headers: BEARER });
    assert.deepEqual([admin.status, admin.json], [400, { error: OVERFLOW }]);
    const a = await rawClient(h, ns);
    assert.equal((await a.request('auth', { cred: ADMIN_TOKEN })).s, 'ok');
    assert.deepEqual(await a.request('p', { p: '/huge', d: increment(1e308) }), { s: 'invalid_data', d: OVERFLOW });
    assert.deepEqual(await a.request('m', { p: '/', d: { huge: increment(-1e308), one: increment(1) } }), { s: 'ok', d: '' });
    assert.deepEqual(await adminGet(h.server, ns, ''), { huge: HUGE - 1e308, one: 2 });
    assert.deepEqual(await a.request('p', { p: '/one', d: increment(-1.7976931348623157e308) }), { s: 'ok', d: '' });
    assert.deepEqual(await a.request('p', { p: '/one', d: increment(-1.7976931348623157e308) }), { s: 'invalid_data', d: OVERFLOW });
    assert.deepEqual(await adminGet(h.server, ns, 'one'), -1.7976931348623157e308);
  });
});

const RULES = `{
  "rules": {
    "counter": { ".read": true, ".write": true },
    "votes": { ".write": true, ".validate": "newData.isNumber()" }
  }
}
`;

describe('attacks: oracles under rules (no --dev)', () => {
  const file = writeTemp(tempDir(), 'database.rules.json', RULES);
  const h = useRulesServer({ dev: false, args: ['--rules', file, '--admin-token', ADMIN_TOKEN] });

  it('a write-only caller may not compare-and-set: right and wrong guesses are both denied', T, async () => {
    const ns = h.ns('oracle');
    const right = await adminPut(h.server, ns, 'votes', 41);
    const c = await rawClient(h, ns);
    assert.deepEqual(await c.request('p', { p: '/votes', d: 1, h: right }), DENIED_WS);
    assert.deepEqual(await c.request('p', { p: '/votes', d: 1, h: 'wrong' }), DENIED_WS);
    const rest = await http(h.server.url(ns, 'votes'), { method: 'PUT', body: 1, headers: { 'if-match': right } });
    assert.deepEqual([rest.status, rest.json], [401, DENIED_REST]);
    // It may still write, and the REST answer does not reveal the hidden total.
    const vote = await http(h.server.url(ns, 'votes'), { method: 'PUT', body: increment(1) });
    assert.deepEqual([vote.status, vote.json], [200, increment(1)]);
    assert.equal(await adminGet(h.server, ns, 'votes'), 42);
  });

  it('a readable and writable caller still gets datastale, and SDK transactions commit', T, async () => {
    const ns = h.ns('oracle');
    await adminPut(h.server, ns, 'counter', 0);
    const c = await rawClient(h, ns);
    assert.deepEqual(await c.request('p', { p: '/counter', d: 5, h: 'wrong' }), { s: 'datastale', d: '' });
    const stale = await http(h.server.url(ns, 'counter'), { method: 'PUT', body: 5, headers: { 'if-match': 'null_etag' } });
    assert.deepEqual([stale.status, stale.json], [412, 0]);

    const [a, b] = [h.client(ns), h.client(ns)];
    const runs = [];
    for (let i = 0; i < 5; i++) {
      runs.push(runTransaction(a.ref('counter'), (v) => (v ?? 0) + 1));
      runs.push(runTransaction(b.ref('counter'), (v) => (v ?? 0) + 1));
    }
    const results = await Promise.all(runs);
    assert.deepEqual(results.map((r) => r.committed), Array(10).fill(true));
    assert.equal((await get(h.client(ns).ref('counter'))).val(), 10);
  });
});
