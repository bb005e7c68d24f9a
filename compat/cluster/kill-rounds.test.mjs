// Kill rounds through HAProxy (issue #21): official SDK clients reach a cluster of nodes
// through one load balancer, as in production; a node is killed with SIGKILL while they
// write, several times. The clients must reconnect on their own (HAProxy sends them to a
// live node), their listens must resume with the right data, and every write the cluster
// acknowledged must be there afterwards.
//
// Runs inside scripts/cluster-harness (scripts/cluster-smoke does that), which gives the
// cluster's addresses in HARNESS_URL and HARNESS_NODES and kills and restarts nodes with
// `scripts/cluster-harness ctl`. Barriers are SDK events and HAProxy's own view of a node
// (its stats socket), never pauses.
//
// A round kills an *edge-only* node: one that owns none of the test's databases, so the
// databases stay served and only the connections that went through that node are lost.
// Killing an owner needs replication and failover (another part of issue #21): its rounds
// are listed below as to do, with the same checks to run once failover exists.

import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { ref, set, get, onValue } from 'firebase/database';
import { createClient } from '../lib/harness.mjs';
import { ownerOf, nsOwnedBy } from '../lib/placement.mjs';
import { withTimeout } from '../lib/util.mjs';

const ROUNDS = Number(process.env.KILL_ROUNDS ?? 5);
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
  w.loop = (async () => {
    for (let n = 1; !w.stopped; n++) {
      try {
        await set(ref(c.db, `log/w${String(n).padStart(5, '0')}`), n);
        w.acked.set(`w${String(n).padStart(5, '0')}`, n);
      } catch (error) {
        w.failed.push(`${ns} write ${n}: ${error.message}`);
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

describe('kill rounds through HAProxy', { skip: !url && 'runs inside scripts/cluster-harness' }, () => {
  const clients = [];
  after(async () => {
    await Promise.allSettled(clients.map((c) => withTimeout(c.dispose(), 10_000, 'dispose')));
  });

  it(`${ROUNDS} rounds of SIGKILL of an edge-only node during writes`, { timeout: 30_000 + ROUNDS * 30_000 }, async () => {
    assert.ok(ids.length >= 3, `three nodes or more (got ${ids})`);
    const victim = ids.at(-1);
    const owners = ids.filter((id) => id !== victim);
    // One database on each of two other nodes: the victim owns none of them.
    const dbs = owners.slice(0, 2).map((id) => nsOwnedBy(ids, id, 'kill'));
    assert.ok(dbs.every((ns) => ownerOf(ids, ns) !== victim));

    const writers = dbs.map((ns) => writer(ns));
    clients.push(...writers.map((w) => w.c));
    const listeners = [];
    for (let round = 1; round <= ROUNDS; round++) {
      await ctl('wait-up', victim);
      // New listeners each round: HAProxy balances by least connections, so the restarted
      // victim (which has none) takes some of them.
      const fresh = dbs.flatMap((ns) => Array.from({ length: 4 }, () => listener(ns)));
      clients.push(...fresh.map((l) => l.c));
      listeners.push(...fresh);
      await Promise.all(fresh.map((l) => l.waitFor((s) => s.connected, `round ${round}: connected`)));
      await Promise.all(writers.map((w) => w.acks(WRITES_AROUND_KILL, `round ${round}: writes before the kill`)));

      const lossesBefore = listeners.map((l) => l.losses);
      await ctl('kill', victim);
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
      assert.ok(lost.length > 0, `round ${round}: some listener went through ${victim}`);
      console.log(`round ${round}: ${lost.length} of ${listeners.length} listeners lost their connection through ${victim} and resumed; ` +
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

  it.todo('rounds that kill the owner of a database: needs replication and failover (issue #21); ' +
    'the victim is then ownerOf(ids, db) and the checks above stand, plus writes served again within 10 s');
});
