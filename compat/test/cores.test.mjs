// One database, its clients spread over several shards (issue #17).
//
// The server runs with --threads 4 on a machine of 2 cores. Today every connection of a
// database is handed to the shard that owns it; once connections stay on the shard that
// accepted them, about three in four of the connections below sit on a shard that is not the
// owner, and their requests, replies and pushes cross shards. Each test opens 8 or more
// connections to one namespace, so that (with a uniform spread) the chance that none of them
// is off the owner is below 1 in 60,000. What the clients see must not change: these tests
// assert exact data and exact order, and pass the same before and after the change.
//
// Barriers are replies (the server answers a connection's request after every push it queued
// for that connection before), never pauses.
//
// The suite runs twice: with the sockets written one by one (--io-uring-sends false), and
// with the default io_uring sends, where each core sends a batch's writes together
// (BENCHMARKS §11); the clients must not tell them apart.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { set, update, onDisconnect, goOffline, runTransaction, get } from 'firebase/database';
import { useHearth, T } from '../lib/harness.mjs';
import { RawClient } from '../lib/raw.mjs';
import { Listen, putRules } from '../lib/rules.mjs';
import { canonical, recordValues } from '../lib/util.mjs';
import { SseStream, rest, restURL } from './rest/rest-client.mjs';

const THREADS = 4;
const SEND_PATHS = [['--io-uring-sends', 'false'], []];

/** Unsigned emulator-style token for `uid`, accepted under --dev (spec §14.2). */
function mockToken(uid) {
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const claims = { iss: 'https://securetoken.google.com/demo-hearth', aud: 'demo-hearth', iat: 0, exp: 3600, auth_time: 0, sub: uid, user_id: uid };
  return `${b64({ alg: 'none', type: 'JWT' })}.${b64(claims)}.`;
}

const range = (n) => Array.from({ length: n }, (_, i) => i);

/**
 * The changes between consecutive value snapshots of an object whose children are leaves:
 * `child=value` strings, one per snapshot after the first. A snapshot that changed more or
 * fewer than one child is reported as such, so that the comparisons below fail loudly.
 */
function changes(values) {
  const out = [];
  for (let i = 1; i < values.length; i++) {
    const before = values[i - 1] ?? {};
    const after = values[i] ?? {};
    const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
    const changed = [...keys].filter((k) => JSON.stringify(before[k]) !== JSON.stringify(after[k]));
    out.push(changed.length === 1 ? `${changed[0]}=${JSON.stringify(after[changed[0]] ?? null)}` : `(${changed.length} children changed)`);
  }
  return out;
}

/** The successive distinct values of one child across snapshots of its parent. */
function childHistory(values, key) {
  const out = [];
  for (const v of values) {
    const c = v && key in v ? v[key] : null;
    if (out.length === 0 || JSON.stringify(out[out.length - 1]) !== JSON.stringify(c)) out.push(c);
  }
  return out;
}

