// Crash test: writer processes write at a steady rate and record every acknowledged write;
// the server is killed with SIGKILL at a random moment, restarted on the same data directory,
// and every acknowledged write must be there, identical. Several rounds append to the same
// directory, so recovery of a growing log is tested too; from round 4 on the server snapshots
// every second, so crashes also hit snapshots and recovery starts from a snapshot plus the log.
// Besides the acknowledged writes, whatever is recovered must be something a writer sent, and
// each writer's recovered writes a prefix of what it sent. Then the storage seam: a torn,
// corrupt record is appended after the last valid one (the server must cut it, say so, and
// lose nothing), and a byte of an early, durable record is damaged (the server must refuse to
// start and name the file and offset).
//
// CRASH_EXTRA='--durability batch --sync-interval-ms 300' runs the same test against the
// batch mode, which acknowledges before the disk: it fails, as it should.

import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { HearthServer, freePort } from '../../lib/server.mjs';
import { nsOnShard } from '../rest/rest-client.mjs';

const WRITER = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../lib/crash-writer.mjs');
const WATCHER = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../lib/crash-watcher.mjs');
const ROUNDS = 5;
const WRITERS_PER_NS = 2;
const RATE = 250; // writes per second per writer
const CT = { timeout: 120_000 };
// From this round on the server snapshots as often as it can, so that crashes also hit
// snapshots being written and recovery combines a snapshot with the log after it.
const SNAPSHOT_ROUND = 4;
const SNAPSHOT_ARGS = ['--snapshot-wal-mib', '1', '--snapshot-min-interval-secs', '0', '--snapshot-max-age-secs', '1'];

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-crash-'));
after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

// Two databases that live on different shards, so both shards' logs are crashed.
const namespaces = [nsOnShard('crasha', 0), nsOnShard('crashb', 1)];

/** Every acknowledged key and its value, per namespace, over all rounds. */
const acked = new Map(namespaces.map((ns) => [ns, new Map()]));
/** Every key a listener on another connection was shown, and its value, per namespace. */
const seen = new Map(namespaces.map((ns) => [ns, new Map()]));

/** The value a writer sends as its n-th key (see crash-writer.mjs). */
function valueOf(client, n) {
  return { c: client, n, pad: 'x'.repeat((n * 7919) % 2001) };
}

