// The chaos runner (compat/chaos/README.md). Started by scripts/chaos inside a private network
// namespace, as root: it starts etcd and three Hearth nodes (each as its own uid, so that
// nft can tell their connections apart), runs the SDK workload, injects the faults of the
// schedule, heals, checks, and writes everything under --results. Exit status: 0 no
// violation, 1 violation(s), 2 the run itself failed (setup, timeouts).

import { spawn, execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { parseArgs } from 'node:util';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { initializeApp, deleteApp, setLogLevel } from 'firebase/app';
import { getDatabase, ref, set, get, runTransaction } from 'firebase/database';
import { etcdRanked } from '../lib/cluster.mjs';

const execFileP = promisify(execFile);
setLogLevel('silent');

const { values: opt } = parseArgs({
  options: {
    seed: { type: 'string', default: '1' },
    ci: { type: 'boolean', default: false },
    minutes: { type: 'string', default: '5' },
    hearth: { type: 'string' },
    work: { type: 'string' },
    results: { type: 'string' },
    checker: { type: 'string' },
    etcd: { type: 'string', default: '/usr/bin/etcd' },
    lease: { type: 'string', default: '5' },
  },
});

const SEED = Number.parseInt(opt.seed, 10) >>> 0;
const HEARTH = opt.hearth;
// The node link in plain text (its own namespace, one machine); builds from before the link's
// TLS had no such flag, and the suite runs against them too (to show what they lose).
const PLAINTEXT = (() => {
  try {
    return execFileSync(HEARTH, ['serve', '--help'], { encoding: 'utf8' }).includes('--cluster-plaintext') ? ['--cluster-plaintext'] : [];
  } catch { return ['--cluster-plaintext']; }
})();
const WORK = opt.work;
const RESULTS = opt.results;
// The nodes' etcd lease (--cluster-lease-ttl-secs): 5 s as docs/cluster.md starts a cluster,
// 2 s (the shortest) puts the fence before the 2 s wait for a silent follower.
const LEASE_SECS = Number.parseInt(opt.lease, 10);
const IDS = ['n1', 'n2', 'n3'];
const ETCD_HOST = '127.0.0.100';
const ETCD_URL = `http://${ETCD_HOST}:2379`;
// Distinct ports per node too, though nodes on their own 127.0.0.x may share one: the
// histories recorded before that was allowed keep their addresses.
const clientPort = (id) => 9000 + Number(id.slice(1));
const linkPort = (id) => 7400 + Number(id.slice(1));
const OP_WAIT_MS = 10_000; // a client moves on after this; the op stays pending
// The receiver of the declared trigger every node has (docs/triggers.md): each append's
// `created` event, posted by the node that owns its database.
const RECEIVER_HOST = '127.0.0.200';
const RECEIVER_PORT = 8088;
const TRIGGERS_FILE = () => path.join(WORK, 'triggers.json');
const T0 = Date.now();
const now = () => Date.now() - T0; // the one clock of the history: ms since the start

// ---------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
function mulberry32(a) {
  return () => {
    a |= 0; a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rng = mulberry32(SEED);
const pick = (r, xs) => xs[Math.floor(r() * xs.length)];
const logFile = fs.openSync(path.join(RESULTS, 'runner.log'), 'a');
function log(...args) {
  const line = `[${(now() / 1000).toFixed(1).padStart(6)}s] ${args.join(' ')}`;
  console.log(line);
  fs.writeSync(logFile, `${line}\n`);
}
async function waitUntil(pred, ms, label, interval = 250) {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      if (await pred()) return true;
    } catch { /* not yet */ }
    if (Date.now() > deadline) {
      log(`timed out (${ms} ms) waiting for ${label}`);
      return false;
    }
    await sleep(interval);
  }
}

// ---------------------------------------------------------------------------------------
// etcd and the nodes
// ---------------------------------------------------------------------------------------
const host = (id) => `127.0.0.1${id.slice(1)}`; // n1 -> 127.0.0.11
const uidOf = (id) => 42000 + Number(id.slice(1));
const nodes = {}; // id -> { proc, pid, exited, dataDir, log }
let etcdProc = null;

function cleanEnv(id) {
  const env = { RUST_BACKTRACE: '1', RUST_LOG: process.env.RUST_LOG || 'info' };
  if (id) env.HEARTH_TEST_SYNC_DELAY_FILE = syncDelayFile(id);
  for (const k of ['PATH', 'LANG']) if (process.env[k]) env[k] = process.env[k];
  return env;
}

// ---------------------------------------------------------------------------------------
// Declared triggers: every append's event reaches the receiver at least once
// ---------------------------------------------------------------------------------------
const triggerEvents = []; // {db, key, id, at}
let receiver = null;

async function startReceiver() {
  fs.writeFileSync(TRIGGERS_FILE(), JSON.stringify({
    triggers: {
      appends: {
        path: '/appends/{key}',
        event: 'created',
        http: { url: `http://${RECEIVER_HOST}:${RECEIVER_PORT}/appends` },
        // Never a dead letter in a run: a receiver cut off for a fault is retried.
        maxAttempts: 10_000,
      },
    },
  }));
  fs.chmodSync(TRIGGERS_FILE(), 0o644);
  receiver = http.createServer((request, response) => {
    let body = '';
    request.on('data', (chunk) => { body += chunk; });
    request.on('end', () => {
      try {
        const event = JSON.parse(body);
        triggerEvents.push({ db: event.instance, key: String(event.ref).split('/')[1], id: event.id, at: now() });
        response.writeHead(204).end();
      } catch {
        response.writeHead(400).end('not a CloudEvent');
      }
    });
  });
  await new Promise((resolve, reject) => {
    receiver.once('error', reject);
    receiver.listen(RECEIVER_PORT, RECEIVER_HOST, resolve);
  });
}

async function startEtcd() {
  const dir = path.join(WORK, 'etcd');
  const out = fs.openSync(path.join(RESULTS, 'etcd.log'), 'a');
  etcdProc = spawn(opt.etcd, ['--data-dir', dir, '--name', 'chaos',
    '--listen-client-urls', ETCD_URL, '--advertise-client-urls', ETCD_URL,
    '--listen-peer-urls', `http://${ETCD_HOST}:2380`, '--initial-advertise-peer-urls', `http://${ETCD_HOST}:2380`,
    '--initial-cluster', `chaos=http://${ETCD_HOST}:2380`], { stdio: ['ignore', out, out] });
  if (!await waitUntil(async () => (await fetch(`${ETCD_URL}/health`)).ok, 20_000, 'etcd')) {
    throw new Error('etcd did not start');
  }
}

function startNode(id) {
  const n = nodes[id] ?? (nodes[id] = { id, dataDir: path.join(WORK, id, 'data'), starts: 0 });
  const uid = String(uidOf(id));
  const out = fs.openSync(path.join(RESULTS, `${id}.log`), 'a');
  fs.writeSync(out, `\n===== start ${++n.starts} at ${now()} ms =====\n`);
  const args = ['--reuid', uid, '--regid', uid, '--clear-groups', HEARTH, 'serve', '--dev',
    '--listen', `${host(id)}:${clientPort(id)}`, '--threads', '1', '--data-dir', n.dataDir,
    '--cluster-etcd', ETCD_URL, '--node-id', id, '--advertise', `${host(id)}:${linkPort(id)}`,
    '--cluster-lease-ttl-secs', String(LEASE_SECS), '--cluster-secret-file', path.join(WORK, id, 'secret'), ...PLAINTEXT,
    '--replication', 'sync', '--durability', 'strict', '--triggers', TRIGGERS_FILE()];
  if (!fs.existsSync(syncDelayFile(id))) slowDisk(id, 0);
  const proc = spawn('setpriv', args, { stdio: ['ignore', out, out], env: cleanEnv(id) });
  n.proc = proc;
  n.exited = null;
  n.exitPromise = new Promise((resolve) => proc.on('exit', (code, signal) => {
    n.exited = { code, signal, at: now() };
    fs.writeSync(out, `\n===== exited code=${code} signal=${signal} at ${now()} ms =====\n`);
    resolve();
  }));
  return n;
}

const ready = async (id) => (await fetch(`http://${host(id)}:${clientPort(id)}/readyz`, { signal: AbortSignal.timeout(2000) })).status === 200;

async function status() {
  const { stdout } = await execFileP(HEARTH, ['cluster', 'status', '--etcd', ETCD_URL, '--json'], { timeout: 10_000 });
  return JSON.parse(stdout);
}
async function claimOf(ns) {
  return (await status()).databases?.find((d) => d.namespace === ns) ?? null;
}

// ---------------------------------------------------------------------------------------
// nft: marks and cuts (inside the namespace only; scripts/chaos made it)
// ---------------------------------------------------------------------------------------
async function nft(script) {
  const p = spawn('nft', ['-f', '-'], { stdio: ['pipe', 'inherit', 'inherit'] });
  p.stdin.end(script);
  const code = await new Promise((r) => p.on('exit', r));
  if (code !== 0) throw new Error(`nft failed (${code}):\n${script}`);
}
async function nftSetup() {
  const marks = IDS.map((id) => `    ct state new meta skuid ${uidOf(id)} ct mark set ${id.slice(1)}`).join('\n');
  await nft(`table inet chaos {
  chain cut {
  }
  chain out {
    type filter hook output priority 0; policy accept;
${marks}
    jump cut
  }
}
`);
}
const mark = (id) => id.slice(1);
/** Drops every packet of the connections node `a` opened to `b`'s address. */
const rulesFromTo = (a, bAddr) => [`ct mark ${mark(a)} ip daddr ${bAddr} drop`, `ct mark ${mark(a)} ip saddr ${bAddr} drop`];
const cutRules = {
  etcd: (a) => rulesFromTo(a, ETCD_HOST),
  pair: (a, b) => [...rulesFromTo(a, host(b)), ...rulesFromTo(b, host(a))],
  // Only what `a` sends to `b`: the original direction of a's connections to b, the reply
  // direction of b's connections to a.
  oneway: (a, b) => [`ct mark ${mark(a)} ct direction original ip daddr ${host(b)} drop`,
    `ct mark ${mark(b)} ct direction reply ip saddr ${host(a)} drop`],
};
async function cut(rules) {
  await nft(rules.map((r) => `add rule inet chaos cut ${r}`).join('\n') + '\n');
}
async function healNet() {
  await nft('flush chain inet chaos cut\n');
}

// ---------------------------------------------------------------------------------------
// The workload
// ---------------------------------------------------------------------------------------
const history = []; // every operation
const pending = new Set();
let stopping = false;
let currentFault = null; // index into faults while one is active (inject..settled)

function classify(error, kind) {
  const msg = String(error?.message ?? error);
  // runTransaction rejects with the bare status ("unavailable", "disconnect"): the server's
  // reason, which says whether it may have been applied, does not reach the caller.
  if (kind === 'counter') return 'indeterminate';
  if (/may or may not/i.test(msg)) return 'indeterminate';
  return 'failed';
}

function track(op, promise) {
  op.invoke = now();
  op.fault = currentFault;
  op.outcome = 'pending';
  history.push(op);
  pending.add(op);
  const done = promise.then((value) => {
    op.complete = now();
    if (op.kind === 'counter' && value && value.committed === false) {
      op.outcome = 'failed';
      op.error = 'not committed';
    } else {
      op.outcome = 'ok';
      if (op.kind === 'reg-read') op.value = value.exists() ? String(value.val()) : null;
      if (op.kind === 'counter') op.value = value.snapshot.val();
    }
  }, (error) => {
    op.complete = now();
    op.outcome = classify(error, op.kind);
    op.error = String(error?.message ?? error).slice(0, 300);
  }).finally(() => pending.delete(op));
  return done;
}

const DB_COUNT = 3;
const REGS = 3;
let dbs = []; // namespaces
const clients = [];

function databaseURL(id, ns) {
  return `http://${host(id)}:${clientPort(id)}?ns=${ns}`;
}

let appCount = 0;
function makeClient(index, id, ns) {
  const app = initializeApp({ databaseURL: databaseURL(id, ns), projectId: 'demo-hearth', apiKey: 'fake-api-key' },
    `chaos-${index}-${Date.now()}-${appCount++}`);
  return { index, node: id, ns, app, db: getDatabase(app), generation: 0, n: 0, retired: [] };
}

async function clientLoop(c) {
  const r = mulberry32(SEED * 7919 + c.index);
  while (!stopping) {
    const x = r();
    const n = c.n++;
    const base = { client: c.index, process: c.index * 1000 + c.generation, node: c.node, db: c.ns };
    let op;
    let p;
    if (x < 0.4) {
      op = { ...base, kind: 'append', key: `appends/c${c.index}-${n}`, value: { c: c.index, n } };
      p = set(ref(c.db, op.key), op.value);
    } else if (x < 0.6) {
      op = { ...base, kind: 'counter', key: 'counters/c0' };
      p = runTransaction(ref(c.db, op.key), (v) => (v || 0) + 1);
    } else if (x < 0.8) {
      const k = Math.floor(r() * REGS);
      op = { ...base, kind: 'reg-write', key: `regs/r${k}`, value: `c${c.index}-${n}` };
      p = set(ref(c.db, op.key), op.value);
    } else {
      const k = Math.floor(r() * REGS);
      op = { ...base, kind: 'reg-read', key: `regs/r${k}`, value: null };
      p = get(ref(c.db, op.key));
    }
    const done = track(op, p);
    const timedOut = await Promise.race([done.then(() => false), sleep(OP_WAIT_MS).then(() => true)]);
    if (timedOut) {
      // A new process: a fresh SDK app with its own connection. The old app stays alive so
      // that its open op still completes or fails on record; reusing it would not do, as
      // the SDK answers get() from its own pending set at that path (syncTreeGetServerValue
      // builds the view from the pending write tree), which is no read of the server.
      c.generation++;
      c.retired.push(c.app);
      Object.assign(c, makeClient(c.index, c.node, c.ns), { generation: c.generation, n: c.n, retired: c.retired });
    }
    if (op.outcome !== 'ok') await sleep(100 + r() * 200);
    await sleep(40 + r() * 80);
  }
}

// ---------------------------------------------------------------------------------------
// Faults
// ---------------------------------------------------------------------------------------
const faults = []; // {index, type, db, owner, follower, target, inject, heal, settled, hold}

async function roles(ns) {
  const c = await claimOf(ns);
  if (!c || !c.owner || !c.follower) return null;
  return c;
}

// The slow-disk fault: each node reads this file before every sync of its data files
// (HEARTH_TEST_SYNC_DELAY_FILE, crates/persist/src/storage.rs): milliseconds to wait.
const syncDelayFile = (id) => path.join(WORK, id, 'sync-delay');
function slowDisk(id, ms) {
  fs.writeFileSync(syncDelayFile(id), String(ms));
}

async function healAll() {
  await healNet();
  for (const id of IDS) slowDisk(id, 0);
  for (const id of IDS) {
    const n = nodes[id];
    if (n?.proc && !n.exited) {
      try { process.kill(n.proc.pid, 'SIGCONT'); } catch { /* gone */ }
    }
  }
  for (const id of IDS) {
    if (nodes[id].exited) startNode(id);
  }
}

async function stopNode(id, signal, ms = 20_000) {
  const n = nodes[id];
  if (n.exited) return;
  process.kill(n.proc.pid, signal);
  const exited = await Promise.race([n.exitPromise.then(() => true), sleep(ms).then(() => false)]);
  if (!exited) {
    log(`${id} did not exit on ${signal} within ${ms} ms: SIGKILL`);
    process.kill(n.proc.pid, 'SIGKILL');
    await n.exitPromise;
  }
}

const FAULT_TYPES = ['partition-owner', 'cut-follower', 'etcd-down', 'oneway-owner-to-follower',
  'oneway-follower-to-owner', 'sigstop-owner', 'sigkill-owner', 'sigterm-node', 'slow-disk-owner',
  'slow-disk-follower'];

async function runFault(type, db, holdMs) {
  const c = await roles(db);
  const f = { index: faults.length + 1, type, db, holdMs, owner: c?.owner, follower: c?.follower, epoch: c?.epoch };
  if (!c) {
    log(`fault ${f.index} ${type}: ${db} has no owner+follower now; skipped`);
    f.skipped = true;
    faults.push(f);
    return;
  }
  faults.push(f);
  currentFault = f.index;
  f.inject = now();
  const { owner, follower } = c;
  log(`fault ${f.index} ${type} on ${db} (owner ${owner}, follower ${follower}, epoch ${c.epoch}), hold ${holdMs} ms`);
  switch (type) {
    case 'partition-owner':
      await cut([...cutRules.etcd(owner), ...cutRules.pair(owner, follower)]);
      await sleep(holdMs);
      break;
    case 'cut-follower':
      await cut(cutRules.pair(owner, follower));
      await sleep(holdMs);
      break;
    case 'etcd-down':
      await cut(IDS.flatMap((id) => cutRules.etcd(id)));
      await sleep(holdMs);
      break;
    case 'oneway-owner-to-follower':
      await cut(cutRules.oneway(owner, follower));
      await sleep(holdMs);
      break;
    case 'oneway-follower-to-owner':
      await cut(cutRules.oneway(follower, owner));
      await sleep(holdMs);
      break;
    case 'sigstop-owner':
      process.kill(nodes[owner].proc.pid, 'SIGSTOP');
      await sleep(holdMs);
      break;
    case 'sigkill-owner':
      await stopNode(owner, 'SIGKILL');
      await sleep(holdMs);
      break;
    // Every sync of the owner's log takes 2 s longer: acknowledgements slow down, nothing
    // else may change.
    case 'slow-disk-owner':
      slowDisk(owner, 2000);
      await sleep(holdMs);
      break;
    // The follower's syncs take 3 s longer, past the owner's 2 s wait for an acknowledgement:
    // it leaves the sync set and comes back once the disk is fast again.
    case 'slow-disk-follower':
      slowDisk(follower, 3000);
      await sleep(holdMs);
      break;
    case 'sigterm-node': {
      f.target = owner;
      const t = now();
      await stopNode(owner, 'SIGTERM');
      f.stopMs = now() - t;
      await sleep(holdMs);
      break;
    }
    default:
      throw new Error(type);
  }
  f.heal = now();
  await healAll();
  log(`fault ${f.index} healed`);
  await settle(f.heal);
  f.settled = now();
  const after = await claimOf(db).catch(() => null);
  f.after = after && { owner: after.owner, follower: after.follower, epoch: after.epoch };
  log(`fault ${f.index} settled after ${((f.settled - f.heal) / 1000).toFixed(1)} s: ${db} owner ${after?.owner} epoch ${after?.epoch}`);
  currentFault = null;
}

/** Until every node is ready, every database claimed with a follower, and a write acknowledged on each since `since`. */
async function settle(since, ms = 40_000) {
  const ok = await waitUntil(async () => {
    for (const id of IDS) if (!await ready(id)) return false;
    const st = await status();
    for (const ns of dbs) {
      const d = st.databases?.find((x) => x.namespace === ns);
      if (!d?.owner || !d.follower) return false;
    }
    for (const ns of dbs) {
      if (!history.some((o) => o.db === ns && o.outcome === 'ok' && o.kind !== 'reg-read' && o.invoke >= since)) return false;
    }
    return true;
  }, ms, 'the cluster to settle', 500);
  await sleep(2000);
  return ok;
}

function schedule() {
  if (opt.ci) {
    // Fixed: every fault once (the owner's partition twice); holds past the 5 s lease where
    // the lease matters.
    return [
      ['partition-owner', 0, 8000],
      ['cut-follower', 1, 7000],
      ['etcd-down', 2, 8000],
      ['oneway-owner-to-follower', 2, 7000],
      ['oneway-follower-to-owner', 0, 7000],
      ['sigstop-owner', 1, 8000],
      ['sigkill-owner', 2, 6000],
      ['sigterm-node', 0, 3000],
      ['slow-disk-owner', 1, 6000],
      ['slow-disk-follower', 2, 7000],
      // The owner's partition once more, on another database and later epochs.
      ['partition-owner', 2, 8000],
    ];
  }
  const steps = [];
  let total = 0;
  const budget = Number(opt.minutes) * 60_000;
  while (total < budget) {
    const type = pick(rng, FAULT_TYPES);
    const hold = type === 'sigstop-owner' || type === 'partition-owner' ? 6000 + Math.floor(rng() * 6000) : 3000 + Math.floor(rng() * 9000);
    steps.push([type, Math.floor(rng() * DB_COUNT), hold]);
    total += hold + 12_000;
  }
  return steps;
}

// ---------------------------------------------------------------------------------------
// Analysis
// ---------------------------------------------------------------------------------------
const isWrite = (o) => o.kind === 'append' || o.kind === 'counter' || o.kind === 'reg-write';

function availability(f) {
  const end = f.settled ?? now();
  const out = {};
  for (const ns of dbs) {
    const acks = history.filter((o) => o.db === ns && isWrite(o) && o.outcome === 'ok' && o.complete >= f.inject && o.complete <= end)
      .map((o) => o.complete).sort((a, b) => a - b);
    let gap = 0;
    let prev = f.inject;
    for (const t of [...acks, end]) { gap = Math.max(gap, t - prev); prev = t; }
    const during = acks.filter((t) => t <= f.heal).length;
    const inWindow = (o) => o.db === ns && isWrite(o) && o.invoke >= f.inject && o.invoke <= end;
    out[ns] = {
      longestGapWithoutAckMs: gap,
      ackedWritesPerSecDuringFault: Number((during / Math.max(1, (f.heal - f.inject) / 1000)).toFixed(1)),
      refusedOwnedByOtherNode: history.filter((o) => inWindow(o) && o.outcome === 'failed' && /owned by node/.test(o.error ?? '')).length,
      refusedOther: history.filter((o) => inWindow(o) && o.outcome === 'failed' && !/owned by node/.test(o.error ?? '')).length,
      indeterminate: history.filter((o) => inWindow(o) && o.outcome === 'indeterminate').length,
    };
  }
  return out;
}

const faultAt = (t) => t != null && faults.find((f) => !f.skipped && t >= f.inject && t <= (f.settled ?? Infinity));
const faultById = (i) => faults.find((f) => f.index === i);
const faultName = (f) => (f ? `fault ${f.index} (${f.type} on ${f.db}, owner ${f.owner})` : 'outside any fault');

async function readAll(ns, id) {
  const app = initializeApp({ databaseURL: databaseURL(id, ns), projectId: 'demo-hearth', apiKey: 'fake-api-key' }, `chaos-read-${ns}-${id}`);
  try {
    const snap = await Promise.race([get(ref(getDatabase(app), '/')), sleep(20_000).then(() => { throw new Error('read timed out'); })]);
    return snap.val() ?? {};
  } finally {
    await deleteApp(app).catch(() => {});
  }
}

function canonical(v) {
  if (Array.isArray(v)) return v.map(canonical);
  if (v && typeof v === 'object') return Object.fromEntries(Object.keys(v).sort().map((k) => [k, canonical(v[k])]));
  return v;
}

function diffKeys(a, b, prefix = '', out = []) {
  if (out.length > 20) return out;
  if (a && b && typeof a === 'object' && typeof b === 'object') {
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) diffKeys(a[k], b[k], `${prefix}/${k}`, out);
  } else if (JSON.stringify(a) !== JSON.stringify(b)) {
    out.push(`${prefix || '/'}: ${JSON.stringify(a)?.slice(0, 60)} vs ${JSON.stringify(b)?.slice(0, 60)}`);
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------
async function main() {
  const violations = [];
  const warnings = [];
  log(`seed ${SEED}, ${opt.ci ? 'ci schedule' : `${opt.minutes} min randomized`}, hearth ${HEARTH}`);
  await nftSetup();
  await startReceiver();
  await startEtcd();
  for (const id of IDS) startNode(id);
  if (!await waitUntil(async () => (await Promise.all(IDS.map(ready))).every(Boolean), 40_000, 'nodes ready')) {
    throw new Error('the nodes did not become ready');
  }
  // One database placed first on each node.
  dbs = IDS.map((id, k) => {
    for (let j = 0; ; j++) {
      const ns = `chaos-s${SEED}-d${k}-${j}`;
      if (etcdRanked(IDS, ns)[0] === id) return ns;
    }
  });
  log(`databases: ${dbs.join(', ')}`);
  // Clients: one per (database, node); the first write to each claims it.
  let index = 0;
  for (const ns of dbs) for (const id of IDS) clients.push(makeClient(index++, id, ns));
  const loops = clients.map((c) => clientLoop(c));
  if (!await settle(0, 60_000)) throw new Error('the databases were not claimed');
  const st0 = await status();
  log(`claims: ${st0.databases.map((d) => `${d.namespace}=${d.owner}/${d.follower}@${d.epoch}`).join(' ')}`);
  await sleep(3000);

  for (const [type, d, hold] of schedule()) {
    await runFault(type, dbs[d], hold);
  }

  // ----- end: stop the workload, let everything settle
  log('workload stopping');
  stopping = true;
  await Promise.all(loops);
  await waitUntil(() => pending.size === 0, 20_000, 'pending operations');
  for (const op of pending) { op.outcome = 'indeterminate'; op.error = 'no answer by the end'; op.complete = null; }
  await healAll();
  await settle(0, 40_000);
  // Followers caught up: with sync replication and strict durability every acknowledged
  // write is on the follower; after a degraded stretch it catches up by itself. Give it a moment.
  await sleep(3000);

  // ----- appends and counters, read through the SDK
  const summary = { seed: SEED, mode: opt.ci ? 'ci' : 'random', databases: dbs, checks: {} };
  // Read through each database's owner (a node that does not own it might answer from a copy).
  const stRead = await status().catch(() => null);
  for (const [k, ns] of dbs.entries()) {
    const id = stRead?.databases?.find((d) => d.namespace === ns)?.owner ?? IDS[k % IDS.length];
    let data;
    try {
      data = await readAll(ns, id);
    } catch (e) {
      violations.push(`${ns}: could not read through ${id}: ${e.message}`);
      continue;
    }
    const appends = data.appends ?? {};
    const ops = history.filter((o) => o.db === ns && o.kind === 'append');
    const lost = ops.filter((o) => o.outcome === 'ok' && appends[o.key.slice('appends/'.length)] === undefined);
    const ghost = ops.filter((o) => o.outcome === 'failed' && appends[o.key.slice('appends/'.length)] !== undefined);
    const incs = history.filter((o) => o.db === ns && o.kind === 'counter');
    const acked = incs.filter((o) => o.outcome === 'ok').length;
    const indet = incs.filter((o) => o.outcome === 'indeterminate').length;
    const counter = data.counters?.c0 ?? 0;
    summary.checks[ns] = {
      readThrough: id,
      appends: { ok: ops.filter((o) => o.outcome === 'ok').length, failed: ops.filter((o) => o.outcome === 'failed').length,
        indeterminate: ops.filter((o) => o.outcome === 'indeterminate').length, stored: Object.keys(appends).length,
        lostAcknowledged: lost.length, presentButFailed: ghost.length },
      counter: { value: counter, acknowledged: acked, indeterminate: indet, ok: counter >= acked && counter <= acked + indet },
    };
    if (lost.length) {
      const byFault = {};
      for (const o of lost) { const n = faultName(faultAt(o.complete)); byFault[n] = (byFault[n] ?? 0) + 1; }
      summary.checks[ns].appends.lostByFault = byFault;
      violations.push(`${ns}: ${lost.length} acknowledged appends lost: ${Object.entries(byFault).map(([f, n]) => `${n} acknowledged during ${f}`).join('; ')} (e.g. ${lost.slice(0, 3).map((o) => `${o.key} acked at ${o.complete} ms via ${o.node}`).join(', ')})`);
    }
    // Writes that reached an owner and are not stored: each must be kept under some node's
    // divergent/ folder (checked once the nodes are stopped), never dropped silently.
    const givenUp = (o) => o.outcome === 'indeterminate' && /lost the right to acknowledge/.test(o.error ?? '');
    summary.checks[ns].notStored = ops
      .filter((o) => (o.outcome === 'ok' || givenUp(o)) && appends[o.key.slice('appends/'.length)] === undefined)
      .map((o) => ({ key: o.key.slice('appends/'.length), outcome: o.outcome, fault: faultName(faultAt(o.complete ?? o.invoke)) }));
    // The trigger: every acknowledged append delivered at least once (the owner delivers
    // what it and its old owners had not confirmed), and no event of an append not stored
    // (none before its write was durable and on the follower).
    const acknowledged = ops.filter((o) => o.outcome === 'ok').map((o) => o.key.slice('appends/'.length));
    const delivered = () => new Set(triggerEvents.filter((e) => e.db === ns).map((e) => e.key));
    await waitUntil(() => acknowledged.every((key) => delivered().has(key)), 60_000, `${ns}: every acknowledged append's event delivered`);
    const undelivered = acknowledged.filter((key) => !delivered().has(key));
    const events = triggerEvents.filter((e) => e.db === ns);
    const unstored = [...delivered()].filter((key) => appends[key] === undefined);
    summary.checks[ns].trigger = { events: events.length, distinct: new Set(events.map((e) => e.id)).size,
      undelivered: undelivered.length, deliveredNotStored: unstored.length };
    if (undelivered.length) {
      const byFault = {};
      for (const o of ops.filter((x) => undelivered.includes(x.key.slice('appends/'.length)))) {
        const n = faultName(faultAt(o.complete)); byFault[n] = (byFault[n] ?? 0) + 1;
      }
      violations.push(`${ns}: ${undelivered.length} acknowledged appends never reached the trigger's receiver: ${Object.entries(byFault).map(([f, n]) => `${n} acknowledged during ${f}`).join('; ')} (e.g. ${undelivered.slice(0, 3).join(', ')})`);
    }
    if (unstored.length) violations.push(`${ns}: ${unstored.length} trigger events delivered for appends that are not stored (e.g. ${unstored.slice(0, 3).join(', ')})`);
    if (ghost.length) violations.push(`${ns}: ${ghost.length} appends refused but stored (e.g. ${ghost.slice(0, 3).map((o) => `${o.key}: ${o.error}`).join(', ')})`);
    if (counter < acked) violations.push(`${ns}: counter ${counter} < ${acked} acknowledged increments (${acked - counter} acknowledged increments lost; ${indet} indeterminate)`);
    if (counter > acked + indet) violations.push(`${ns}: counter ${counter} > ${acked} acknowledged + ${indet} indeterminate increments`);
  }

  // ----- replicas identical: stop every node, export each database from owner and follower
  let finalStatus = null;
  try { finalStatus = await status(); } catch (e) { warnings.push(`status before stopping: ${e.message}`); }
  summary.finalStatus = finalStatus;
  for (const id of IDS) await stopNode(id, 'SIGKILL');
  // Divergence is never silent: a node that gave up writes (never acknowledged) keeps them
  // under its data dir's divergent/ folder.
  summary.divergent = {};
  for (const id of IDS) {
    const logText = fs.readFileSync(path.join(RESULTS, `${id}.log`), 'utf8');
    const gaveUp = [...logText.matchAll(/writes given up.*?namespace="?([\w.-]+)"?/g)].map((m) => m[1]);
    let kept = [];
    try { kept = fs.readdirSync(path.join(nodes[id].dataDir, 'divergent')); } catch { /* none */ }
    summary.divergent[id] = { gaveUp: [...new Set(gaveUp)], kept };
    for (const ns of new Set(gaveUp)) {
      if (!kept.some((f) => f.startsWith(`${ns}.`))) violations.push(`${id} gave up writes of ${ns} but kept no divergent copy of it`);
    }
  }
  for (const [ns, check] of Object.entries(summary.checks)) {
    const missing = check.notStored ?? [];
    if (!missing.length) continue;
    const keptKeys = new Set();
    for (const id of IDS) {
      for (const file of summary.divergent[id].kept.filter((f) => f.startsWith(`${ns}.`))) {
        try {
          const tree = JSON.parse(fs.readFileSync(path.join(nodes[id].dataDir, 'divergent', file), 'utf8'));
          for (const key of Object.keys(tree?.appends ?? {})) keptKeys.add(key);
        } catch { /* unreadable: counts as not kept */ }
      }
    }
    const silent = missing.filter((m) => !keptKeys.has(m.key));
    check.droppedSilently = silent.length;
    if (silent.length) {
      violations.push(`${ns}: ${silent.length} writes that reached an owner are neither stored nor kept under divergent/ (silently overwritten; e.g. ${silent.slice(0, 3).map((m) => `${m.key} (${m.outcome}, ${m.fault})`).join(', ')})`);
    }
  }
  summary.replicas = {};
  for (const ns of dbs) {
    const d = finalStatus?.databases?.find((x) => x.namespace === ns);
    const holders = [d?.owner, d?.follower].filter(Boolean);
    const exports = {};
    for (const id of holders) {
      try {
        const { stdout } = await execFileP(HEARTH, ['export', '--quiet', '--ns', ns, '--data-dir', nodes[id].dataDir],
          { timeout: 60_000, maxBuffer: 1 << 28 });
        exports[id] = canonical(JSON.parse(stdout || 'null'));
        fs.writeFileSync(path.join(RESULTS, `export-${ns}-${id}.json`), JSON.stringify(exports[id]));
      } catch (e) {
        violations.push(`${ns}: export from ${id}'s data dir failed: ${e.message.split('\n')[0]}`);
      }
    }
    const ids = Object.keys(exports);
    const r = { holders, identical: null };
    if (ids.length === 2) {
      const diff = diffKeys(exports[ids[0]], exports[ids[1]]);
      r.identical = diff.length === 0;
      if (diff.length) {
        r.differences = diff;
        violations.push(`${ns}: owner ${ids[0]} and follower ${ids[1]} differ after healing: ${diff.slice(0, 5).join('; ')}`);
      }
    } else if (holders.length < 2) {
      warnings.push(`${ns}: no owner+follower at the end (${JSON.stringify(d)})`);
    }
    summary.replicas[ns] = r;
  }

  // ----- history and Porcupine
  const histPath = path.join(RESULTS, 'history.jsonl');
  fs.writeFileSync(histPath, history.map((o) => JSON.stringify(o)).join('\n') + '\n');
  summary.operations = {
    total: history.length,
    byOutcome: Object.fromEntries(['ok', 'failed', 'indeterminate'].map((k) => [k, history.filter((o) => o.outcome === k).length])),
  };
  try {
    await execFileP(opt.checker, ['-history', histPath, '-out', path.join(RESULTS, 'linearizability.json'),
      '-html', path.join(RESULTS, 'linearizability'), '-timeout', '60s'], { timeout: 15 * 60_000 });
    summary.linearizable = 'Ok';
  } catch (e) {
    if (e.code === 1) {
      summary.linearizable = 'Illegal';
      const v = JSON.parse(fs.readFileSync(path.join(RESULTS, 'linearizability.json'), 'utf8'));
      const bad = v.registers.filter((x) => x.result === 'Illegal');
      violations.push(`registers not linearizable (Porcupine): ${bad.map((x) => `${x.register} (${x.html})`).join(', ')}`);
    } else if (e.code === 2) {
      summary.linearizable = 'Unknown';
      warnings.push('Porcupine timed out on a register: linearizability unknown');
    } else {
      summary.linearizable = 'error';
      violations.push(`the checker failed: ${e.message.split('\n')[0]}`);
    }
  }

  // ----- reads that Porcupine will reject, attributed (a read of a value that an acknowledged
  // write had already replaced, or of a refused write): which node answered, in which fault.
  const staleReads = {};
  const writesByReg = new Map();
  for (const o of history) {
    if (o.kind !== 'reg-write') continue;
    const k = `${o.db}/${o.key}`;
    if (!writesByReg.has(k)) writesByReg.set(k, []);
    writesByReg.get(k).push(o);
  }
  for (const r of history) {
    if (r.kind !== 'reg-read' || r.outcome !== 'ok' || r.value == null) continue;
    const ws = writesByReg.get(`${r.db}/${r.key}`) ?? [];
    const w = ws.find((x) => x.value === r.value);
    let why = null;
    if (!w) why = 'a value never written';
    else if (w.outcome === 'failed') why = 'a refused write';
    else if (ws.some((x) => x.outcome === 'ok' && x.invoke > (w.complete ?? Infinity) && x.complete < r.invoke)) why = 'stale';
    if (!why) continue;
    const key = `${why}: read via ${r.node}, ${faultName(faultById(r.fault) ?? faultAt(r.invoke))}`;
    staleReads[key] = (staleReads[key] ?? 0) + 1;
  }
  summary.badReads = staleReads;
  for (const [k, n] of Object.entries(staleReads)) if (!k.startsWith('stale')) violations.push(`${n} register reads returned ${k}`);

  // ----- clients stranded on a node that lost the claim: stretches of consecutive refusals
  // "owned by node nX" without an acknowledged operation in between.
  const stranded = [];
  for (const c of clients) {
    let first = null;
    let last = null;
    let count = 0;
    const flush = () => {
      if (first) stranded.push({ client: c.index, node: c.node, db: c.ns, from: first.complete, to: last.complete, refusals: count,
        fault: faultName(faultById(first.fault) ?? faultAt(first.invoke)), message: first.error.slice(0, 120) });
      first = null; count = 0;
    };
    for (const o of history.filter((x) => x.client === c.index)) {
      if (o.outcome === 'failed' && /owned by node/.test(o.error ?? '')) {
        first ??= o; last = o; count++;
      } else if (o.outcome === 'ok' && o.kind !== 'reg-read') flush();
    }
    flush();
  }
  summary.strandedClients = stranded.filter((s) => s.to - s.from >= 2000).sort((a, b) => (b.to - b.from) - (a.to - a.from));
  // A node that lost a database closes its clients' sessions so that they reconnect to the
  // owner: refusals "owned by" for longer than a lease (and a reconnect) strand a client.
  // Measured from the first refusal's answer: a write held by a paused node and refused
  // when it resumes waited, but was not stranded.
  const strandLimit = LEASE_SECS * 1000 + 3000;
  for (const s of summary.strandedClients.filter((x) => x.to - x.from > strandLimit)) {
    violations.push(`client ${s.client} stranded on ${s.node} (${s.db}): refused "owned by" ${s.refusals} times over ${((s.to - s.from) / 1000).toFixed(1)} s (${s.fault})`);
  }

  summary.faults = faults.map((f) => ({ ...f, availability: f.skipped ? null : availability(f) }));
  summary.violations = violations;
  summary.warnings = warnings;
  fs.writeFileSync(path.join(RESULTS, 'summary.json'), JSON.stringify(summary, null, 2));

  // ----- report
  log('');
  log('per-fault availability (per database: longest gap without an acknowledged write; acknowledged writes/s while injected; refusals "owned by node"; other refusals; indeterminate)');
  for (const f of summary.faults) {
    if (f.skipped) { log(`  #${f.index} ${f.type}: skipped`); continue; }
    log(`  #${f.index} ${f.type} on ${f.db} (owner ${f.owner}, follower ${f.follower}, epoch ${f.epoch} -> ${f.after?.owner}@${f.after?.epoch}), held ${f.holdMs} ms, settled ${((f.settled - f.heal) / 1000).toFixed(1)} s after healing`);
    for (const [ns, a] of Object.entries(f.availability)) {
      log(`      ${ns}: gap ${(a.longestGapWithoutAckMs / 1000).toFixed(1)} s, ${a.ackedWritesPerSecDuringFault}/s, owned-by refusals ${a.refusedOwnedByOtherNode}, other refusals ${a.refusedOther}, indeterminate ${a.indeterminate}`);
    }
  }
  log(`operations: ${JSON.stringify(summary.operations)}`);
  for (const [ns, c] of Object.entries(summary.checks)) log(`${ns}: appends ${JSON.stringify(c.appends)}; counter ${JSON.stringify(c.counter)}; trigger ${JSON.stringify(c.trigger)}`);
  log(`linearizability (Porcupine): ${summary.linearizable}`);
  for (const [k, n] of Object.entries(staleReads)) log(`non-linearizable reads: ${n} x ${k}`);
  for (const s of summary.strandedClients) {
    log(`stranded: client ${s.client} on ${s.node} (${s.db}) refused "owned by" ${s.refusals} times over ${((s.to - s.from) / 1000).toFixed(1)} s from ${(s.from / 1000).toFixed(1)} s (${s.fault}): ${s.message}`);
  }
  for (const w of warnings) log(`WARNING: ${w}`);
  for (const v of violations) log(`VIOLATION: ${v}`);
  log(violations.length ? `FAIL: ${violations.length} violation(s); results in ${RESULTS}` : `PASS; results in ${RESULTS}`);
  for (const c of clients) for (const app of [c.app, ...c.retired]) await deleteApp(app).catch(() => {});
  receiver?.closeAllConnections();
  receiver?.close();
  return violations.length ? 1 : 0;
}

const watchdog = setTimeout(() => { log('runner watchdog expired'); process.exit(2); }, 4 * 3600_000);
watchdog.unref();
process.on('SIGTERM', () => { log('SIGTERM: stopping'); process.exit(2); });
process.on('SIGINT', () => { log('SIGINT: stopping'); process.exit(2); });
process.on('exit', () => {
  for (const n of Object.values(nodes)) { try { if (!n.exited) process.kill(n.proc.pid, 'SIGKILL'); } catch { /* gone */ } }
  try { etcdProc?.kill('SIGKILL'); } catch { /* gone */ }
});

main().then((code) => process.exit(code), (e) => {
  log(`ERROR: ${e.stack ?? e}`);
  process.exit(2);
});
