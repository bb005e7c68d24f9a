// Crash test: writer processes write at a steady rate and record every acknowledged write;
// the server is killed with SIGKILL at a random moment, restarted on the same data directory,
// and every acknowledged write must be there, identical. Several rounds append to the same
// directory, so recovery of a growing log is tested too. Then the storage seam: a torn,
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
const ROUNDS = 5;
const WRITERS_PER_NS = 2;
const RATE = 250; // writes per second per writer
const CT = { timeout: 120_000 };

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-crash-'));
after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

// Two databases that live on different shards, so both shards' logs are crashed.
const namespaces = [nsOnShard('crasha', 0), nsOnShard('crashb', 1)];

/** Every acknowledged key and its value, per namespace, over all rounds. */
const acked = new Map(namespaces.map((ns) => [ns, new Map()]));

/** The value a writer sends as its n-th key (see crash-writer.mjs). */
function valueOf(client, n) {
  return { c: client, n, pad: 'x'.repeat((n * 7919) % 1500) };
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

async function readAll(server, ns) {
  const response = await fetch(`http://127.0.0.1:${server.port}/crash.json?ns=${ns}`);
  assert.equal(response.status, 200, `GET /crash of ${ns}`);
  return (await response.json()) ?? {};
}

/** Checks that every acknowledged key is present and identical, and nothing foreign is. */
async function verify(server, label) {
  for (const ns of namespaces) {
    const data = await readAll(server, ns);
    let checked = 0;
    for (const [key, value] of acked.get(ns)) {
      const [client, child] = key.split('/');
      assert.deepEqual(data[client]?.[child], value, `${label}: acknowledged ${ns}/${key} lost or changed`);
      checked += 1;
    }
    for (const [client, children] of Object.entries(data)) {
      for (const [child, value] of Object.entries(children)) {
        const n = value.n;
        assert.deepEqual(value, valueOf(client, n), `${label}: ${ns}/${client}/${child} holds a value nobody sent`);
      }
    }
    assert.ok(checked > 0 || label.startsWith('round 0'), `${label}: ${ns} has acknowledged writes to check`);
  }
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

  it(`keeps every acknowledged write over ${ROUNDS} SIGKILL rounds`, CT, async () => {
    await server.start();
    for (let round = 1; round <= ROUNDS; round += 1) {
      const writers = namespaces.flatMap((ns) =>
        Array.from({ length: WRITERS_PER_NS }, (_, i) => startWriter(server, ns, `r${round}w${i}`)),
      );
      const before = namespaces.map((ns) => acked.get(ns).size);
      // The random moment is counted from the first acknowledgement of each database, so
      // that a slow start (a loaded CI machine) never leaves a round with nothing to check.
      const deadline = Date.now() + 30_000;
      while (namespaces.some((ns, i) => acked.get(ns).size <= before[i])) {
        assert.ok(Date.now() < deadline, `round ${round}: no write was acknowledged within 30 s`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await new Promise((resolve) => setTimeout(resolve, 300 + Math.random() * 1500));
      await server.kill('SIGKILL');
      await Promise.all(writers.map((w) => w.done));
      for (const w of writers) assert.deepEqual(w.refused, [], `round ${round}: no write was refused`);
      namespaces.forEach((ns, i) =>
        assert.ok(acked.get(ns).size > before[i], `round ${round}: writes to ${ns} were acknowledged before the kill`),
      );
      await server.start({ retryOnEarlyExit: true });
      await verify(server, `round ${round}`);
    }
    await server.kill('SIGKILL');
  });

  it('cuts a torn, corrupt record after the last valid one and loses nothing', CT, async () => {
    assert.ok(!server.running);
    for (const shard of [0, 1]) {
      const file = newestSegment(shard);
      const bytes = fs.readFileSync(file);
      const end = endOfRecords(bytes);
      assert.ok(end > 64, `shard ${shard}'s newest segment holds records`);
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
    assert.match(log, /cut a torn or corrupt tail/, 'the server says it cut the tail');
    await server.kill('SIGKILL');
  });

  it('refuses to start when a durable record in the middle of the log is damaged', CT, async () => {
    assert.ok(!server.running);
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
    assert.match(stderr, /offset/, `the message names the offset:\n${stderr}`);
  });
});
