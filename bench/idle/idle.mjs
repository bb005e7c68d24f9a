// What an idle WebSocket connection costs the server: starts `hearth serve` with a fresh data
// directory, opens N connections that complete the Firebase handshake (the server's `h`
// message arrives) and then stay idle, and reports the growth of the server's RSS per
// connection. Run through scripts/bench-idle-connections (usage there).
//
// The connections are spread over several client processes (one process may hold at most
// 20,000 descriptors here), each binding its own loopback source address so that a previous
// run's ports in TIME_WAIT are not in the way. Bounded: every wait has a deadline, and the
// server and the clients are stopped at the end whatever happens.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { startPair } from './cluster.mjs';

const PER_CLIENT = 5000;
const DEADLINE_MS = Number(process.env.IDLE_DEADLINE_MS || 180_000);

// ---- one client process: `node idle.mjs --client PORT COUNT SOURCE LISTEN` ----

/** A masked client text frame (RFC 6455 requires clients to mask). */
function textFrame(text) {
  const payload = Buffer.from(text);
  const mask = randomBytes(4);
  const head = payload.length < 126 ? Buffer.from([0x81, 0x80 | payload.length]) : Buffer.from([0x81, 0xfe, payload.length >> 8, payload.length & 255]);
  const body = Buffer.alloc(payload.length);
  for (let i = 0; i < payload.length; i++) body[i] = payload[i] ^ mask[i & 3];
  return Buffer.concat([head, mask, body]);
}

/** Opens one connection; resolves once the handshake (and the listen, if asked) is answered. */
function connect(port, source, listen, ns) {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port, localAddress: source });
    let received = '';
    let state = 'upgrade';
    socket.setNoDelay(true);
    socket.on('connect', () => {
      socket.write(
        `GET /.ws?v=5&ns=${ns} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\n` +
          `Connection: Upgrade\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\n` +
          'Sec-WebSocket-Version: 13\r\n\r\n',
      );
    });
    socket.on('data', (chunk) => {
      // Only the first few small frames matter; their text is found in the bytes as they come.
      received += chunk.toString('latin1');
      if (state === 'upgrade' && received.includes('"t":"h"')) {
        if (!listen) {
          state = 'idle';
          resolve(socket);
          return;
        }
        state = 'listen';
        socket.write(textFrame(JSON.stringify({ t: 'd', d: { r: 1, a: 'q', b: { p: listen, h: '' } } })));
      }
      if (state === 'listen' && received.includes('"r":1,')) {
        state = 'idle';
        resolve(socket);
      }
      if (state === 'idle') received = '';
    });
    socket.on('error', reject);
    socket.on('close', () => {
      if (state !== 'idle') reject(new Error(`closed during ${state}`));
      else process.exit(3); // the server closed an idle connection: the measure is void
    });
  });
}

async function client([port, count, source, listen, ns]) {
  const sockets = [];
  const n = Number(count);
  // A few hundred handshakes in flight at once: fast, and within the listen backlog.
  for (let i = 0; i < n; i += 200) {
    const batch = [];
    for (let j = i; j < Math.min(n, i + 200); j++) batch.push(connect(Number(port), source, listen || null, ns || 'idle'));
    sockets.push(...(await Promise.all(batch)));
  }
  process.stdout.write(`ready ${sockets.length}\n`);
  // Held open until the parent closes stdin.
  process.stdin.on('end', () => process.exit(0));
  process.stdin.resume();
}

// ---- the parent ----

const rssKib = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);
const tcpMemPages = () => Number(/TCP: .* mem (\d+)/.exec(readFileSync('/proc/net/sockstat', 'utf8'))[1]);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function httpOk(port, path) {
  try {
    const res = await fetch(`http://127.0.0.1:${port}${path}`, { method: path.includes('PUT') ? 'PUT' : 'GET' });
    return res.ok;
  } catch {
    return false;
  }
}

