// Durability through the official SDKs: `firebase` (modular client) and `firebase-admin`
// apps that stay alive across server restarts (SIGTERM and SIGKILL, same port, same data
// directory), reconnect by themselves and resync against the recovered state.
//
// test/restart.test.mjs covers the basic cases (a listener reconnects, data and rules are
// there afterwards); this file checks what only a recovered server can get right:
//   * a listener that stays attached over several restarts never sees a value other than the
//     persisted one (a server that lost data would push null or a partial tree on re-listen);
//   * writes queued by both SDKs while the server is dead (SIGKILL) are re-sent,
//     acknowledged and then durable (they survive the next SIGKILL);
//   * a transaction from a client whose cache predates the crash builds on the recovered
//     value (its hash must match the server's);
//   * rules PUT through REST are durable as soon as the 200 arrives (SIGKILL right after it),
//     the last of several rules documents wins, and the reconnected SDK clients obey them.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { get, set, update, runTransaction } from 'firebase/database';
import { useHearth } from '../../lib/harness.mjs';
import { canonical, recordAdminValues, recordValues } from '../../lib/util.mjs';
import { OWNER_HEADERS, getRules, http, putRules } from '../../lib/rules.mjs';

const RT = { timeout: 60_000 };
const RECONNECT_MS = 25_000; // the SDKs back off up to a few seconds between attempts

const same = (a, b) => JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));

async function crash(server) {
  await server.kill('SIGKILL');
  await server.start({ retryOnEarlyExit: true });
}

async function graceful(server) {
  await server.restart(); // SIGTERM, then start on the same port and directory
}

