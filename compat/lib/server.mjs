// Spawns and controls a Hearth server process for the compatibility tests.
//
//   const server = await HearthServer.start();
//   server.port / server.databaseURL(ns) / server.wsURL(ns)
//   await server.restart();            // same port, SIGTERM then start again
//   await server.kill('SIGKILL');      // hard kill (start() again to bring it back)
//   await server.stop();               // SIGTERM, SIGKILL after 3 s
//
// The binary defaults to <repo>/target/release/hearth; override with HEARTH_BIN.
// stdout and stderr of the process go to compat/.artifacts/server-<port>.log.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const COMPAT_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const REPO_DIR = path.resolve(COMPAT_DIR, '..');
export const ARTIFACTS_DIR = path.join(COMPAT_DIR, '.artifacts');

const START_TIMEOUT_MS = 15_000;
const STOP_GRACE_MS = 3_000;

export function hearthBinary() {
  const fromEnv = process.env.HEARTH_BIN;
  return fromEnv ? path.resolve(fromEnv) : path.join(REPO_DIR, 'target', 'release', 'hearth');
}

/** Throws an Error with an actionable message when the server binary is unusable. */
export function assertBinary(bin = hearthBinary()) {
  let st;
  try {
    st = fs.statSync(bin);
  } catch {
    throw new Error(
      `Hearth server binary not found at ${bin}.\n` +
        `Build it first (from the repository root: cargo build --release) ` +
        `or point HEARTH_BIN at an existing binary.`,
    );
  }
  if (!st.isFile()) throw new Error(`HEARTH binary path ${bin} is not a file`);
  try {
    fs.accessSync(bin, fs.constants.X_OK);
  } catch {
    throw new Error(`Hearth server binary ${bin} is not executable`);
  }
  return bin;
}

