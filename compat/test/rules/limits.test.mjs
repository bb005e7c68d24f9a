// Limits per caller written in the rules (`.limits`, docs/limits.md): writes, bytes, listens
// and connections, each counted per signed-in user or per client address, with a message
// that names the limit and the caller, counted in /metrics; other callers, other paths and
// admins are not touched.
//
// Rates are per minute and tested with bursts far past them, so that however slow the
// machine the refill in between cannot let them all through. Addresses other than 127.0.0.1
// are loopback addresses the clients bind to (127.0.0.0/8 is all loopback on Linux).

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { onValue, set, off, ref } from 'firebase/database';
import { useHearth, T } from '../../lib/harness.mjs';
import { RawClient } from '../../lib/raw.mjs';
import { mockUser, putRulesRaw, unsignedJwt } from '../../lib/rules.mjs';

const OWNER = { authorization: 'Bearer owner' };
const mockToken = (uid) => unsignedJwt({ sub: uid, user_id: uid, iat: Math.floor(Date.now() / 1000) });

/** An HTTP request from `localAddress`; resolves {status, text}. */
function from(localAddress, url, { method = 'GET', body, headers = {} } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, localAddress, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        text += chunk;
        // An event stream stays open: its status is all a test needs.
        if (res.headers['content-type']?.startsWith('text/event-stream')) {
          resolve({ status: res.statusCode, text, close: () => req.destroy() });
        }
      });
      res.on('end', () => resolve({ status: res.statusCode, text, close: () => {} }));
    });
    req.on('error', reject);
    if (body !== undefined) req.write(JSON.stringify(body));
    req.end();
  });
}

