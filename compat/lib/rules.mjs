// Helpers for the security-rules tests (test/rules/):
//
//   * RulesServer / useRulesServer(): a Hearth process started with arbitrary flags, with or
//     without --dev (lib/server.mjs always passes --dev).
//   * putRules / getRules: the /.settings/rules.json endpoint.
//   * adminWith(): firebase-admin apps with a databaseAuthVariableOverride.
//   * mockUser(): a client app authenticated with an emulator mock user token.
//   * expectDenied / expectCancelled: assertions on PERMISSION_DENIED outcomes.
//   * hs256 / rs256 / unsignedJwt: JWTs signed in Node (node:crypto only).

import { before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { onValue } from 'firebase/database';
import { initializeApp as adminInitializeApp } from 'firebase-admin/app';
import { getDatabase as adminGetDatabase } from 'firebase-admin/database';
import { HearthServer, assertBinary, cleanEnv, freePort, hearthBinary } from './server.mjs';
import { createAdmin, createClient, ownerCredential, uniqueAppName, uniqueNs } from './harness.mjs';
import { deferred, rid, withTimeout } from './util.mjs';

export const OWNER_HEADERS = Object.freeze({ authorization: 'Bearer owner' });

// ---------------------------------------------------------------------------
// Server processes
// ---------------------------------------------------------------------------

/**
 * A `hearth serve` process with the given flags. `dev: true` adds --dev. Exposes the same
 * members the harness factories use (port, databaseURL(ns), wsURL(ns)).
 */
export class RulesServer extends HearthServer {
  constructor({ dev = false, args = [], env = {}, threads } = {}) {
    super({ dev, extraArgs: args, env, threads });
  }

  static async start(opts = {}) {
    const s = new RulesServer(opts);
    s.port = await freePort();
    await s.start();
    return s;
  }

  /** `http://127.0.0.1:PORT/path.json?ns=NS&...` */
  url(ns, p, params = {}) {
    const q = new URLSearchParams({ ns, ...params });
    return `http://127.0.0.1:${this.port}/${p.replace(/^\/+/, '')}.json?${q}`;
  }
}

/**
 * Like harness useHearth(), for a RulesServer: one server per describe() block, SDK apps
 * created through it are disposed after each test.
 */
export function useRulesServer(opts = {}) {
  const state = { server: null, disposers: [] };
  before(async () => {
    state.server = await RulesServer.start(typeof opts === 'function' ? await opts() : opts);
  }, { timeout: 30_000 });
  afterEach(async () => {
    await disposeAll(state.disposers.splice(0));
  }, { timeout: 20_000 });
  after(async () => {
    await disposeAll(state.disposers.splice(0));
    if (state.server) await state.server.stop();
  }, { timeout: 20_000 });
  const h = {
    get server() {
      if (!state.server) throw new Error('server not started (see before() hook failure)');
      return state.server;
    },
    get port() {
      return h.server.port;
    },
    ns: (prefix = 'r') => uniqueNs(prefix),
    client(ns, o) {
      const c = createClient(h.server, ns, o);
      state.disposers.push(c.dispose);
      return c;
    },
    admin(ns, o) {
      const a = adminWith(h.server, ns, o);
      state.disposers.push(a.dispose);
      return a;
    },
    defer(fn) {
      state.disposers.push(fn);
    },
  };
  return h;
}

async function disposeAll(disposers) {
  await Promise.allSettled(disposers.reverse().map((d) => withTimeout(Promise.resolve().then(d), 10_000, 'cleanup')));
}

// ---------------------------------------------------------------------------
// SDK apps
// ---------------------------------------------------------------------------

/** A client app authenticated (emulator mock token) as `uid`. */
export function mockUser(h, ns, uid) {
  return h.client(ns, { emulatorMockUserToken: { sub: uid, user_id: uid } });
}

/**
 * A firebase-admin app (token `owner`). `authOverride` undefined: full admin; an object: rules
 * see that auth variable; null: rules see an unauthenticated client.
 */
export function adminWith(server, ns, { authOverride, name } = {}) {
  if (authOverride === undefined) return createAdmin(server, ns, { name });
  const appName = name || uniqueAppName('admin-as');
  const app = adminInitializeApp(
    {
      databaseURL: server.databaseURL(ns),
      projectId: 'demo-hearth',
      credential: ownerCredential,
      databaseAuthVariableOverride: authOverride,
    },
    appName,
  );
  const db = adminGetDatabase(app);
  return { kind: 'admin', name: appName, ns, app, db, ref: (p) => db.ref(p), dispose: () => app.delete() };
}

// ---------------------------------------------------------------------------
// REST
// ---------------------------------------------------------------------------

/** fetch returning { status, text, json, headers }. `body` is serialized as JSON unless raw. */
export async function http(url, { method = 'GET', body, raw = false, headers = {} } = {}) {
  const init = { method, headers: { ...headers } };
  if (body !== undefined) init.body = raw ? body : JSON.stringify(body);
  const res = await fetch(url, init);
  const text = await res.text();
  let json;
  try {
    json = text === '' ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, text, json, headers: res.headers };
}

export function rulesURL(server, ns, params = {}) {
  return `http://127.0.0.1:${server.port}/.settings/rules.json?${new URLSearchParams({ ns, ...params })}`;
}

/** PUT /.settings/rules.json; `rules` is an object (serialized) or the document text. */
export function putRulesRaw(server, ns, rules, { token = 'owner' } = {}) {
  return http(rulesURL(server, ns), {
    method: 'PUT',
    raw: true,
    body: typeof rules === 'string' ? rules : JSON.stringify(rules),
    headers: token ? { authorization: `Bearer ${token}` } : {},
  });
}

/** PUT rules and assert 200. */
export async function putRules(server, ns, rules, opts) {
  const r = await putRulesRaw(server, ns, rules, opts);
  assert.equal(r.status, 200, `PUT rules answered ${r.status}: ${r.text}`);
  return r;
}

export function getRules(server, ns, { token = 'owner', params = {} } = {}) {
  return http(rulesURL(server, ns, params), { headers: token ? { authorization: `Bearer ${token}` } : {} });
}

// ---------------------------------------------------------------------------
// Denials
// ---------------------------------------------------------------------------

function describeOutcome(v) {
  try {
    return JSON.stringify(v && typeof v.val === 'function' ? { snapshot: v.val() } : v);
  } catch {
    return String(v);
  }
}

/**
 * Assert that `promise` (an SDK write, get, transaction...) rejects with permission_denied.
 * Writes reject with code PERMISSION_DENIED; get() and transactions reject with a message
 * naming the denial. Returns the error.
 */
export async function expectDenied(promise, what = 'operation', ms = 10_000) {
  let outcome;
  try {
    outcome = await withTimeout(Promise.resolve(promise), ms, what);
  } catch (err) {
    if (/^timeout after/.test(err.message)) throw err;
    const text = `${err.code || ''} ${err.message || err}`;
    assert.match(text, /permission[_ ]denied/i, `${what}: expected a permission denial, got ${text}`);
    return err;
  }
  assert.fail(`${what}: expected PERMISSION_DENIED, but it succeeded (${describeOutcome(outcome)})`);
}

/**
 * onValue with a recorder of values and of the cancel callback.
 *   rec.values, rec.error, await rec.untilVal(v), await rec.cancelled()
 */
export class Listen {
  constructor(q, label) {
    this.label = label || `onValue(${q.toString()})`;
    this.values = [];
    this.error = null;
    this._cancel = deferred();
    this._cancel.promise.catch(() => {});
    this._waiters = new Set();
    this._unsub = onValue(
      q,
      (snap) => {
        this.values.push(snap.val());
        this._check();
      },
      (err) => {
        this.error = err || new Error('cancelled without an error');
        this._cancel.resolve(this.error);
        this._check();
      },
    );
  }

  _check() {
    for (const w of [...this._waiters]) {
      if (this.values.length && JSON.stringify(this.values[this.values.length - 1]) === w.want) {
        this._waiters.delete(w);
        w.d.resolve();
      } else if (this.error) {
        this._waiters.delete(w);
        w.d.reject(new Error(`${this.label} was cancelled (${this.error.message}) while waiting for ${w.want}; values=${JSON.stringify(this.values)}`));
      }
    }
  }

  /** Wait for the latest value to equal `v` (JSON-compared, key order as delivered). */
  untilVal(v, ms = 10_000) {
    const w = { want: JSON.stringify(v), d: deferred() };
    this._waiters.add(w);
    this._check();
    return withTimeout(w.d.promise, ms, `${this.label}: value ${w.want}`).catch((e) => {
      this._waiters.delete(w);
      throw new Error(`${e.message}; values=${JSON.stringify(this.values)}`);
    });
  }

  first(ms = 10_000) {
    return withTimeout(
      new Promise((resolve, reject) => {
        const tick = () => {
          if (this.values.length) return resolve(this.values[0]);
          if (this.error) return reject(new Error(`${this.label} cancelled before a value: ${this.error.message}`));
          setTimeout(tick, 5);
        };
        tick();
      }),
      ms,
      `${this.label}: first value`,
    );
  }

  /** Wait for the cancel callback; assert it carries PERMISSION_DENIED. */
  async cancelled(ms = 10_000) {
    const err = await withTimeout(this._cancel.promise, ms, `${this.label}: cancel callback; values=${JSON.stringify(this.values)}`);
    assert.equal(err.code, 'PERMISSION_DENIED', `${this.label}: cancel error ${err.code} ${err.message}`);
    assert.match(err.message, /permission_denied/);
    return err;
  }

  off() {
    if (this._unsub) {
      this._unsub();
      this._unsub = null;
    }
  }
}

// ---------------------------------------------------------------------------
// Tokens and files
// ---------------------------------------------------------------------------

const b64url = (o) => Buffer.from(typeof o === 'string' ? o : JSON.stringify(o)).toString('base64url');

export const nowSecs = () => Math.floor(Date.now() / 1000);

export function hs256(secret, claims, header = {}) {
  const body = `${b64url({ alg: 'HS256', typ: 'JWT', ...header })}.${b64url(claims)}`;
  return `${body}.${crypto.createHmac('sha256', secret).update(body).digest('base64url')}`;
}

export function rs256(privateKey, claims, { kid } = {}) {
  const header = { alg: 'RS256', typ: 'JWT', ...(kid ? { kid } : {}) };
  const body = `${b64url(header)}.${b64url(claims)}`;
  return `${body}.${crypto.sign('sha256', Buffer.from(body), privateKey).toString('base64url')}`;
}

export function unsignedJwt(claims) {
  return `${b64url({ alg: 'none', typ: 'JWT' })}.${b64url(claims)}.`;
}

/** A fresh RSA key pair plus its JWKS document (`{keys: [jwk]}`). */
export function rsaKeyPair(kid) {
  const { publicKey, privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = { ...publicKey.export({ format: 'jwk' }), kid, alg: 'RS256', use: 'sig' };
  return { publicKey, privateKey, kid, jwks: { keys: [jwk] } };
}

/** A temp directory removed when the process exits. */
export function tempDir(prefix = 'hearth-rules-') {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  process.once('exit', () => {
    try {
      fs.rmSync(dir, { recursive: true, force: true });
    } catch {
      /* ignore */
    }
  });
  return dir;
}

/** Write `content` (string or JSON value) to DIR/name and return the path. */
export function writeTemp(dir, name, content) {
  const p = path.join(dir, name);
  fs.writeFileSync(p, typeof content === 'string' ? content : JSON.stringify(content, null, 2));
  return p;
}

/** Run `hearth ARGS...` to completion: { code, signal, stdout, stderr }. */
export function runHearth(args, ms = 15_000) {
  const bin = assertBinary(hearthBinary());
  return withTimeout(
    new Promise((resolve, reject) => {
      const p = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'], env: cleanEnv() });
      let stdout = '';
      let stderr = '';
      p.stdout.on('data', (d) => (stdout += d));
      p.stderr.on('data', (d) => (stderr += d));
      p.on('error', reject);
      p.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
    }),
    ms,
    `hearth ${args.join(' ')}`,
  );
}

export { rid };