/** Ask the kernel for a free TCP port on `host` (127.0.0.1 unless told). */
export function freePort(host = '127.0.0.1') {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, host, () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** Resolves true if a TCP connection to 127.0.0.1:port succeeds. */
export function canConnect(port, timeoutMs = 1000) {
  return new Promise((resolve) => {
    const sock = net.connect({ host: '127.0.0.1', port });
    const done = (ok) => {
      sock.removeAllListeners();
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(timeoutMs, () => done(false));
    sock.once('connect', () => done(true));
    sock.once('error', () => done(false));
  });
}

// Environment variables that clap reads as defaults for `hearth serve`: never inherit them,
// so every server runs with exactly the flags a test gives.
const SERVE_ENV = [
  'HEARTH_LISTEN', 'HEARTH_DATA_DIR', 'HEARTH_THREADS', 'HEARTH_RULES', 'HEARTH_ADMIN_TOKEN', 'HEARTH_JWT_SECRET',
  'HEARTH_BODY_BUDGET_MIB', 'HEARTH_ANSWER_BUDGET_MIB', 'HEARTH_HTTP_WRITE_TIMEOUT_SECS',
  'HEARTH_TLS_CERT', 'HEARTH_TLS_KEY',
  'HEARTH_METRICS_LISTEN', 'HEARTH_METRICS_PUBLIC',
  'HEARTH_CLUSTER_PEERS', 'HEARTH_NODE_ID', 'HEARTH_CLUSTER_SECRET_FILE',
  'HEARTH_CLUSTER_TLS_CERT', 'HEARTH_CLUSTER_TLS_KEY', 'HEARTH_CLUSTER_CA', 'HEARTH_CLUSTER_PLAINTEXT',
];

/** The environment of a spawned `hearth`: this process's, minus the serve defaults, plus `extra`. */
export function cleanEnv(extra = {}) {
  const env = { RUST_BACKTRACE: '1', ...process.env };
  for (const k of SERVE_ENV) delete env[k];
  return { ...env, ...extra };
}

const temporaryDataDirs = [];

/** A fresh data directory under the system's temporary directory, removed at exit. */
function temporaryDataDir() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-compat-'));
  if (temporaryDataDirs.length === 0) {
    process.on('exit', () => {
      for (const d of temporaryDataDirs) fs.rmSync(d, { recursive: true, force: true });
    });
  }
  temporaryDataDirs.push(dir);
  return dir;
}

export class HearthServer {
  /** `dev: false` starts the server without --dev (locked databases unless --rules). */
  constructor({ port, bin = hearthBinary(), extraArgs = [], env = {}, dev = true, dataDir, threads = 2 } = {}) {
    this.port = port;
    // Every server gets a data directory of its own, kept across restart() and kill() so
    // that restarts recover the data; the ones made here are removed when the process exits.
    this.dataDir = dataDir ?? temporaryDataDir();
    this.dev = dev;
    this.threads = threads;
    this.bin = bin;
    this.extraArgs = extraArgs;
    this.env = env;
    this.proc = null;
    this.exit = null; // {code, signal} of the last process once it exited
    this.starts = 0;
    this.logPath = null;
    this._expectExit = false;
  }

  /** Start a server on a fresh free port (or opts.port). */
  static async start(opts = {}) {
    const bin = assertBinary(opts.bin || hearthBinary());
    const port = opts.port || (await freePort());
    const server = new HearthServer({ ...opts, port, bin });
    await server.start();
    return server;
  }

  get host() {
    return `127.0.0.1:${this.port}`;
  }

  /** databaseURL for the SDKs: explicit port => plain ws://, ns selects the namespace. */
  databaseURL(ns) {
    return `http://127.0.0.1:${this.port}?ns=${ns}`;
  }

  wsURL(ns) {
    return `ws://127.0.0.1:${this.port}/.ws?v=5&ns=${ns}`;
  }

  get running() {
    return !!this.proc && this.exit === null;
  }

  get pid() {
    return this.proc ? this.proc.pid : undefined;
  }

  _log(line) {
    if (this.logPath) fs.appendFileSync(this.logPath, `\n=== [harness ${new Date().toISOString()}] ${line} ===\n`);
  }

  /** Spawn the process and wait until the port accepts TCP connections. */
  async start({ retryOnEarlyExit = false } = {}) {
    if (this.running) throw new Error('server already running');
    fs.mkdirSync(ARTIFACTS_DIR, { recursive: true });
    this.logPath = path.join(ARTIFACTS_DIR, `server-${this.port}.log`);
    const deadline = Date.now() + START_TIMEOUT_MS;
    for (let attempt = 1; ; attempt++) {
      try {
        await this._spawnOnce(deadline);
        return;
      } catch (e) {
        // On restart the port can be briefly unavailable (e.g. the old listening socket
        // is still being torn down); retry while time remains if the process exited early.
        if (retryOnEarlyExit && e.earlyExit && Date.now() + 250 < deadline) {
          this._log(`early exit on attempt ${attempt}; retrying`);
          await new Promise((r) => setTimeout(r, 250));
          continue;
        }
        throw e;
      }
    }
  }

  async _spawnOnce(deadline) {
    const args = this.args;
    this._log(`start #${++this.starts}: ${this.bin} ${args.join(' ')}`);
    const out = fs.openSync(this.logPath, 'a');
    let proc;
    try {
      proc = spawn(this.bin, args, {
        stdio: ['ignore', out, out],
        env: cleanEnv(this.env),
      });
    } finally {
      fs.closeSync(out);
    }
    this.proc = proc;
    this.exit = null;
    this._expectExit = false;
    // Never leave an orphaned server behind if the test process dies abruptly.
    const reap = () => {
      try {
        proc.kill('SIGKILL');
      } catch {
        /* ignore */
      }
    };
    process.once('exit', reap);
    proc.once('exit', () => process.removeListener('exit', reap));
    const exited = new Promise((resolve) => {
      proc.once('exit', (code, signal) => {
        if (this.proc === proc) this.exit = { code, signal };
        if (!this._expectExit) {
          const msg = `hearth (pid ${proc.pid}, port ${this.port}) exited unexpectedly: code=${code} signal=${signal}; log: ${this.logPath}`;
          this._log(msg);
          process.stderr.write(`\n[compat] ${msg}\n${this.logTail(20)}\n`);
        }
        resolve({ code, signal });
      });
    });
    this._exited = exited;
    proc.once('error', (err) => {
      this._log(`spawn error: ${err.message}`);
    });

    for (;;) {
      if (this.exit !== null) {
        const err = new Error(
          `hearth exited during startup (code=${this.exit.code}, signal=${this.exit.signal}). ` +
            `Log ${this.logPath}:\n${this.logTail(30)}`,
        );
        err.earlyExit = true;
        throw err;
      }
      if (await canConnect(this.port, 500)) return;
      if (Date.now() > deadline) {
        await this.stop();
        throw new Error(
          `hearth did not accept TCP connections on ${this.host} within ${START_TIMEOUT_MS} ms. ` +
            `Log ${this.logPath}:\n${this.logTail(30)}`,
        );
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** The arguments of `hearth` for this server. */
  get args() {
    return [
      'serve',
      ...(this.dev ? ['--dev'] : []),
      '--listen',
      `127.0.0.1:${this.port}`,
      '--threads',
      String(this.threads),
      '--data-dir',
      this.dataDir,
      ...this.extraArgs,
    ];
  }

  get commandLine() {
    return [this.bin, ...this.args].join(' ');
  }

  /** Everything the server has logged so far. */
  log() {
    try {
      return fs.readFileSync(this.logPath, 'utf8');
    } catch {
      return '';
    }
  }

  logTail(lines = 30) {
    const text = this.log();
    return text ? text.split('\n').slice(-lines).join('\n') : '(no log)';
  }

  /** Send `signal` and wait for the process to exit; SIGKILL after 3 s if it lingers. */
  async kill(signal = 'SIGTERM') {
    const proc = this.proc;
    if (!proc || this.exit !== null) return this.exit;
    this._expectExit = true;
    this._log(`sending ${signal}`);
    try {
      proc.kill(signal);
    } catch {
      /* already gone */
    }
    let timer;
    const forced = new Promise((resolve) => {
      timer = setTimeout(() => {
        if (this.exit === null) {
          this._log(`still alive ${STOP_GRACE_MS} ms after ${signal}; sending SIGKILL`);
          try {
            proc.kill('SIGKILL');
          } catch {
            /* ignore */
          }
        }
        resolve();
      }, STOP_GRACE_MS);
    });
    await Promise.race([this._exited, forced]);
    const result = await this._exited;
    clearTimeout(timer);
    return result;
  }

  stop() {
    return this.kill('SIGTERM');
  }

  /** Stop (SIGTERM by default, or signal: 'SIGKILL') and start again on the same port. */
  async restart({ signal = 'SIGTERM' } = {}) {
    await this.kill(signal);
    await this.start({ retryOnEarlyExit: true });
  }
}