/** Starts clients for `n` connections; resolves when all report ready. */
function openConnections(port, n, listen, children, group, ns = 'idle') {
  const waits = [];
  for (let opened = 0, i = 0; opened < n; opened += PER_CLIENT, i++) {
    const count = Math.min(PER_CLIENT, n - opened);
    const source = `127.0.${group}.${10 + i}`;
    const child = spawn(process.execPath, [process.argv[1], '--client', String(port), String(count), source, listen || '', ns], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    children.push(child);
    waits.push(
      new Promise((resolve, reject) => {
        child.stdout.on('data', (d) => String(d).startsWith('ready') && resolve());
        child.on('exit', (code) => reject(new Error(`client ${source} exited (${code}) before it was ready`)));
      }),
    );
  }
  return Promise.all(waits);
}

async function measure(bin, n, listen) {
  const data = mkdtempSync(join(tmpdir(), 'hearth-idle-'));
  const port = await freePort();
  const server = spawn(bin, ['serve', '--dev', '--listen', `127.0.0.1:${port}`, '--data-dir', data], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  server.stderr.on('data', (d) => (log = (log + d).slice(-4000)));
  const children = [];
  try {
    let up = false;
    for (let i = 0; i < 100 && !up; i++) {
      up = await httpOk(port, '/.json?ns=probe');
      if (!up) await sleep(100);
    }
    if (!up) throw new Error(`the server did not start:\n${log}`);
    if (listen) {
      const res = await fetch(`http://127.0.0.1:${port}${listen}.json?ns=idle`, { method: 'PUT', body: '{"a":1,"b":"small"}' });
      if (!res.ok) throw new Error(`PUT ${listen}: ${res.status}`);
    }
    // A first batch warms what every connection shares (the database, the shards' maps, the
    // allocator's first pages); the measure is of the connections opened after it.
    await openConnections(port, 100, listen, children, 1);
    await sleep(300);
    const before = rssKib(server.pid);
    const tcpBefore = tcpMemPages();
    await openConnections(port, n, listen, children, 2);
    await sleep(500); // the last replies written
    const after = rssKib(server.pid);
    const tcpAfter = tcpMemPages();
    return { before, after, perConn: ((after - before) * 1024) / n, tcp: ((tcpAfter - tcpBefore) * 4096) / n };
  } finally {
    // The clients go first, so that the server has no connection to close when it stops.
    const gone = children.map((child) => new Promise((r) => (child.exitCode !== null ? r() : child.on('exit', r))));
    for (const child of children) child.stdin.end();
    await Promise.race([Promise.all(gone), sleep(5_000)]);
    for (const child of children) child.kill('SIGKILL');
    const stopped = new Promise((r) => server.on('exit', r));
    server.kill('SIGTERM');
    await Promise.race([stopped, sleep(10_000)]);
    server.kill('SIGKILL');
    rmSync(data, { recursive: true, force: true });
  }
}

/**
 * The edge mode: the connections go to node `b` of a two-node etcd cluster, whose database
 * node `a` owns; both nodes' RSS growth per connection.
 */
async function measureEdge(bin, n, listen) {
  const pair = await startPair(bin);
  const children = [];
  try {
    const { owner, edge, ns } = pair;
    if (listen) {
      const res = await fetch(`http://127.0.0.1:${edge.port}${listen}.json?ns=${ns}`, { method: 'PUT', body: '{"a":1,"b":"small"}' });
      if (!res.ok) throw new Error(`PUT ${listen}: ${res.status}`);
    }
    await openConnections(edge.port, 100, listen, children, 1, ns);
    await sleep(300);
    const before = [rssKib(edge.pid), rssKib(owner.pid)];
    await openConnections(edge.port, n, listen, children, 2, ns);
    await sleep(1_000); // the last replies written, the owner's sessions opened
    const after = [rssKib(edge.pid), rssKib(owner.pid)];
    const per = (i) => ((after[i] - before[i]) * 1024) / n;
    return { edge: { before: before[0], after: after[0], perConn: per(0) }, owner: { before: before[1], after: after[1], perConn: per(1) } };
  } finally {
    const gone = children.map((child) => new Promise((r) => (child.exitCode !== null ? r() : child.on('exit', r))));
    for (const child of children) child.stdin.end();
    await Promise.race([Promise.all(gone), sleep(5_000)]);
    for (const child of children) child.kill('SIGKILL');
    await pair.stop();
  }
}

async function main() {
  const bin = process.env.HEARTH_BIN;
  const n = Number(process.argv[2] || 19000);
  const listen = process.env.IDLE_LISTEN || '';
  const timer = setTimeout(() => {
    console.error(`bench-idle-connections: not done in ${DEADLINE_MS} ms`);
    process.exit(2);
  }, DEADLINE_MS);
  const what = listen ? `handshake + listen on ${listen}` : 'handshake only';
  if (process.env.IDLE_EDGE) {
    const rows = await measureEdge(bin, n, listen);
    clearTimeout(timer);
    for (const [name, row] of Object.entries(rows)) {
      console.log(
        `${n} connections through an edge (${what}): the ${name}'s RSS ${(row.before / 1024).toFixed(1)} -> ${(row.after / 1024).toFixed(1)} MiB, ` +
          `${(row.perConn / 1024).toFixed(2)} KiB per connection`,
      );
    }
    console.log(JSON.stringify({ connections: n, listen: listen || null, edge_bytes_per_connection: Math.round(rows.edge.perConn), owner_bytes_per_connection: Math.round(rows.owner.perConn) }));
    return;
  }
  const row = await measure(bin, n, listen);
  clearTimeout(timer);
  console.log(
    `${n} connections (${what}): server RSS ${(row.before / 1024).toFixed(1)} -> ${(row.after / 1024).toFixed(1)} MiB, ` +
      `${(row.perConn / 1024).toFixed(2)} KiB per connection (kernel TCP buffers, not in RSS: ${(row.tcp / 1024).toFixed(2)} KiB)`,
  );
  console.log(JSON.stringify({ connections: n, listen: listen || null, rss_before_kib: row.before, rss_after_kib: row.after, bytes_per_connection: Math.round(row.perConn), kernel_tcp_bytes_per_connection: Math.round(row.tcp) }));
}

if (process.argv[2] === '--client') await client(process.argv.slice(3));
else {
  await main();
  process.exit(0);
}