function startWriter(server, ns, client) {
  const child = spawn(process.execPath, [WRITER, server.wsURL(ns), client, String(RATE), '30'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const refused = [];
  const lines = readline.createInterface({ input: child.stdout });
  lines.on('line', (line) => {
    const record = JSON.parse(line);
    if (record.key) acked.get(ns).set(record.key, record.value);
    if (record.refused) refused.push(record.refused);
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const closed = new Promise((resolve) => lines.once('close', resolve));
  return { child, refused, done: Promise.all([exited, closed]) };
}

/** A listener process at the round's writer paths of `ns`; records what it is shown in `seen`. */
function startWatcher(server, ns, clients) {
  const child = spawn(process.execPath, [WATCHER, server.wsURL(ns), clients.map((c) => `crash/${c}`).join(','), '30'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines = readline.createInterface({ input: child.stdout });
  lines.on('line', (line) => {
    const record = JSON.parse(line);
    if (record.seen) seen.get(ns).set(record.seen, record.value);
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const closed = new Promise((resolve) => lines.once('close', resolve));
  return { child, done: Promise.all([exited, closed]) };
}

async function readAll(server, ns) {
  const response = await fetch(`http://127.0.0.1:${server.port}/crash.json?ns=${ns}`);
  assert.equal(response.status, 200, `GET /crash of ${ns}`);
  return (await response.json()) ?? {};
}

/** The n a writer's key stands for: k<n> and m<n>a hold n, m<n>b holds n + 0.5 (crash-writer.mjs). */
function nOfKey(key) {
  const match = /^(?:k(\d+)|m(\d+)([ab]))$/.exec(key);
  if (!match) return undefined;
  if (match[1]) return Number(match[1]);
  return Number(match[2]) + (match[3] === 'b' ? 0.5 : 0);
}

/** The keys a writer sent as its i-th write, i = 1, 2, ... (a merge every fifth write). */
function keysOfWrite(i) {
  return i % 5 === 0 ? [`m${i}a`, `m${i}b`] : [`k${i}`];
}

/**
 * Checks that every acknowledged key is present and identical, that nothing is there that no
 * writer sent, and that each writer's recovered writes are a prefix of what it sent: one
 * connection's writes are applied and logged in order, so recovery may lose only a tail of
 * them (never one in the middle), and a multi-path update is there whole or not at all.
 */
async function verify(server, label) {
  const stats = [];
  for (const ns of namespaces) {
    const data = await readAll(server, ns);
    let checked = 0;
    const missing = [];
    for (const [key, value] of acked.get(ns)) {
      const [client, child] = key.split('/');
      const got = data[client]?.[child];
      if (got === undefined) missing.push(key);
      else assert.deepEqual(got, value, `${label}: acknowledged ${ns}/${key} changed: expected ${JSON.stringify(value)}, got ${JSON.stringify(got)}`);
      checked += 1;
    }
    assert.deepEqual(missing, [], `${label}: ${missing.length} of ${checked} acknowledged writes to ${ns} are missing after the restart`);
    // Strict durability: a listener is shown a write only once it is durable.
    const unseen = [];
    for (const [key, value] of seen.get(ns)) {
      const [client, child] = key.split('/');
      const got = data[client]?.[child];
      if (got === undefined) unseen.push(key);
      else assert.deepEqual(got, value, `${label}: ${ns}/${key} differs from what a listener was shown`);
    }
    assert.deepEqual(unseen, [], `${label}: ${unseen.length} writes to ${ns} that a listener was shown before the crash are missing after it`);
    let present = 0;
    for (const [client, children] of Object.entries(data)) {
      present += Object.keys(children).length;
      assert.match(client, /^r\d+w\d+$/, `${label}: ${ns}/crash/${client} is not a writer of this test`);
      let last = 0;
      for (const [child, value] of Object.entries(children)) {
        const n = nOfKey(child);
        assert.ok(n !== undefined, `${label}: ${ns}/crash/${client}/${child} is a key no writer sends`);
        assert.deepEqual(value, valueOf(client, n), `${label}: ${ns}/crash/${client}/${child} holds a value nobody sent`);
        last = Math.max(last, Math.floor(n));
      }
      const holes = [];
      for (let i = 1; i <= last && holes.length < 10; i += 1) {
        for (const key of keysOfWrite(i)) if (!(key in children)) holes.push(key);
      }
      assert.deepEqual(holes, [], `${label}: ${ns}/crash/${client} has write ${last} but not these earlier ones (recovery kept a later write and lost an earlier one)`);
    }
    assert.ok(checked > 0 || label.startsWith('round 0'), `${label}: ${ns} has acknowledged writes to check`);
    // Keys present but never acknowledged: writes in flight at the kill that reached the disk.
    stats.push(`${ns}: ${checked} acknowledged keys present (${seen.get(ns).size} shown to the listener), ${present - checked} more recovered unacknowledged (all rounds so far)`);
  }
  return stats.join('; ');
}

/** The end of the valid records of a segment: walks the record headers from offset 64. */
function endOfRecords(bytes) {
  let offset = 64;
  while (offset + 32 <= bytes.length) {
    const header = bytes.subarray(offset, offset + 32);
    if (header.every((b) => b === 0)) return offset;
    const length = header.readUInt32LE(4);
    offset += 32 + Math.ceil(length / 8) * 8;
  }
  return offset;
}

function newestSegment(shard) {
  const dir = path.join(dataDir, `shard-${shard}`);
  const segments = fs.readdirSync(dir).filter((name) => /^wal-\d{20}$/.test(name)).sort();
  assert.ok(segments.length > 0, `shard ${shard} has a log`);
  return path.join(dir, segments[segments.length - 1]);
}

const server = new HearthServer({ dataDir, port: await freePort(), extraArgs: (process.env.CRASH_EXTRA || '').split(' ').filter(Boolean) });

describe('crash safety (SIGKILL at a random moment)', () => {
  after(async () => {
    if (server.running) await server.kill('SIGKILL');
  });

  it(`keeps every acknowledged write over ${ROUNDS} SIGKILL rounds`, CT, async (t) => {
    await server.start();
    for (let round = 1; round <= ROUNDS; round += 1) {
      if (round === SNAPSHOT_ROUND) {
        await server.kill('SIGKILL');
        server.extraArgs = [...server.extraArgs, ...SNAPSHOT_ARGS];
        await server.start({ retryOnEarlyExit: true });
      }
      const clients = Array.from({ length: WRITERS_PER_NS }, (_, i) => `r${round}w${i}`);
      const watchers = namespaces.map((ns) => startWatcher(server, ns, clients));
      const writers = namespaces.flatMap((ns) => clients.map((client) => startWriter(server, ns, client)));
      const before = namespaces.map((ns) => acked.get(ns).size);
      // The random moment is counted from the first acknowledgement of each database, so
      // that a slow start (a loaded CI machine) never leaves a round with nothing to check.
      const deadline = Date.now() + 30_000;
      while (namespaces.some((ns, i) => acked.get(ns).size <= before[i])) {
        assert.ok(Date.now() < deadline, `round ${round}: no write was acknowledged within 30 s`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await new Promise((resolve) => setTimeout(resolve, 500 + Math.random() * 2000));
      await server.kill('SIGKILL');
      await Promise.all([...writers, ...watchers].map((w) => w.done));
      for (const w of writers) assert.deepEqual(w.refused, [], `round ${round}: no write was refused`);
      namespaces.forEach((ns, i) =>
        assert.ok(acked.get(ns).size > before[i], `round ${round}: writes to ${ns} were acknowledged before the kill`),
      );
      await server.start({ retryOnEarlyExit: true });
      const snapshots = [0, 1].flatMap((shard) => fs.readdirSync(path.join(dataDir, `shard-${shard}`)).filter((name) => name.startsWith('snap-')));
      t.diagnostic(`round ${round}: ${await verify(server, `round ${round}`)}; ${snapshots.length} snapshot files`);
    }
    await server.kill('SIGKILL');
  });

  it('cuts a torn, corrupt record after the last valid one and loses nothing', CT, async () => {
    if (server.running) await server.kill('SIGKILL'); // only if the test before failed
    const ends = [];
    for (const shard of [0, 1]) {
      const file = newestSegment(shard);
      const bytes = fs.readFileSync(file);
      const end = endOfRecords(bytes);
      assert.ok(end > 64, `shard ${shard}'s newest segment holds records`);
      ends.push({ shard, file: path.basename(file), end });
      // Half of a real record (the first of the segment), one byte flipped, where the next
      // record would go: what a crash in the middle of writing it could leave.
      const firstLength = 32 + Math.ceil(bytes.readUInt32LE(64 + 4) / 8) * 8;
      const torn = Buffer.from(bytes.subarray(64, 64 + Math.max(40, Math.floor(firstLength / 2))));
      torn[torn.length - 3] ^= 0x5a;
      const fd = fs.openSync(file, 'r+');
      fs.writeSync(fd, torn, 0, torn.length, end);
      fs.closeSync(fd);
    }
    const logBefore = server.log().length;
    await server.start({ retryOnEarlyExit: true });
    await verify(server, 'after a torn tail');
    const log = server.log().slice(logBefore);
    assert.match(log, /cut a torn or corrupt tail/, `the server says it cut the tail:\n${log}`);
    // ...of each shard, exactly where the torn record was put (not earlier).
    for (const { shard, file, end } of ends) {
      const line = log.split('\n').find((l) => /cut a torn or corrupt tail/.test(l) && l.includes(`shard=${shard} `));
      assert.ok(line, `the server reports the cut of shard ${shard}:\n${log}`);
      assert.ok(line.includes(file) && line.includes(`offset: ${end}`), `shard ${shard}'s cut is in ${file} at offset ${end}: ${line}`);
    }
    await server.kill('SIGKILL');
  });

  it('refuses to start when a durable record in the middle of the log is damaged', CT, async () => {
    if (server.running) await server.kill('SIGKILL'); // only if a test before failed
    const dir = path.join(dataDir, 'shard-0');
    const first = fs.readdirSync(dir).filter((name) => /^wal-\d{20}$/.test(name)).sort()[0];
    const file = path.join(dir, first);
    const fd = fs.openSync(file, 'r+');
    const byte = Buffer.alloc(1);
    const offset = 64 + 40; // inside the payload of the first record
    fs.readSync(fd, byte, 0, 1, offset);
    byte[0] ^= 0xff;
    fs.writeSync(fd, byte, 0, 1, offset);
    fs.closeSync(fd);

    const child = spawn(server.bin, server.args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const code = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`the server started on a damaged log:\n${stderr}`));
      }, 15_000);
      child.once('exit', (exitCode) => {
        clearTimeout(timer);
        resolve(exitCode);
      });
    });
    assert.notEqual(code, 0, 'a non-zero exit');
    assert.ok(stderr.includes(first), `the message names the file ${first}:\n${stderr}`);
    const named = /offset (\d+)/.exec(stderr);
    assert.ok(named, `the message names the offset:\n${stderr}`);
    // The damaged record starts at 64 (the first after the segment header) and the flipped
    // byte is at 104: the offset named must be within that record, not somewhere later.
    assert.ok(Number(named[1]) >= 64 && Number(named[1]) <= offset, `the offset named (${named[1]}) is that of the damaged record (64..${offset}):\n${stderr}`);
  });
});
