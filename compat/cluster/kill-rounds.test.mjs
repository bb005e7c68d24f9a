// Kill rounds through HAProxy (issue #21): official SDK clients reach a cluster of nodes
// through one load balancer, as in production; a node is killed with SIGKILL while they
// write, several times. The clients must reconnect on their own (HAProxy sends them to a
// live node), their listens must resume with the right data, and every write the cluster
// acknowledged must be there afterwards.
//
// Runs inside scripts/cluster-harness (scripts/cluster-smoke does that), which gives the
// cluster's addresses in HARNESS_URL, HARNESS_NODES and HARNESS_ETCD and kills and restarts
// nodes with `scripts/cluster-harness ctl`. Barriers are SDK events, etcd's claims and
// HAProxy's own view of a node (its stats socket), never pauses.
//
// The rounds take turns killing the first database's owner, its follower (the node its log
// is shipped to) and a node that is neither (edge-only), as etcd's claims say at each round:
// a killed owner's databases must take writes again within 10 s (its follower claims them),
// and nothing acknowledged may be lost whichever node dies.

import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { ref, set, get, onValue } from 'firebase/database';
import { createClient } from '../lib/harness.mjs';
import { etcdRanked } from '../lib/cluster.mjs';
import { hearthBinary } from '../lib/server.mjs';
import { withTimeout } from '../lib/util.mjs';

const ROUNDS = Number(process.env.KILL_ROUNDS ?? 5);
/** What each round kills, in turn (relative to the first database). */
const KINDS = ['owner', 'follower', 'edge-only'];
/** How soon a killed owner's database must take writes again. */
const FAILOVER_MS = 10_000;
/** Writes acknowledged before a kill, and again after the lost clients are back, each round. */
const WRITES_AROUND_KILL = 5;

const HARNESS = path.join(path.dirname(fileURLToPath(import.meta.url)), '../../scripts/cluster-harness');
const run = promisify(execFile);
const ctl = (...args) => run(HARNESS, ['ctl', ...args], { timeout: 30_000 });

const url = process.env.HARNESS_URL;
const ids = (process.env.HARNESS_NODES ?? '').split(',').filter(Boolean).map((n) => n.split('=')[0]);
/** What the SDK needs to reach the cluster: HAProxy's address, never a node's. */
const cluster = { databaseURL: (ns) => `${url}?ns=${ns}`, port: Number(new URL(url ?? 'http://x:1').port) };

/** Resolves once `pred()` holds, checked on every call of the returned `poke`. */
function until(pred, label, ms = 20_000) {
  let poke;
  const done = new Promise((resolve) => {
    poke = () => pred() && resolve();
  });
  poke();
  return { poke, done: withTimeout(done, ms, label) };
}

/**
 * A client of `ns` through HAProxy that listens to `/log` and to `.info/connected`, and
 * counts the connections it lost.
 */
function listener(ns) {
  const c = createClient(cluster, ns);
  const state = { c, ns, value: null, connected: false, losses: 0, waiters: new Set() };
  const poke = () => state.waiters.forEach((w) => w());
  onValue(ref(c.db, '.info/connected'), (snap) => {
    if (state.connected && !snap.val()) state.losses++;
    state.connected = snap.val();
    poke();
  });
  onValue(ref(c.db, 'log'), (snap) => {
    state.value = snap.val();
    poke();
  });
  state.waitFor = (pred, label, ms) => {
    const w = until(() => pred(state), label, ms);
    state.waiters.add(w.poke);
    return w.done.finally(() => state.waiters.delete(w.poke));
  };
  return state;
}