describe('durability through the SDKs (restarts with live clients)', () => {
  const h = useHearth();
  const rest = (ns, p) => `http://127.0.0.1:${h.port}/${p}.json?ns=${ns}`;

  /** Waits until `conn` (a recorder of .info/connected) went false and then true again after index `from`. */
  const reconnected = (conn, from, who) =>
    conn.until(
      (s, r) => s.val() === true && r.snaps.length > from && r.values.slice(from).includes(false),
      RECONNECT_MS,
      `${who} disconnect + reconnect`,
    );

  it('listeners of both SDKs stay attached over SIGTERM and SIGKILL restarts and only ever see persisted data', RT, async () => {
    const ns = h.ns('dur');
    const writer = h.client(ns);
    const listener = h.client(ns);
    const admin = h.admin(ns);
    const seen = recordValues(listener.ref('doc'), 'client onValue(doc)');
    const adminSeen = recordAdminValues(admin.ref('doc'), 'admin on(value doc)');
    const conn = recordValues(listener.ref('.info/connected'), 'client .info/connected');
    const adminConn = recordAdminValues(admin.ref('.info/connected'), 'admin .info/connected');
    await seen.first();
    await adminSeen.first();
    await conn.untilVal(true);
    await adminConn.untilVal(true);

    const restarts = [
      ['SIGTERM', graceful],
      ['SIGKILL', crash],
      ['SIGKILL', crash],
    ];
    let expected = null;
    for (const [i, [how, restart]] of restarts.entries()) {
      // A new version of the document, acknowledged (so durable) before the restart.
      expected = { round: i, title: `v${i}`, nested: { list: [i, 'x', true], f: i + 0.25 }, pad: 'p'.repeat(100 * i) };
      await set(writer.ref('doc'), expected);
      await seen.untilVal(expected);
      await adminSeen.untilVal(expected);
      const from = seen.snaps.length;
      const adminFrom = adminSeen.snaps.length;
      const connFrom = conn.snaps.length;
      const adminConnFrom = adminConn.snaps.length;

      await restart(h.server);

      await reconnected(conn, connFrom, `restart ${i} (${how}): client`);
      await reconnected(adminConn, adminConnFrom, `restart ${i} (${how}): admin`);
      // A change made after the restart reaches both listeners on top of the recovered
      // document; had the server lost it, they would see { after } alone.
      const after = { ...expected, after: i };
      await admin.ref('doc/after').set(i);
      // Fails at the first value that is neither the persisted document nor that change.
      for (const [label, rec, start] of [
        ['client', seen, from],
        ['admin', adminSeen, adminFrom],
      ]) {
        await rec.until(
          (snap, r) => {
            const bad = r.values.slice(start).filter((v) => !same(v, expected) && !same(v, after));
            if (bad.length) {
              throw new Error(
                `restart ${i} (${how}): the ${label} listener saw ${JSON.stringify(bad[0])}, expected only the persisted ` +
                  `document ${JSON.stringify(expected)} and then ${JSON.stringify(after)}`,
              );
            }
            return same(snap.val(), after);
          },
          RECONNECT_MS,
          `restart ${i} (${how}): ${label} sees the recovered document plus { after: ${i} }`,
        );
      }
      // Reads from the live, reconnected clients and from a fresh one agree.
      assert.deepEqual((await get(listener.ref('doc'))).val(), after, `restart ${i} (${how}): get() of the reconnected client`);
      assert.deepEqual((await admin.ref('doc').once('value')).val(), after, `restart ${i} (${how}): admin once()`);
      assert.deepEqual((await get(h.client(ns).ref('doc'))).val(), after, `restart ${i} (${how}): get() of a fresh client`);
    }
    seen.off();
    adminSeen.off();
    conn.off();
    adminConn.off();
  });

  it('writes queued by both SDKs while the server is dead (SIGKILL) are delivered, acknowledged and durable', RT, async () => {
    const ns = h.ns('dur');
    const client = h.client(ns);
    const admin = h.admin(ns);
    const watcher = h.client(ns);
    await set(client.ref('before'), 'kept');
    const seen = recordValues(watcher.ref('/'), 'watcher onValue(/)');
    await seen.untilVal({ before: 'kept' });
    const conn = recordValues(client.ref('.info/connected'), 'client .info/connected');
    const adminConn = recordAdminValues(admin.ref('.info/connected'), 'admin .info/connected');
    await conn.untilVal(true);
    await adminConn.untilVal(true);

    await h.server.kill('SIGKILL');
    await conn.untilVal(false, 10_000);
    await adminConn.untilVal(false, 10_000);
    // Queued by the SDKs: neither can be acknowledged until the server is back.
    // Each acknowledgement's time is compared with the restart's below, instead of pausing
    // here and checking that none came.
    let clientAckedAt = null;
    let adminAckedAt = null;
    const fromClient = set(client.ref('queued/client'), { by: 'client', n: 1 }).then(() => (clientAckedAt = Date.now()));
    const fromClientMerge = update(client.ref('queued'), { 'm/a': 1, 'm/b': 'two' });
    const fromAdmin = admin.ref('queued/admin').set({ by: 'admin', n: 2 }).then(() => (adminAckedAt = Date.now()));

    const restartedAt = Date.now();
    await h.server.start({ retryOnEarlyExit: true });
    const wanted = { before: 'kept', queued: { client: { by: 'client', n: 1 }, admin: { by: 'admin', n: 2 }, m: { a: 1, b: 'two' } } };
    await Promise.all([fromClient, fromClientMerge, fromAdmin]).then(
      () => {},
      (e) => assert.fail(`a queued write was refused after the restart: ${e.message}`),
    );
    assert.ok(clientAckedAt >= restartedAt, `the client's write was acknowledged ${restartedAt - clientAckedAt} ms before the restart`);
    assert.ok(adminAckedAt >= restartedAt, `the admin's write was acknowledged ${restartedAt - adminAckedAt} ms before the restart`);
    const now = await http(rest(ns, ''), { headers: OWNER_HEADERS });
    assert.deepEqual(now.json, wanted, 'after the restart: the data from before the crash plus the queued writes');
    await seen.untilVal(wanted, RECONNECT_MS);

    // Acknowledged means durable: a second crash right away keeps all of them.
    await crash(h.server);
    const got = await http(rest(ns, ''), { headers: OWNER_HEADERS });
    assert.equal(got.status, 200, got.text);
    assert.deepEqual(got.json, wanted, 'the writes acknowledged after the first restart survive a second SIGKILL');
    await seen.untilVal(wanted, RECONNECT_MS);
    seen.off();
    conn.off();
    adminConn.off();
  });

  it('a transaction from a client that stayed alive over a SIGKILL builds on the recovered value', RT, async () => {
    const ns = h.ns('dur');
    const a = h.client(ns);
    const b = h.client(ns);
    await set(a.ref('counter'), 10);
    await set(a.ref('list'), { x: { score: 1 }, y: { score: 2 } });
    // b's cache holds the pre-crash values; its transactions send their hash.
    const seen = recordValues(b.ref('counter'));
    await seen.untilVal(10);
    const conn = recordValues(b.ref('.info/connected'));
    await conn.untilVal(true);
    const from = conn.snaps.length;

    await crash(h.server);
    await reconnected(conn, from, 'client b');

    const calls = [];
    const result = await runTransaction(b.ref('counter'), (v) => {
      calls.push(v);
      return (v ?? 0) + 1;
    });
    assert.equal(result.committed, true, 'the transaction commits');
    assert.equal(result.snapshot.val(), 11, `the transaction ran on the recovered 10 (its function saw ${JSON.stringify(calls)})`);
    const tx2 = await runTransaction(b.ref('list/y/score'), (v) => (v ?? 0) * 10);
    assert.equal(tx2.snapshot.val(), 20, 'a transaction on a recovered nested value');
    const got = await http(rest(ns, ''));
    assert.deepEqual(got.json, { counter: 11, list: { x: { score: 1 }, y: { score: 20 } } });
    seen.off();
    conn.off();
  });

  it('rules PUT through REST are durable once acknowledged; the last document wins; reconnected SDK clients obey them', RT, async () => {
    const ns = h.ns('dur');
    const client = h.client(ns);
    const admin = h.admin(ns);
    await set(client.ref('open/x'), 1);
    await set(client.ref('frozen'), 'old');
    const conn = recordValues(client.ref('.info/connected'));
    await conn.untilVal(true);

    const first = '{"rules": {".read": true, ".write": true}}';
    const last = `{
  // comments and layout are kept as written
  "rules": {
    ".read": true,
    "open": { ".write": true },
    "frozen": { ".write": false },
    "checked": { ".write": true, ".validate": "newData.isNumber() && newData.val() < 100" }
  }
}`;
    await putRules(h.server, ns, first);
    await putRules(h.server, ns, last);
    // SIGKILL at once after the 200: the rules record must already be on disk.
    let from = conn.snaps.length;
    await crash(h.server);
    let rules = await getRules(h.server, ns);
    assert.equal(rules.status, 200, rules.text);
    assert.equal(rules.text, last, 'after SIGKILL: the last rules document, byte for byte');
    await reconnected(conn, from, 'client after SIGKILL');

    const denied = async (promise, what) => {
      await assert.rejects(promise, /permission[_ ]denied/i, `${what} is refused by the recovered rules`);
    };
    await denied(set(client.ref('frozen'), 'new'), 'a write to frozen (client SDK, reconnected)');
    await denied(set(client.ref('checked'), 500), 'a write failing .validate');
    await set(client.ref('checked'), 5);
    await set(client.ref('open/y'), 2);
    await admin.ref('frozen').set('admin'); // admins bypass rules

    // And once more through a graceful restart.
    from = conn.snaps.length;
    await graceful(h.server);
    rules = await getRules(h.server, ns);
    assert.equal(rules.text, last, 'after SIGTERM: the last rules document');
    await reconnected(conn, from, 'client after SIGTERM');
    await denied(set(client.ref('frozen'), 'again'), 'a write to frozen after the graceful restart');
    const got = await http(rest(ns, ''), { headers: OWNER_HEADERS });
    assert.deepEqual(got.json, { open: { x: 1, y: 2 }, frozen: 'admin', checked: 5 });
    conn.off();
  });
});
