// Local helpers shared by `npm start` and the browser test: a Hearth process, its rules, and a
// tiny static file server for dist/. Everything listens on 127.0.0.1 only.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const CHAT_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const DIST_DIR = path.join(CHAT_DIR, 'dist');
export const RULES_FILE = path.join(CHAT_DIR, 'database.rules.json');

export function hearthBinary() {
  return path.resolve(CHAT_DIR, process.env.HEARTH_BIN || '../../target/release/hearth');
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function canConnect(port) {
  return new Promise((resolve) => {
    const sock = net.connect({ host: '127.0.0.1', port });
    const done = (ok) => {
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(500, () => done(false));
    sock.once('connect', () => done(true));
    sock.once('error', () => done(false));
  });
}

/**
 * Start `hearth serve --dev` on 127.0.0.1:port and wait until it accepts connections.
 * Returns { port, proc, log (array of output lines), stop() }.
 */
export async function startHearth({ port, bin = hearthBinary(), timeoutMs = 15_000, stdio = 'pipe' } = {}) {
  if (!fs.existsSync(bin)) {
    throw new Error(`Hearth binary not found at ${bin}: run \`cargo build --release\` at the repository root or set HEARTH_BIN.`);
  }
  port = port || (await freePort());
  // A data directory of its own under the system's temporary directory, so that runs never
  // share data (set HEARTH_DATA_DIR to keep the data of `npm start` somewhere else).
  const dataDir = process.env.HEARTH_DATA_DIR || fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-chat-'));
  const args = ['serve', '--dev', '--listen', `127.0.0.1:${port}`, '--threads', '2', '--data-dir', dataDir];
  const proc = spawn(bin, args, {
    stdio: ['ignore', stdio, stdio],
  });
  const log = [];
  for (const s of [proc.stdout, proc.stderr]) s?.on('data', (d) => log.push(...String(d).split('\n').filter(Boolean)));
  let exited = null;
  const exit = new Promise((resolve) => proc.once('exit', (code, signal) => resolve((exited = { code, signal }))));
  const reap = () => proc.kill('SIGKILL');
  process.once('exit', reap);
  const stop = async () => {
    process.removeListener('exit', reap);
    if (exited) return exited;
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 3000);
    const r = await exit;
    clearTimeout(timer);
    return r;
  };
  const deadline = Date.now() + timeoutMs;
  while (!(await canConnect(port))) {
    if (exited) throw new Error(`hearth exited during startup (${JSON.stringify(exited)}):\n${log.join('\n')}`);
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`hearth did not listen on 127.0.0.1:${port} within ${timeoutMs} ms:\n${log.join('\n')}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { port, proc, log, stop };
}

/** PUT database.rules.json for namespace ns as the --dev admin ("owner"). */
export async function putRules(port, ns, file = RULES_FILE) {
  const res = await fetch(`http://127.0.0.1:${port}/.settings/rules.json?ns=${encodeURIComponent(ns)}`, {
    method: 'PUT',
    headers: { authorization: 'Bearer owner' },
    body: fs.readFileSync(file, 'utf8'),
    signal: AbortSignal.timeout(5000),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`PUT rules for ns=${ns} answered ${res.status}: ${text}`);
}

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
};

/** Serve dir (default dist/) on 127.0.0.1; returns { port, url, close() }. */
export async function startStatic({ dir = DIST_DIR, port = 0 } = {}) {
  if (!fs.existsSync(path.join(dir, 'index.html'))) throw new Error(`${dir}/index.html missing: run \`npm run build\` first.`);
  const root = path.resolve(dir);
  const server = http.createServer((req, res) => {
    const urlPath = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    let file = path.resolve(root, `.${urlPath}`);
    if (file !== root && !file.startsWith(root + path.sep)) {
      res.writeHead(403).end();
      return;
    }
    if (fs.existsSync(file) && fs.statSync(file).isDirectory()) file = path.join(file, 'index.html');
    fs.readFile(file, (err, body) => {
      if (err) {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
        return;
      }
      res.writeHead(200, { 'content-type': TYPES[path.extname(file)] || 'application/octet-stream', 'cache-control': 'no-store' });
      res.end(body);
    });
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  const actual = server.address().port;
  return {
    port: actual,
    url: `http://127.0.0.1:${actual}/`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}