/** Writes `/log/w<n>` = n through HAProxy, one after another, until stopped. */
function writer(ns) {
  const c = createClient(cluster, ns);
  const w = { c, ns, acked: new Map(), failed: [], stopped: false, waiters: new Set() };
  w.refused = 0;
  w.loop = (async () => {
    for (let n = 1; !w.stopped;) {
      const key = `w${String(n).padStart(5, '0')}`;
      try {
        await set(ref(c.db, `log/${key}`), n);
        w.acked.set(key, n);
        w.lastAck = Date.now();
        n++;
      } catch (error) {
        // Refused while the database has no owner that may write (a failover): the SDK
        // does not resend a refused write, so the application does, as this one.
        if (/unavailable/i.test(`${error.code} ${error.message}`)) w.refused++;
        else w.failed.push(`${ns} write ${n}: ${error.message}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      w.waiters.forEach((p) => p());
    }
  })();
  w.acks = (count, label) => {
    const target = w.acked.size + count;
    const u = until(() => w.acked.size >= target, label);
    w.waiters.add(u.poke);
    return u.done.finally(() => w.waiters.delete(u.poke));
  };
  return w;
}

const holds = (value, acked) => [...acked].every(([k, n]) => value?.[k] === n);

/** The node whose claim on `ns` etcd holds now. */
function ownerNow(ns) {
  const out = execFileSync(hearthBinary(), ['cluster', 'status', '--etcd', process.env.HARNESS_ETCD, '--json']);
  return JSON.parse(out.toString()).databases.find((d) => d.namespace === ns)?.owner;
}

describe('kill rounds through HAProxy', { skip: !url && 'runs inside scripts/cluster-harness' }, () => {
  const clients = [];
  after(async () => {
    await Promise.allSettled(clients.map((c) => withTimeout(c.dispose(), 10_000, 'dispose')));
  });

  it(`${ROUNDS} rounds of SIGKILL of an owner, a follower and an edge-only node during writes`, { timeout: 30_000 + ROUNDS * 40_000 }, async () => {
    assert.ok(ids.length >= 3, `three nodes or more (got ${ids})`);
    // Two databases, owned (placement says, and etcd's claim confirms below) by two
    // different nodes.
    const dbs = [];
    for (let i = 0; dbs.length < 2; i++) {
      const ns = `kill-${Date.now().toString(36)}-${i}`;
      if (dbs.every((other) => etcdRanked(ids, other)[0] !== etcdRanked(ids, ns)[0])) dbs.push(ns);
    }
    const writers = dbs.map((ns) => writer(ns));
    clients.push(...writers.map((w) => w.c));
    const listeners = [];
    await Promise.all(writers.map((w) => w.acks(1, 'the first write')));
    for (let round = 1; round <= ROUNDS; round++) {
      await Promise.all(ids.map((id) => ctl('wait-up', id)));
      const kind = KINDS[(round - 1) % KINDS.length];
      const owner = ownerNow(dbs[0]);
      assert.ok(ids.includes(owner), `round ${round}: ${dbs[0]} has an owner (${owner})`);
      const follower = etcdRanked(ids.filter((id) => id !== owner), dbs[0])[0];
      const victim = { owner, follower }[kind] ?? ids.find((id) => id !== owner && id !== follower);
      const owned = dbs.filter((ns) => ownerNow(ns) === victim);
      // New listeners each round: HAProxy balances by least connections, so the restarted
      // victim (which has none) takes some of them.
      const fresh = dbs.flatMap((ns) => Array.from({ length: 4 }, () => listener(ns)));
      clients.push(...fresh.map((l) => l.c));
      listeners.push(...fresh);
      await Promise.all(fresh.map((l) => l.waitFor((s) => s.connected, `round ${round}: connected`)));
      await Promise.all(writers.map((w) => w.acks(WRITES_AROUND_KILL, `round ${round}: writes before the kill`)));

      const lossesBefore = listeners.map((l) => l.losses);
      const killedAt = Date.now();
      await ctl('kill', victim);
      if (owned.length > 0) {
        // Its databases take writes again within FAILOVER_MS of the kill, on another node.
        const back = writers.filter((w) => owned.includes(w.ns));
        // A write in flight at the kill may still have been acknowledged by the victim:
        // count from the new claim on.
        for (const ns of owned) {
          const deadline = killedAt + FAILOVER_MS + 5_000;
          while (ownerNow(ns) === victim || ownerNow(ns) === undefined) {
            assert.ok(Date.now() < deadline, `round ${round}: ${ns} claimed again`);
            await new Promise((r) => setTimeout(r, 100));
          }
        }
        await Promise.all(back.map((w) => w.acks(1, `round ${round}: ${w.ns} written again after its owner died`)));
        const took = Math.max(...back.map((w) => w.lastAck)) - killedAt;
        assert.ok(took < FAILOVER_MS, `round ${round}: writes came back after ${took} ms`);
        for (const ns of owned) assert.notEqual(ownerNow(ns), victim, `round ${round}: ${ns} claimed again`);
        console.log(`round ${round}: ${owned.join(', ')} taken over from ${victim} in ${took} ms`);
      }
      // HAProxy has seen the node down (and closed whatever still went through it) ...
      await ctl('wait-down', victim);
      // ... the writes go on (a writer that went through the victim resends on its own) ...
      await Promise.all(writers.map((w) => w.acks(WRITES_AROUND_KILL, `round ${round}: writes after the kill`)));
      // ... and every listener has every write acknowledged so far: one whose connection went
      // through the victim can only have them once it noticed, reconnected and listened again.
      const snapshot = writers.map((w) => new Map(w.acked));
      await Promise.all(listeners.map((l) => l.waitFor(
        (s) => s.connected && holds(s.value, snapshot[dbs.indexOf(s.ns)]), `round ${round}: ${l.ns} caught up`)));
      const lost = listeners.filter((l, i) => l.losses > lossesBefore[i]);
      assert.ok(lost.length > 0, `round ${round}: some listener was cut by the death of ${victim}`);
      console.log(`round ${round} (${kind} ${victim}): ${lost.length} of ${listeners.length} listeners lost their connection and resumed; ` +
        `${writers.map((w) => w.acked.size).join(' and ')} writes acknowledged`);
      await ctl('start', victim);
    }

    writers.forEach((w) => { w.stopped = true; });
    await Promise.all(writers.map((w) => withTimeout(w.loop, 20_000, 'the writers stop')));
    assert.deepEqual(writers.flatMap((w) => w.failed), [], 'no write failed');
    for (const [i, w] of writers.entries()) {
      // Every acknowledged write, read by a client that was never killed, and by every listener.
      const reader = createClient(cluster, w.ns);
      clients.push(reader);
      const stored = (await withTimeout(get(ref(reader.db, 'log')), 20_000, 'a read')).val();
      assert.ok(holds(stored, w.acked), `every acknowledged write of ${w.ns} is stored`);
      assert.equal(Object.keys(stored).length, w.acked.size, 'and nothing else');
      await Promise.all(listeners.filter((l) => l.ns === dbs[i]).map((l) => l.waitFor(
        (s) => s.connected && holds(s.value, w.acked) && Object.keys(s.value).length === w.acked.size,
        `${l.ns}: the final value`)));
    }
  });
});
