// Test-file level harness: one Hearth server per test file, fresh namespaces and
// SDK app instances per test, automatic cleanup so the process exits.
//
//   import { describe, it } from 'node:test';
//   import { useHearth, T } from '../lib/harness.mjs';
//   describe('values', () => {
//     const h = useHearth();
//     it('does something', T, async () => {
//       const ns = h.ns();
//       const [a, b] = h.clients(2, ns);
//       ...
//     });
//   });

import { before, after, afterEach } from 'node:test';
import { createRequire } from 'node:module';
import { initializeApp, deleteApp, setLogLevel } from 'firebase/app';
import { getDatabase, ref, connectDatabaseEmulator } from 'firebase/database';
import { initializeApp as adminInitializeApp } from 'firebase-admin/app';
import { getDatabase as adminGetDatabase } from 'firebase-admin/database';
import { HearthServer } from './server.mjs';
import { rid, withTimeout } from './util.mjs';

/** Default per-test options: every test is bounded in time. */
export const T = Object.freeze({ timeout: 20_000 });
export const VERBOSE = !!process.env.HEARTH_COMPAT_VERBOSE;

// ---------------------------------------------------------------------------
// SDK log noise. The modular SDK (ESM) and firebase-admin (which loads the CJS build
// of @firebase/database through @firebase/database-compat/standalone) each have their
// own copy of @firebase/logger, so both need silencing.
// ---------------------------------------------------------------------------
const require = createRequire(import.meta.url);
export function silenceSdkLogs() {
  if (VERBOSE) return;
  setLogLevel('silent');
  try {
    require('@firebase/database-compat/standalone'); // creates the CJS logger instances
    require('@firebase/logger').setLogLevel('silent');
  } catch {
    /* best effort */
  }
}
silenceSdkLogs();

let appCounter = 0;
export function uniqueAppName(prefix = 'app') {
  return `${prefix}-${process.pid}-${++appCounter}-${rid(6)}`;
}

/** A fresh namespace name: lower-case letters, digits and '-'. */
export function uniqueNs(prefix = 't') {
  return `${prefix}-${rid(10)}`.toLowerCase();
}

/**
 * Credential stub for firebase-admin. With an http://host:port databaseURL the admin
 * database client runs in "emulator mode" and authenticates with the literal token
 * `owner` (EmulatorTokenProvider) without ever asking the app credential for a token.
 * Passing a stub anyway guarantees that no code path falls back to Google
 * application-default credentials (which could try to reach a metadata server).
 */
export const ownerCredential = Object.freeze({
  getAccessToken: async () => ({ access_token: 'owner', expires_in: 3600 }),
});

export function createClient(server, ns, { name, emulatorMockUserToken } = {}) {
  const appName = name || uniqueAppName('client');
  const app = initializeApp(
    { databaseURL: server.databaseURL(ns), projectId: 'demo-hearth', apiKey: 'fake-api-key' },
    appName,
  );
  const db = getDatabase(app);
  if (emulatorMockUserToken !== undefined) {
    connectDatabaseEmulator(db, '127.0.0.1', server.port, { mockUserToken: emulatorMockUserToken });
  }
  return {
    kind: 'client',
    name: appName,
    ns,
    app,
    db,
    ref: (p) => ref(db, p),
    dispose: () => deleteApp(app),
  };
}

export function createAdmin(server, ns, { name } = {}) {
  const appName = name || uniqueAppName('admin');
  const app = adminInitializeApp(
    { databaseURL: server.databaseURL(ns), projectId: 'demo-hearth', credential: ownerCredential },
    appName,
  );
  const db = adminGetDatabase(app);
  return {
    kind: 'admin',
    name: appName,
    ns,
    app,
    db,
    ref: (p) => db.ref(p),
    dispose: () => app.delete(),
  };
}

/**
 * Registers before/after/afterEach hooks in the current describe() block.
 * Returns an object giving access to the server and factory helpers; everything created
 * through it during a test is disposed after that test.
 */
export function useHearth(opts = {}) {
  const state = { server: null, disposers: [] };

  before(async () => {
    state.server = await HearthServer.start(opts);
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
    ns: (prefix) => uniqueNs(prefix),
    /** A unique path segment for tests that share a namespace. */
    path: (prefix = 'p') => `${prefix}-${rid(8)}`,
    client(ns, o) {
      const c = createClient(h.server, ns, o);
      state.disposers.push(c.dispose);
      return c;
    },
    clients(n, ns, o) {
      return Array.from({ length: n }, () => h.client(ns, o));
    },
    admin(ns, o) {
      const a = createAdmin(h.server, ns, o);
      state.disposers.push(a.dispose);
      return a;
    },
    /** Register any extra cleanup (e.g. killing a child process). Runs after the test. */
    defer(fn) {
      state.disposers.push(fn);
    },
  };
  return h;
}

async function disposeAll(disposers) {
  // Dispose in reverse creation order; never let a hanging dispose block the suite.
  const results = await Promise.allSettled(
    disposers.reverse().map((d) => withTimeout(Promise.resolve().then(d), 10_000, 'cleanup')),
  );
  const failed = results.filter((r) => r.status === 'rejected');
  if (failed.length && VERBOSE) {
    for (const f of failed) process.stderr.write(`[compat] cleanup failed: ${f.reason}\n`);
  }
}