for (const sends of SEND_PATHS) describe(`one database over ${THREADS} shards${sends.length ? ', plain writes' : ', sends through io_uring'}`, () => {
  const h = useHearth({ threads: THREADS, extraArgs: sends });

  async function raw(ns, query = '') {
    const c = await RawClient.connect(h.server.wsURL(ns) + query);
    h.defer(() => c.terminate());
    const hs = await c.handshake();
    c.session = hs.s;
    return c;
  }

  it('10 SDK clients that listen and write, and 2 that only listen, see every write in the order the server applied it', T, async () => {
    const ns = h.ns('order');
    const N = 10;
    const K = 5;
    const writers = h.clients(N, ns);
    // Two clients that never write: what they see is the server's order, untouched by the
    // local events an SDK raises for its own writes.
    const observers = h.clients(2, ns);
    const recs = [...writers, ...observers].map((c, i) => recordValues(c.ref('seq'), `client ${i} seq`));
    await Promise.all(recs.map((r) => r.first()));

    // Every writer sets its own child 1..K; the writers run concurrently.
    await Promise.all(
      writers.map(async (c, i) => {
        for (let k = 1; k <= K; k++) await set(c.ref(`seq/w${i}`), k);
      }),
    );
    const final = Object.fromEntries(range(N).map((i) => [`w${i}`, K]));
    await Promise.all(recs.map((r) => r.untilVal(final)));

    const seen = recs.map((r) => changes(r.values));
    const order = seen[N];
    assert.deepEqual(seen[N + 1], order, 'both observers see the same order');
    assert.equal(order.length, N * K, `one event per write: ${JSON.stringify(order)}`);
    for (const i of range(N)) {
      const own = order.filter((c) => c.startsWith(`w${i}=`));
      assert.deepEqual(own, range(K).map((k) => `w${i}=${k + 1}`), `writer ${i}'s writes in its order`);
    }
    // A writer raises its own writes at once (latency compensation) and everyone else's as the
    // server pushes them: the others' writes come in exactly the server's order.
    for (const i of range(N)) {
      const mine = (c) => c.startsWith(`w${i}=`);
      assert.deepEqual(seen[i].filter((c) => !mine(c)), order.filter((c) => !mine(c)), `writer ${i} sees the others' writes in server order`);
      assert.deepEqual(seen[i].filter(mine), range(K).map((k) => `w${i}=${k + 1}`), `writer ${i} sees its own writes once each`);
    }
    for (const r of recs) r.off();
  });

  it("raw: listen data precedes the listen's ok, a write's own push precedes its ok, on 10 connections", T, async () => {
    const ns = h.ns('raw');
    const N = 10;
    const K = 5;
    const clients = await Promise.all(range(N).map(() => raw(ns)));
    assert.deepEqual(await clients[0].request('p', { p: '/shared', d: { seed: true } }), { s: 'ok', d: '' });

    // Every connection listens: the initial data, then the ok, and nothing else in between.
    await Promise.all(
      clients.map(async (c, i) => {
        const from = c.messages.length;
        const r = c.sendRequest('q', { p: '/shared', h: '' });
        const ok = await c.response(r);
        assert.equal(ok.body.s, 'ok', `client ${i} listen`);
        assert.deepEqual(
          c.messages.slice(from, ok.index),
          [{ t: 'd', d: { a: 'd', b: { p: '/shared', d: { seed: true } } } }],
          `client ${i}: the listen's data, alone, before its ok`,
        );
      }),
    );
    const listened = clients.map((c) => c.messages.length);

    // Every connection pipelines K writes to its own child; all connections at once.
    await Promise.all(
      clients.map(async (c, i) => {
        const rs = range(K).map((k) => c.sendRequest('p', { p: `/shared/w${i}`, d: k + 1 }));
        const oks = [];
        for (const r of rs) oks.push(await c.response(r));
        for (const [k, ok] of oks.entries()) {
          assert.deepEqual(ok.body, { s: 'ok', d: '' }, `client ${i} write ${k + 1}`);
          if (k > 0) assert.ok(ok.index > oks[k - 1].index, `client ${i}: replies in request order`);
          const own = c.messages.findIndex(
            (m, at) => at >= listened[i] && m.t === 'd' && m.d.r === undefined && m.d.b && m.d.b.p === `/shared/w${i}` && m.d.b.d === k + 1,
          );
          assert.ok(own >= 0 && own < ok.index, `client ${i}: the push of write ${k + 1} (at ${own}) precedes its ok (at ${ok.index})`);
        }
      }),
    );
    // Every write is applied; one more reply on each connection comes after every push.
    await Promise.all(clients.map(async (c) => assert.deepEqual(await c.request('g', { p: '/elsewhere', q: {} }), { s: 'ok', d: null })));

    const pushes = clients.map((c, i) =>
      c.messages
        .slice(listened[i])
        .filter((m) => m.t === 'd' && m.d.r === undefined)
        .map((m) => JSON.stringify(m)),
    );
    assert.equal(pushes[0].length, N * K, 'one push per write');
    for (const i of range(N)) assert.deepEqual(pushes[i], pushes[0], `client ${i} sees the pushes in the same order as client 0`);
    const decoded = pushes[0].map((s) => JSON.parse(s));
    for (const m of decoded) assert.deepEqual(Object.keys(m.d).sort(), ['a', 'b']);
    for (const i of range(N)) {
      const mine = decoded.filter((m) => m.d.b.p === `/shared/w${i}`);
      assert.deepEqual(mine, range(K).map((k) => ({ t: 'd', d: { a: 'd', b: { p: `/shared/w${i}`, d: k + 1 } } })));
    }
    const read = await clients[N - 1].request('g', { p: '/shared', q: {} });
    assert.deepEqual(read, { s: 'ok', d: { seed: true, ...Object.fromEntries(range(N).map((i) => [`w${i}`, K])) } });
  });

  it('raw: listens that arrive while 4 connections write get a snapshot, then exactly the later writes', T, async () => {
    const ns = h.ns('mid');
    const W = 4;
    const K = 25;
    const L = 6;
    const early = await Promise.all(range(2).map(() => raw(ns)));
    const writers = await Promise.all(range(W).map(() => raw(ns)));
    const late = await Promise.all(range(L).map(() => raw(ns)));
    // A seed, so that even a listen before the first write gets data (not the optional null).
    assert.deepEqual(await early[0].request('p', { p: '/live', d: { seed: 0 } }), { s: 'ok', d: '' });
    const listenedAt = [];
    for (const c of early) {
      assert.equal((await c.request('q', { p: '/live', h: '' })).s, 'ok');
      listenedAt.push(c.messages.length);
    }
    // The writers write one after another (each waits for its reply); the late listens go out
    // while writes are in flight, each after another of the first writer's replies.
    const listens = [];
    const listenAfter = new Map(range(L).map((i) => [Math.floor((i * K) / L), i]));
    await Promise.all(
      writers.map(async (c, j) => {
        for (const k of range(K)) {
          if (j === 0 && listenAfter.has(k)) {
            const l = late[listenAfter.get(k)];
            listens[listenAfter.get(k)] = { from: l.messages.length, r: l.sendRequest('q', { p: '/live', h: '' }) };
          }
          assert.deepEqual(await c.request('p', { p: `/live/w${j}`, d: k + 1 }), { s: 'ok', d: '' });
        }
      }),
    );
    const oks = await Promise.all(late.map((c, i) => c.response(listens[i].r)));
    for (const ok of oks) assert.equal(ok.body.s, 'ok');
    // Every write is applied: one more reply per connection comes after all of its pushes.
    await Promise.all([...early, ...late].map(async (c) => assert.equal((await c.request('g', { p: '/x', q: {} })).s, 'ok')));

    const pushesFrom = (c, from) => c.messages.slice(from).filter((m) => m.t === 'd' && m.d.r === undefined).map((m) => m.d);
    const order = pushesFrom(early[0], listenedAt[0]);
    assert.deepEqual(pushesFrom(early[1], listenedAt[1]), order, 'both early listeners see one order');
    assert.equal(order.length, W * K);
    for (const j of range(W)) {
      assert.deepEqual(order.filter((d) => d.b.p === `/live/w${j}`).map((d) => d.b.d), range(K).map((k) => k + 1), `writer ${j} in its order`);
    }
    // The state after the first m writes of the server's order, for every m.
    let state = { seed: 0 };
    const states = [state];
    for (const d of order) {
      state = { ...state, [d.b.p.slice('/live/'.length)]: d.b.d };
      states.push(state);
    }
    for (const [i, c] of late.entries()) {
      const seen = pushesFrom(c, listens[i].from);
      const snapshot = seen[0];
      assert.deepEqual(Object.keys(snapshot.b).sort(), ['d', 'p']);
      assert.equal(snapshot.b.p, '/live', `late ${i}: its first push is the listen's data`);
      assert.ok(c.messages.findIndex((m) => m.d === snapshot) < oks[i].index, `late ${i}: the data precedes the listen's ok`);
      const m = states.findIndex((st) => JSON.stringify(canonical(st)) === JSON.stringify(canonical(snapshot.b.d)));
      assert.ok(m >= 0, `late ${i}: the snapshot ${JSON.stringify(snapshot.b.d)} is a state the server passed through`);
      assert.deepEqual(seen.slice(1), order.slice(m), `late ${i}: after a snapshot of the first ${m} writes, exactly the other ${W * K - m}`);
    }
  });

  it('10 SDK clients x 10 concurrent transactions on one counter: exactly 100', T, async () => {
    const ns = h.ns('tx');
    const N = 10;
    const K = 10;
    const clients = h.clients(N, ns);
    const observer = h.client(ns);
    const rec = recordValues(observer.ref('counter'), 'observer counter');
    await rec.first();
    const results = await Promise.all(
      clients.flatMap((c) => range(K).map(() => runTransaction(c.ref('counter'), (v) => (v ?? 0) + 1))),
    );
    for (const res of results) assert.equal(res.committed, true);
    assert.equal(Math.max(...results.map((res) => res.snapshot.val())), N * K);
    await rec.untilVal(N * K);
    // The observer sees the counter only grow, ending at exactly N * K.
    const values = rec.values;
    assert.equal(values[0], null);
    for (let i = 2; i < values.length; i++) assert.ok(values[i] > values[i - 1], `observer values grow: ${JSON.stringify(values)}`);
    for (const c of clients) assert.equal((await get(c.ref('counter'))).val(), N * K);
    rec.off();
  });

  it('onDisconnect of 10 SDK clients going offline: the observer sees every change, in order', T, async () => {
    const ns = h.ns('od');
    const N = 10;
    const clients = h.clients(N, ns);
    const observer = h.client(ns);
    await Promise.all(
      clients.map(async (c, i) => {
        await set(c.ref(`presence/u${i}`), 'online');
        // Even clients vanish, odd clients leave a mark.
        if (i % 2 === 0) await onDisconnect(c.ref(`presence/u${i}`)).remove();
        else await onDisconnect(c.ref(`presence/u${i}`)).set('offline');
      }),
    );
    const state = Object.fromEntries(range(N).map((i) => [`u${i}`, 'online']));
    const rec = recordValues(observer.ref('presence'), 'observer presence');
    await rec.untilVal(state);
    const start = rec.values.length;
    const expected = [];
    for (const i of range(N)) {
      if (i % 2 === 0) delete state[`u${i}`];
      else state[`u${i}`] = 'offline';
      expected.push(structuredClone(state));
      goOffline(clients[i].db);
      await rec.untilVal(state);
    }
    assert.deepEqual(rec.values.slice(start), expected);
    rec.off();
  });

  it('onDisconnect of 8 raw connections killed abruptly: the observer sees every change, in order', T, async () => {
    const ns = h.ns('odraw');
    const N = 8;
    const clients = await Promise.all(range(N).map(() => raw(ns)));
    await Promise.all(
      clients.map(async (c, i) => {
        assert.deepEqual(await c.request('p', { p: `/presence/r${i}`, d: 'online' }), { s: 'ok', d: '' });
        assert.deepEqual(await c.request('o', { p: `/presence/r${i}`, d: { gone: i } }), { s: 'ok', d: '' });
      }),
    );
    const observer = h.client(ns);
    const state = Object.fromEntries(range(N).map((i) => [`r${i}`, 'online']));
    const rec = recordValues(observer.ref('presence'), 'observer presence');
    await rec.untilVal(state);
    const start = rec.values.length;
    const expected = [];
    for (const i of range(N)) {
      state[`r${i}`] = { gone: i };
      expected.push(structuredClone(state));
      clients[i].terminate(); // no close frame: the TCP connection just ends
      await rec.untilVal(state);
    }
    assert.deepEqual(rec.values.slice(start), expected);
    rec.off();
  });

  it("8 reconnects naming their previous session (ls): the old session's onDisconnect runs before the new first write", T, async () => {
    const ns = h.ns('ls');
    const N = 8;
    const olds = await Promise.all(range(N).map(() => raw(ns)));
    await Promise.all(
      olds.map(async (c, i) => {
        assert.deepEqual(await c.request('o', { p: `/presence/s${i}`, d: 'offline' }), { s: 'ok', d: '' });
        assert.deepEqual(await c.request('p', { p: `/presence/s${i}`, d: 'online' }), { s: 'ok', d: '' });
      }),
    );
    const observer = h.client(ns);
    const rec = recordValues(observer.ref('presence'), 'observer presence');
    await rec.untilVal(Object.fromEntries(range(N).map((i) => [`s${i}`, 'online'])));
    const start = rec.values.length - 1;

    await Promise.all(
      olds.map(async (old, i) => {
        const fresh = await raw(ns, `&ls=${encodeURIComponent(old.session)}`);
        assert.notEqual(fresh.session, old.session);
        // The first request of the new connection is a write; the old queue ran before it.
        assert.deepEqual(await fresh.request('p', { p: `/presence/s${i}`, d: 'back' }), { s: 'ok', d: '' });
        assert.deepEqual(await fresh.request('g', { p: `/presence/s${i}`, q: {} }), { s: 'ok', d: 'back' });
        await old.waitClose(5_000);
      }),
    );
    const final = Object.fromEntries(range(N).map((i) => [`s${i}`, 'back']));
    await rec.untilVal(final);
    const seen = rec.values.slice(start);
    for (const i of range(N)) assert.deepEqual(childHistory(seen, `s${i}`), ['online', 'offline', 'back'], `presence/s${i}`);
    rec.off();
  });

  it('6 event streams and 4 SDK writers: every stream sees the puts and patches, in order, exactly', T, async () => {
    const ns = h.ns('sse');
    const S = 6;
    const W = 4;
    const url = restURL(h.server, ns, 'room');
    const streams = range(S).map(() => {
      const s = new SseStream(url);
      h.defer(() => s.close());
      return s;
    });
    await Promise.all(streams.map((s) => s.untilData(1)));
    const writers = h.clients(W, ns);

    // Sequential writes: the order of the events is known in advance.
    const expected = [['put', { path: '/', data: null }]];
    for (const round of range(2)) {
      for (const j of range(W)) {
        await set(writers[j].ref(`room/w${j}`), { round, j });
        expected.push(['put', { path: `/w${j}`, data: { round, j } }]);
        await update(writers[j].ref('room'), { [`u${j}`]: round, 'meta/last': `${j}-${round}` });
        expected.push(['patch', { path: '/', data: { [`u${j}`]: round, 'meta/last': `${j}-${round}` } }]);
      }
    }
    // REST writes take the same path as the SDK's.
    assert.equal((await rest(restURL(h.server, ns, 'room/rest'), { method: 'PUT', body: { via: 'put' } })).status, 200);
    expected.push(['put', { path: '/rest', data: { via: 'put' } }]);
    assert.equal((await rest(restURL(h.server, ns, 'room/rest'), { method: 'PATCH', body: { via: 'patch', n: 1 } })).status, 200);
    expected.push(['patch', { path: '/rest', data: { via: 'patch', n: 1 } }]);
    assert.equal((await rest(restURL(h.server, ns, 'room/rest/n'), { method: 'DELETE' })).status, 200);
    expected.push(['put', { path: '/rest/n', data: null }]);
    await Promise.all(streams.map((s) => s.untilData(expected.length)));
    for (const [i, s] of streams.entries()) {
      assert.equal(s.status, 200);
      assert.deepEqual(s.dataEvents.map((e) => [e.event, e.data]), expected, `stream ${i}`);
    }

    // Concurrent writes: every stream sees the same order, and each writer's writes in its order.
    const K = 5;
    await Promise.all(
      writers.map(async (c, j) => {
        for (let k = 1; k <= K; k++) await set(c.ref(`room/c${j}`), k);
      }),
    );
    const total = expected.length + W * K;
    await Promise.all(streams.map((s) => s.untilData(total)));
    const tails = streams.map((s) => s.dataEvents.slice(expected.length).map((e) => [e.event, e.data]));
    for (const [i, tail] of tails.entries()) assert.deepEqual(tail, tails[0], `stream ${i} in the same order as stream 0`);
    for (const j of range(W)) {
      assert.deepEqual(
        tails[0].filter(([, d]) => d.path === `/c${j}`),
        range(K).map((k) => ['put', { path: `/c${j}`, data: k + 1 }]),
      );
    }
    assert.equal(tails[0].length, W * K);
    const value = (await rest(url)).json;
    assert.deepEqual(value, {
      ...Object.fromEntries(range(W).map((j) => [`w${j}`, { round: 1, j }])),
      ...Object.fromEntries(range(W).map((j) => [`u${j}`, 1])),
      ...Object.fromEntries(range(W).map((j) => [`c${j}`, K])),
      meta: { last: `${W - 1}-1` },
      rest: { via: 'patch' },
    });
  });

  it('10 authenticated users: own paths readable, others refused, a rules change cancels the revoked listens', T, async () => {
    const ns = h.ns('auth');
    const N = 10;
    await putRules(h.server, ns, {
      rules: {
        users: { $uid: { '.read': 'auth != null && auth.uid == $uid', '.write': 'auth != null && auth.uid == $uid' } },
        board: { '.read': 'auth != null', '.write': 'auth != null' },
      },
    });
    const users = range(N).map((i) => h.client(ns, { emulatorMockUserToken: { sub: `u${i}`, user_id: `u${i}` } }));
    const admin = h.admin(ns); // the `owner` token
    const listens = [];
    const listen = (q, label) => {
      const l = new Listen(q, label);
      listens.push(l);
      return l;
    };
    const own = users.map((u, i) => listen(u.ref(`users/u${i}`), `u${i} users/u${i}`));
    const board = users.map((u, i) => listen(u.ref('board'), `u${i} board`));
    const other = users.map((u, i) => listen(u.ref(`users/u${(i + 1) % N}`), `u${i} users/u${(i + 1) % N}`));
    await Promise.all(other.map((l) => l.cancelled()));
    await Promise.all([...own, ...board].map((l) => l.untilVal(null)));

    await Promise.all(users.map((u, i) => set(u.ref(`users/u${i}`), { n: 1 })));
    await Promise.all(users.map((u, i) => set(u.ref(`board/u${i}`), i)));
    await admin.ref(`users/u0/byAdmin`).set(true);
    const fullBoard = Object.fromEntries(range(N).map((i) => [`u${i}`, i]));
    await Promise.all(board.map((l) => l.untilVal(fullBoard)));
    await own[0].untilVal({ byAdmin: true, n: 1 });
    for (const i of range(N).slice(1)) await own[i].untilVal({ n: 1 });
    for (const l of other) assert.deepEqual(l.values, [], `${l.label} got no data`);

    // The board becomes unreadable: every board listen is cancelled, the own listens go on.
    await putRules(h.server, ns, {
      rules: {
        users: { $uid: { '.read': 'auth != null && auth.uid == $uid', '.write': 'auth != null && auth.uid == $uid' } },
        board: { '.read': false, '.write': 'auth != null' },
      },
    });
    await Promise.all(board.map((l) => l.cancelled()));
    await admin.ref('board/late').set('not seen');
    // Each user's own write is answered after every push queued before it on its connection.
    await Promise.all(users.map((u, i) => set(u.ref(`users/u${i}/n`), 2)));
    await own[0].untilVal({ byAdmin: true, n: 2 });
    for (const i of range(N).slice(1)) await own[i].untilVal({ n: 2 });
    for (const l of board) assert.equal(JSON.stringify(l.values.at(-1)), JSON.stringify(fullBoard), `${l.label}: nothing after the cancel`);
    for (const l of own) assert.equal(l.error, null, `${l.label} still live`);
    assert.deepEqual((await admin.ref('board').get()).val(), { ...fullBoard, late: 'not seen' });
    for (const l of listens) l.off();
  });
  it('8 raw connections authenticated as users: refused reads answered, revoked listens cancelled, owner reads all', T, async () => {
    const ns = h.ns('rawauth');
    const N = 8;
    const ownOnly = (extra = {}) => ({
      rules: { users: { $uid: { '.read': 'auth != null && auth.uid == $uid', '.write': 'auth != null && auth.uid == $uid', ...extra } } },
    });
    await putRules(h.server, ns, ownOnly());
    const owner = await raw(ns);
    assert.equal((await owner.request('gauth', { cred: 'owner' })).s, 'ok');
    assert.deepEqual(await owner.request('p', { p: '/users', d: Object.fromEntries(range(N).map((i) => [`u${i}`, { n: 0 }])) }), { s: 'ok', d: '' });

    const clients = await Promise.all(range(N).map(() => raw(ns)));
    await Promise.all(
      clients.map(async (c, i) => {
        assert.equal((await c.request('auth', { cred: mockToken(`u${i}`) })).s, 'ok');
        const from = c.messages.length;
        const r = c.sendRequest('q', { p: `/users/u${i}`, h: '' });
        const ok = await c.response(r);
        assert.equal(ok.body.s, 'ok');
        assert.deepEqual(c.messages.slice(from, ok.index), [{ t: 'd', d: { a: 'd', b: { p: `/users/u${i}`, d: { n: 0 } } } }]);
        const other = `/users/u${(i + 1) % N}`;
        assert.deepEqual(await c.request('q', { p: other, h: '' }), { s: 'permission_denied', d: 'Permission denied' });
        assert.deepEqual(await c.request('p', { p: `${other}/n`, d: 1 }), { s: 'permission_denied', d: 'Permission denied' });
        assert.deepEqual(await c.request('p', { p: `/users/u${i}/n`, d: 1 }), { s: 'ok', d: '' });
      }),
    );
    const before = clients.map((c) => c.messages.length);

    // The even users lose their read: their listens are cancelled, the odd ones' go on.
    const even = Object.fromEntries(range(N).filter((i) => i % 2 === 0).map((i) => [`u${i}`, { '.read': false }]));
    await putRules(h.server, ns, { rules: { users: { ...ownOnly().rules.users, ...even } } });
    await Promise.all(
      clients.map(async (c, i) => {
        if (i % 2 === 0) await c.waitMessage((m) => m.t === 'd' && m.d.a === 'c', { from: before[i], label: `cancel of u${i}'s listen` });
      }),
    );
    assert.deepEqual(await owner.request('p', { p: '/users', d: Object.fromEntries(range(N).map((i) => [`u${i}`, { n: 2 }])) }), { s: 'ok', d: '' });
    // A reply on each connection comes after every push queued for it before.
    await Promise.all(
      clients.map(async (c, i) => {
        const r = c.sendRequest('g', { p: `/users/u${(i + 1) % N}`, q: {} });
        const reply = await c.response(r);
        assert.deepEqual(reply.body, { s: 'permission_denied', d: 'Permission denied' });
        // Even users: the cancel, and no data after it. Odd users: the owner's write.
        const expected = i % 2 === 0 ? { a: 'c', b: { p: `/users/u${i}` } } : { a: 'd', b: { p: `/users/u${i}`, d: { n: 2 } } };
        assert.deepEqual(c.messages.slice(before[i], reply.index), [{ t: 'd', d: expected }], `u${i}`);
      }),
    );
    assert.deepEqual(await owner.request('g', { p: '/users', q: {} }), { s: 'ok', d: Object.fromEntries(range(N).map((i) => [`u${i}`, { n: 2 }])) });
  });
});
