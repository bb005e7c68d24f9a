// Attack: getting past the limits per caller that a database's rules declare (`.limits`,
// docs/limits.md). A hostile user tries to escape a per-user write limit by writing higher
// up, by a multi-location update at the root, by spreading its writes over connections and
// by signing out; to escape a listen limit by listening and unlistening in a loop, or by
// listening at the same place twice; and to lock another user out by using their uid's
// limit from an anonymous connection. Each case is decided by the server's replies, not by
// timing: the rates are per minute, far below what the test sends.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { useHearth, T } from '../../lib/harness.mjs';
import { RawClient } from '../../lib/raw.mjs';
import { putRules, unsignedJwt } from '../../lib/rules.mjs';

const token = (uid) => unsignedJwt({ sub: uid, user_id: uid, iat: Math.floor(Date.now() / 1000) });

describe('attacks: limits per caller', () => {
  const h = useHearth();
  const connect = async (ns, { uid, localAddress } = {}) => {
    const c = await RawClient.connect(h.server.wsURL(ns), localAddress ? { ws: { localAddress } } : {});
    h.defer(() => c.terminate());
    await c.handshake();
    if (uid) assert.equal((await c.request('auth', { cred: token(uid) })).s, 'ok');
    return c;
  };

  it('a per-user write limit holds against writes higher up, root updates, more connections and signing out', T, async () => {
    const ns = h.ns('limits-attack');
    await putRules(h.server, ns, {
      rules: { '.read': true, '.write': true, rooms: { $room: { messages: { '.limits': { writes: '2/min' } } } } },
    });
    const [a, b, c] = [await connect(ns, { uid: 'mallory' }), await connect(ns, { uid: 'mallory' }), await connect(ns, { uid: 'mallory' })];
    assert.equal((await a.request('p', { p: '/rooms/r1/messages/m1', d: 1 })).s, 'ok');
    assert.equal((await b.request('p', { p: '/rooms/r2/messages/m2', d: 2 })).s, 'ok');
    // The limit is used up, whatever connection or shape the next write takes.
    const attempts = [
      [c, 'p', { p: '/rooms/r3/messages/m3', d: 3 }],
      [a, 'p', { p: '/rooms', d: { r4: { messages: { m: 4 } } } }],
      [b, 'p', { p: '/', d: { rooms: { r5: { messages: { m: 5 } } } } }],
      [c, 'm', { p: '/', d: { 'rooms/r6/messages/m': 6 } }],
      [a, 'm', { p: '/rooms/r7', d: { messages: { m: 7 } } }],
      [b, 'p', { p: '/rooms/r8/messages/m8/.priority', d: 8 }],
    ];
    for (const [client, action, body] of attempts) {
      const reply = await client.request(action, body);
      assert.equal(reply.s, 'limit_exceeded', `${action} ${JSON.stringify(body)}: ${JSON.stringify(reply)}`);
      assert.match(reply.d, /user mallory is past the rules' limit of 2 writes a minute/);
    }
    // Signing out makes mallory an anonymous caller, counted by address: a fresh counter, but
    // one that every anonymous caller from that address shares, so it cannot be multiplied.
    assert.equal((await c.request('unauth', {})).s, 'ok');
    assert.equal((await c.request('p', { p: '/rooms/r9/messages/x', d: 1 })).s, 'ok');
    assert.equal((await c.request('p', { p: '/rooms/r9/messages/y', d: 1 })).s, 'ok');
    const anonymous = await connect(ns);
    assert.equal((await anonymous.request('p', { p: '/rooms/r9/messages/z', d: 1 })).s, 'limit_exceeded');
    // Nothing refused was written.
    const admin = h.admin(ns);
    const rooms = (await admin.ref('rooms').get()).val();
    assert.deepEqual(Object.keys(rooms).sort(), ['r1', 'r2', 'r9']);
  });

  it('a listen limit holds against listen loops and repeated listens, and gives room back exactly', T, async () => {
    const ns = h.ns('limits-attack');
    await putRules(h.server, ns, { rules: { '.read': true, '.write': true, '.limits': { listens: 3 } } });
    const a = await connect(ns, { uid: 'mallory' });
    const b = await connect(ns, { uid: 'mallory' });
    // Listening at the same place again replaces the listen: it takes no more room.
    for (let i = 0; i < 5; i++) assert.equal((await a.request('q', { p: '/same', h: '' })).s, 'ok');
    // A loop of listen and unlisten never leaks room.
    for (let i = 0; i < 50; i++) {
      assert.equal((await b.request('q', { p: `/loop${i}`, h: '' })).s, 'ok');
      b.send({ t: 'd', d: { r: b.nextR(), a: 'n', b: { p: `/loop${i}` } } });
    }
    assert.equal((await b.request('q', { p: '/two', h: '' })).s, 'ok');
    assert.equal((await b.request('q', { p: '/three', h: '' })).s, 'ok');
    const past = await a.request('q', { p: '/four', h: '' });
    assert.equal(past.s, 'limit_exceeded', JSON.stringify(past));
    assert.match(past.d, /user mallory holds 3 listens under \/rules\/\.limits/);
    // Closing a connection gives its listens back.
    b.terminate();
    await b.waitClose();
    let reply;
    for (let i = 0; i < 100; i++) {
      reply = await a.request('q', { p: '/four', h: '' });
      if (reply.s === 'ok') break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(reply.s, 'ok');
  });

  it('onDisconnect operations count when queued: connecting, queueing and leaving does not get past a write limit', T, async () => {
    const ns = h.ns('limits-attack');
    await putRules(h.server, ns, {
      rules: { '.read': true, '.write': true, rooms: { $room: { messages: { '.limits': { writes: '2/min' } } } } },
    });
    const replies = [];
    for (let i = 0; i < 3; i++) {
      const c = await connect(ns, { uid: 'mallory' });
      replies.push((await c.request('o', { p: `/rooms/r/messages/o${i}`, d: i })).s);
      c.terminate();
    }
    assert.deepEqual(replies, ['ok', 'ok', 'limit_exceeded']);
  });

  it("a caller past its own limit uses nothing of the database's quota, which the others share", T, async () => {
    const ns = h.ns('limits-attack');
    await putRules(h.server, ns, { rules: { '.read': true, '.write': true, posts: { '.limits': { writes: '1/min' } } } });
    const quota = await fetch(`http://127.0.0.1:${h.port}/.settings/quotas.json?ns=${ns}`, {
      method: 'PUT', headers: { authorization: 'Bearer owner' }, body: JSON.stringify({ writesPerSecond: 5 }),
    });
    assert.equal(quota.status, 200);
    const mallory = await connect(ns, { uid: 'mallory' });
    const flood = await Promise.all(Array.from({ length: 30 }, (_, i) => mallory.request('p', { p: `/posts/m${i}`, d: i })));
    assert.deepEqual([...new Set(flood.map((r) => r.s))].sort(), ['limit_exceeded', 'ok']);
    assert.ok(flood.filter((r) => r.s === 'limit_exceeded').every((r) => /rules' limit/.test(r.d)));
    // Bob's writes find the quota whole but for mallory's one write.
    const bob = await connect(ns, { uid: 'bob' });
    const bobs = await Promise.all([0, 1, 2].map((i) => bob.request('p', { p: `/free/b${i}`, d: i })));
    assert.deepEqual(bobs.map((r) => r.s), ['ok', 'ok', 'ok']);
  });

  it('change feeds count as connections', T, async () => {
    const ns = h.ns('limits-attack');
    await putRules(h.server, ns, { rules: { '.read': true, '.write': true, '.limits': { connections: 1, per: 'client.address' } } });
    const feed = () => fetch(`http://127.0.0.1:${h.port}/.json?ns=${ns}&changesSince=now`, { headers: { accept: 'text/event-stream' } });
    const first = await feed();
    assert.equal(first.status, 200);
    const second = await feed();
    assert.equal(second.status, 429, await second.text());
    await first.body.cancel();
  });

  it("an anonymous caller cannot use up a signed-in user's limit, nor one address another's", T, async () => {
    const ns = h.ns('limits-attack');
    await putRules(h.server, ns, { rules: { '.read': true, '.write': true, posts: { '.limits': { writes: '1/min' } } } });
    // An anonymous flood from 127.0.0.2 is counted as that address.
    const flood = await connect(ns, { localAddress: '127.0.0.2' });
    const replies = await Promise.all(Array.from({ length: 20 }, (_, i) => flood.request('p', { p: `/posts/f${i}`, d: i })));
    assert.equal(replies.filter((r) => r.s === 'ok').length, 1);
    // Alice, signing in from the same address, and an anonymous caller elsewhere, write.
    const alice = await connect(ns, { uid: 'alice', localAddress: '127.0.0.2' });
    assert.equal((await alice.request('p', { p: '/posts/alice', d: 1 })).s, 'ok');
    const other = await connect(ns, { localAddress: '127.0.0.3' });
    assert.equal((await other.request('p', { p: '/posts/other', d: 1 })).s, 'ok');
  });
});
