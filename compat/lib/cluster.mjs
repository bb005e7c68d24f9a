// Helpers of the cluster tests: the static placement (`--cluster-peers`, docs/cluster-link.md)
// and etcd (`--cluster-etcd`, docs/cluster.md).

import { after, before } from 'node:test';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { set } from 'firebase/database';
import { createClient, uniqueNs } from './harness.mjs';
import { HearthServer, freePort, hearthBinary } from './server.mjs';

/** The etcd placement's weight (`crates/cluster/src/rendezvous.rs`): FNV-1a, then SplitMix64's mixer. */
export function etcdWeight(node, ns) {
  let h = 0xcbf29ce484222325n;
  for (const byte of [...Buffer.from(node), 0xff, ...Buffer.from(ns)]) {
    h ^= BigInt(byte);
    h = (h * 0x100000001b3n) & MASK;
  }
  h = ((h ^ (h >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK;
  h = ((h ^ (h >> 27n)) * 0x94d049bb133111ebn) & MASK;
  return h ^ (h >> 31n);
}

/** Live node `ids` as etcd's placement ranks them for an unclaimed `ns`: owner, follower, ... */
export function etcdRanked(ids, ns) {
  return [...ids].sort().sort((x, y) => {
    const [wx, wy] = [etcdWeight(x, ns), etcdWeight(y, ns)];
    return wy > wx ? 1 : wy < wx ? -1 : 0;
  });
}

/** The etcd the etcd tests start (Debian's etcd-server), or HEARTH_TEST_ETCD. */
export const ETCD = process.env.HEARTH_TEST_ETCD || '/usr/bin/etcd';

/**
 * Starts a one-member etcd with its data under `dir`, on free loopback ports; resolves once
 * it answers /health, with its client URL and process (kill it with SIGKILL when done).
 */
export async function startEtcd(dir) {
  const [client, peer] = [await freePort(), await freePort()];
  const url = `http://127.0.0.1:${client}`;
  const peerUrl = `http://127.0.0.1:${peer}`;
  const proc = spawn(ETCD, ['--data-dir', path.join(dir, 'etcd'), '--name', 't',
    '--listen-client-urls', url, '--advertise-client-urls', url,
    '--listen-peer-urls', peerUrl, '--initial-advertise-peer-urls', peerUrl,
    '--initial-cluster', `t=${peerUrl}`], { stdio: 'ignore' });
  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      if ((await fetch(`${url}/health`)).ok) return { url, proc };
    } catch { /* not yet */ }
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error('etcd did not start');
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

// The static placement's rendezvous score (`peer/placement.rs`), to pick databases owned and
// followed by given nodes. Pinned on the Rust side too.
const MASK = (1n << 64n) - 1n;
function score(node, ns) {
  let h = 0xcbf29ce484222325n;
  for (const byte of [...Buffer.from(node), 0xff, ...Buffer.from(ns)]) {
    h ^= BigInt(byte);
    h = (h * 0x100000001b3n) & MASK;
  }
  h ^= h >> 33n;
  h = (h * 0xff51afd7ed558ccdn) & MASK;
  h ^= h >> 33n;
  h = (h * 0xc4ceb9fe1a85ec53n) & MASK;
  return h ^ (h >> 33n);
}

/** `ids` from the highest score for `ns` down (the owner, then the follower); ties: smaller id. */
export function ranked(ids, ns) {
  return [...ids].sort().sort((x, y) => {
    const [sx, sy] = [score(x, ns), score(y, ns)];
    return sy > sx ? 1 : sy < sx ? -1 : 0;
  });
}

/** The id among `ids` of the node that owns `ns`. */
export function ownerOf(ids, ns) {
  return ranked(ids, ns)[0] ?? null;
}

/** A fresh namespace that node `id` of `ids` owns. */
export function nsOwnedBy(ids, id, prefix = 'cl') {
  for (;;) {
    const ns = uniqueNs(prefix);
    if (ownerOf(ids, ns) === id) return ns;
  }
}

/**
 * Resolves once the server's log, past its first `from` characters, has a line matching
 * `pattern` (polled: a barrier).
 */
export async function logShows(server, pattern, label, { from = 0, ms = 15_000 } = {}) {
  const deadline = Date.now() + ms;
  while (!pattern.test(server.log().slice(from))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${label}\n${server.logTail(20)}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * Starts node `id` of an etcd cluster (a lease of `leaseSecs`, linked by the secret in `dir`):
 * clients on 127.0.0.1, its link on 127.0.0.(2+index). Resolves with the node once it
 * answers; `extraArgs` go to it. The link is plain text unless they hold --cluster-tls-cert.
 */
export async function startEtcdNode(dir, etcdUrl, id, index, extraArgs = [], { leaseSecs = 2 } = {}) {
  const secret = path.join(dir, 'secret');
  if (!fs.existsSync(secret)) fs.writeFileSync(secret, 'a shared secret of the test cluster\n');
  // The port is asked for on the link's own address: one free on 127.0.0.1 may be taken
  // there (a load test's clients bind their source ports on those addresses).
  const host = `127.0.0.${2 + index}`;
  const link = `${host}:${await freePort(host)}`;
  const plain = extraArgs.includes('--cluster-tls-cert') ? [] : ['--cluster-plaintext'];
  return HearthServer.start({
    threads: 1,
    extraArgs: ['--cluster-etcd', etcdUrl, '--node-id', id, '--advertise', link,
      '--cluster-lease-ttl-secs', String(leaseSecs), '--cluster-secret-file', secret, ...plain, ...extraArgs],
  });
}

/** Writes new keys under `items` in `loops` loops until `stop()`; acknowledged and refused. */
export function writer(client, prefix, loops) {
  const state = { acked: new Map(), refused: [], stop: false, next: 0 };
  const running = Array.from({ length: loops }, async () => {
    while (!state.stop) {
      const value = state.next++;
      const key = `${prefix}${String(value).padStart(5, '0')}`;
      try {
        await set(client.ref(`items/${key}`), value);
        state.acked.set(key, value);
      } catch (error) {
        state.refused.push(`${key}: ${error.message}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  });
  state.end = async () => {
    state.stop = true;
    await Promise.all(running);
  };
  return state;
}

/**
 * A first write to `ns` through `node` with the web SDK, tried until acknowledged: the
 * database is claimed once it resolves.
 */
export async function firstWrite(node, ns, ms = 15_000) {
  const probe = createClient(node, ns);
  const deadline = Date.now() + ms;
  try {
    for (;;) {
      try {
        await set(probe.ref('probe'), true);
        return;
      } catch (error) {
        if (Date.now() > deadline) throw new Error(`the first write to ${ns}: ${error.message}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  } finally {
    await probe.dispose();
  }
}

/**
 * Resolves once `node` answers /readyz with 200: with etcd, its key is among the live nodes
 * and its links to the other live nodes are up (docs/cluster.md "Health").
 */
export async function readyNode(node, ms = 15_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      if ((await fetch(`http://127.0.0.1:${node.port}/readyz`)).status === 200) return node;
    } catch { /* not yet */ }
    if (Date.now() > deadline) throw new Error(`node on ${node.port} not ready\n${node.logTail(20)}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * Starts etcd and one node per id of `ids` under `dir` (`startEtcdNode`). Resolves with
 * etcd's URL and process and the nodes by id; `extraArgs` go to every node.
 */
export async function startEtcdCluster(dir, ids, extraArgs = [], options = {}) {
  const etcd = await startEtcd(dir);
  const nodes = {};
  for (const [i, id] of ids.entries()) {
    nodes[id] = await startEtcdNode(dir, etcd.url, id, i, extraArgs, options);
  }
  return { etcd, nodes };
}

/**
 * Registers a suite's `before` and `after`: etcd and the nodes of `ids` start in a temporary
 * directory (`startEtcdCluster`) and are stopped and removed at the end. Returns the running
 * cluster: `nodes` by id (filled once `before` ran), `claimOf(ns)`, the database's entry
 * of `hearth cluster status --json` (owner, follower, epoch), and `join(id)`, which starts
 * one more node with the same flags (stopped at the end too).
 */
export function etcdClusterSuite(ids, extraArgs = [], options = {}) {
  const cluster = { nodes: {}, etcd: null, dir: null };
  const joined = [];
  cluster.join = async (id) => {
    const index = ids.length + joined.length;
    joined.push(id);
    cluster.nodes[id] = await startEtcdNode(cluster.dir, cluster.etcd.url, id, index, extraArgs, options);
    return readyNode(cluster.nodes[id]);
  };
  cluster.claimOf = (ns) => {
    const out = execFileSync(hearthBinary(), ['cluster', 'status', '--etcd', cluster.etcd.url, '--json']);
    return JSON.parse(out.toString()).databases.find((d) => d.namespace === ns);
  };
  before(async () => {
    cluster.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-cluster-'));
    const started = await startEtcdCluster(cluster.dir, ids, extraArgs, options);
    cluster.etcd = started.etcd;
    Object.assign(cluster.nodes, started.nodes);
    // Every node sees every other before a test routes a database: placement over fewer
    // nodes would name another owner and move the first sessions.
    await Promise.all(ids.map((id) => readyNode(cluster.nodes[id])));
  }, { timeout: 40_000 });
  after(async () => {
    await Promise.allSettled([...ids, ...joined].map((id) => cluster.nodes[id]?.stop()));
    cluster.etcd?.proc.kill('SIGKILL');
    if (cluster.dir) fs.rmSync(cluster.dir, { recursive: true, force: true });
  }, { timeout: 20_000 });
  return cluster;
}