describe('rules: limits per caller', () => {
  const h = useHearth();
  const base = () => `http://127.0.0.1:${h.port}`;
  const dataURL = (ns, path, params = '') => `${base()}/${path}.json?ns=${ns}${params}`;
  const setRules = async (ns, rules) => {
    const res = await putRulesRaw(h.server, ns, JSON.stringify(rules));
    assert.equal(res.status, 200, res.text);
  };
  const refused = async (limit) => {
    const text = await (await fetch(`${base()}/metrics`, { headers: OWNER })).text();
    return Number(new RegExp(`^hearth_rule_limit_refused_total\\{limit="${limit}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? NaN);
  };
  const raw = async (ns, localAddress) => {
    const c = await RawClient.connect(h.server.wsURL(ns), { ws: { localAddress } });
    h.defer(() => c.terminate());
    await c.handshake();
    return c;
  };
  /** Resolves 'ok' once the session answers a read, 'shut' if it is shut down first. */
  const answers = (c) =>
    Promise.race([
      c.request('g', { p: '/x' }).then(() => 'ok'),
      c.waitMessage((m) => m.t === 'c' && m.d?.t === 's').then(() => 'shut'),
    ]);

  it('a rules document with a mistaken limit is refused on deploy, naming it', T, async () => {
    const ns = h.ns('limits');
    const res = await putRulesRaw(h.server, ns, JSON.stringify({ rules: { a: { '.limits': { writes: '5/fortnight' } } } }));
    assert.equal(res.status, 400, res.text);
    assert.match(res.text, /\.limits: unknown period 'fortnight'/);
    const root = await putRulesRaw(h.server, ns, JSON.stringify({ rules: { a: { '.limits': { connections: 5 } } } }));
    assert.equal(root.status, 400);
    assert.match(root.text, /declare it at the root/);
  });

  it('writes per user: the SDK rejects the writes past it, naming the limit; other users, paths and admins go on', T, async () => {
    const ns = h.ns('limits');
    await setRules(ns, { rules: { '.read': true, '.write': true, rooms: { $room: { messages: { '.limits': { writes: '3/min' } } } } } });
    const before = await refused('writes');
    const alice = mockUser(h, ns, 'alice');
    const sets = await Promise.allSettled(Array.from({ length: 12 }, (_, i) => set(alice.ref(`rooms/r${i % 2}/messages/m${i}`), i)));
    const passed = sets.filter((s) => s.status === 'fulfilled').length;
    assert.ok(passed >= 3 && passed <= 5, `${passed} of 12 passed`);
    const rejection = sets.find((s) => s.status === 'rejected');
    assert.match(String(rejection.reason), /limit_exceeded/i);
    assert.match(String(rejection.reason), /user alice is past the rules' limit of 3 writes a minute under \/rules\/rooms\/\$room\/messages\/\.limits/);
    assert.ok((await refused('writes')) >= before + 7);
    // A write higher up replaces the limited locations below it: counted too.
    await assert.rejects(set(alice.ref('rooms/r9'), { messages: { x: 1 } }), /limit_exceeded/i);
    // Alice elsewhere, Bob from the same address, and the admin are not limited.
    await set(alice.ref('profile/alice'), 'here');
    const bob = mockUser(h, ns, 'bob');
    await set(bob.ref('rooms/r0/messages/bob'), 'hello');
    const admin = h.admin(ns);
    await Promise.all(Array.from({ length: 10 }, (_, i) => admin.ref(`rooms/r0/messages/a${i}`).set(i)));
  });

  it('a flood by one user at ten times the limit beside twenty others: only the flood is refused', T, async () => {
    const ns = h.ns('limits');
    await setRules(ns, { rules: { '.read': true, '.write': true, chat: { $room: { '.limits': { writes: '5/min' } } } } });
    const mallory = await raw(ns, '127.0.0.11');
    assert.equal((await mallory.request('auth', { cred: mockToken('mallory') })).s, 'ok');
    const flood = Promise.all(Array.from({ length: 50 }, (_, i) => mallory.request('p', { p: `/chat/r0/m${i}`, d: i })));
    const users = Array.from({ length: 20 }, (_, i) => mockUser(h, ns, `user${i}`));
    const writes = await Promise.allSettled(users.flatMap((user, i) => [0, 1, 2].map((j) => set(user.ref(`chat/r0/u${i}-${j}`), j))));
    assert.deepEqual(writes.filter((w) => w.status === 'rejected').map((w) => String(w.reason)), []);
    const replies = await flood;
    const passed = replies.filter((r) => r.s === 'ok').length;
    assert.ok(passed >= 5 && passed <= 7, `${passed} of mallory's 50 passed`);
    assert.ok(replies.every((r) => r.s === 'ok' || r.s === 'limit_exceeded'));
  });

  it('bytes per client address: REST answers 429 past it; another address has its own', T, async () => {
    const ns = h.ns('limits');
    await setRules(ns, { rules: { '.read': true, '.write': true, logs: { '.limits': { bytes: '1kb/min', per: 'client.address' } } } });
    const before = await refused('bytes');
    const big = await from('127.0.0.1', dataURL(ns, 'logs/a'), { method: 'PUT', body: 'x'.repeat(2000) });
    assert.equal(big.status, 429, big.text);
    assert.match(JSON.parse(big.text).error, /client address 127\.0\.0\.1 is past the rules' limit of 1024 bytes written \(this write is about 2002\) a minute/);
    const other = '127.0.0.5';
    assert.equal((await from(other, dataURL(ns, 'logs/b'), { method: 'PUT', body: 'y'.repeat(500) })).status, 200);
    assert.equal((await from(other, dataURL(ns, 'logs/c'), { method: 'PATCH', body: { z: 'z'.repeat(600) } })).status, 429);
    // Outside the limited location the same address writes as much as it likes.
    assert.equal((await from(other, dataURL(ns, 'free'), { method: 'PUT', body: 'y'.repeat(5000) })).status, 200);
    assert.ok((await refused('bytes')) >= before + 2);
  });

  it('listens per user: the listen past it is cancelled with limit_exceeded, an unlisten gives room back; event streams count', T, async () => {
    const ns = h.ns('limits');
    await setRules(ns, { rules: { '.read': true, '.write': true, '.limits': { listens: 2 } } });
    const before = await refused('listens');
    const alice = mockUser(h, ns, 'alice');
    const seen = (path) =>
      new Promise((resolve, reject) => onValue(alice.ref(path), (s) => resolve(s.val()), (error) => reject(error)));
    assert.equal(await seen('a'), null);
    assert.equal(await seen('b'), null);
    // The JS SDK keeps the code and drops the server's reason ("Unknown Error").
    await assert.rejects(seen('c'), (error) => error.code === 'LIMIT_EXCEEDED' && /^limit_exceeded at \/c/.test(error.message));
    off(ref(alice.db, 'a'));
    assert.equal(await seen('c'), null);
    assert.ok((await refused('listens')) >= before + 1);
    // Anonymous event streams from one address: two, then 429.
    const at = '127.0.0.6';
    const streams = [];
    for (let i = 0; i < 2; i++) {
      const stream = await from(at, dataURL(ns, `s${i}`), { headers: { accept: 'text/event-stream' } });
      assert.equal(stream.status, 200);
      streams.push(stream);
    }
    const third = await from(at, dataURL(ns, 's2'), { headers: { accept: 'text/event-stream' } });
    assert.equal(third.status, 429, third.text);
    assert.match(third.text, /anonymous callers from 127\.0\.0\.6 holds 2 listens/);
    streams.forEach((s) => s.close());
  });

  it('limits deployed while sessions are open count those sessions from then on', T, async () => {
    const ns = h.ns('limits');
    await setRules(ns, { rules: { '.read': true, '.write': true } });
    const a = await raw(ns, '127.0.0.13');
    assert.equal((await a.request('auth', { cred: mockToken('dora') })).s, 'ok');
    assert.equal((await a.request('q', { p: '/one', h: '' })).s, 'ok');
    await setRules(ns, { rules: { '.read': true, '.write': true, '.limits': { listens: 2, connections: 1 } } });
    assert.equal((await a.request('q', { p: '/two', h: '' })).s, 'ok');
    const third = await a.request('q', { p: '/three', h: '' });
    assert.equal(third.s, 'limit_exceeded', JSON.stringify(third));
    // Dora's open session counts: a second one is refused when it signs in.
    const b = await raw(ns, '127.0.0.14');
    b.request('auth', { cred: mockToken('dora') }).catch(() => {});
    const shut = await b.waitMessage((m) => m.t === 'c' && m.d?.t === 's');
    assert.match(shut.msg.d.d, /user dora holds 1 connections/);
  });

  it('connections per address until signed in, then per user: the one past it is told why and closed; sessions that sign in first are never counted by address', T, async () => {
    const ns = h.ns('limits');
    await setRules(ns, { rules: { '.read': true, '.write': true, '.limits': { connections: 2 } } });
    const before = await refused('connections');
    const at = '127.0.0.7';
    const [a, b] = [await raw(ns, at), await raw(ns, at)];
    assert.equal(await answers(a), 'ok');
    assert.equal(await answers(b), 'ok');
    // Anonymous sessions are counted from their first request for data: the third opens,
    // and is shut down when it asks for something.
    const third = await raw(ns, at);
    const refusedRead = third.request('g', { p: '/x' });
    const shut = await third.waitMessage((m) => m.t === 'c' && m.d?.t === 's');
    assert.match(shut.msg.d.d, /anonymous callers from 127\.0\.0\.7 holds 2 connections/);
    assert.equal((await refusedRead).s, 'limit_exceeded');
    await third.waitClose();
    // Another address is not touched.
    assert.equal(await answers(await raw(ns, '127.0.0.8')), 'ok');
    // Signing in moves a session to its user: alice may hold two wherever she connects from.
    const signIn = async (c) => c.request('auth', { cred: mockToken('alice') });
    assert.equal((await signIn(a)).s, 'ok');
    const elsewhere = await raw(ns, '127.0.0.9');
    assert.equal((await signIn(elsewhere)).s, 'ok');
    const last = await raw(ns, '127.0.0.10');
    signIn(last).catch(() => {});
    const refusedSignIn = await last.waitMessage((m) => m.t === 'c' && m.d?.t === 's');
    assert.match(refusedSignIn.msg.d.d, /user alice holds 2 connections/);
    await last.waitClose();
    // The address's room came back when a signed in: one more anonymous session fits.
    assert.equal(await answers(await raw(ns, at)), 'ok');
    // Users behind one address who sign in before asking for data all connect.
    const crowd = '127.0.0.12';
    for (let i = 0; i < 4; i++) {
      const c = await raw(ns, crowd);
      assert.equal((await c.request('auth', { cred: mockToken(`crowd${i}`) })).s, 'ok');
      assert.equal(await answers(c), 'ok');
    }
    assert.ok((await refused('connections')) >= before + 2);
  });
});
