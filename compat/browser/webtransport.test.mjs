// The WebTransport client (clients/webtransport) in Debian's Chromium, against the real binary
// with --webtransport-listen and its self-signed certificate pinned by serverCertificateHashes:
// two pages exchange positions over datagrams, the rules refuse what they refuse over
// WebSocket, the official SDK over WebSocket and the WebTransport pages see each other's
// writes, and without an endpoint the client falls back to the SDK.
//
//   cd compat && npm ci && HEARTH_BIN=../target/release/hearth node --test browser/webtransport.test.mjs
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { onValue, set } from 'firebase/database';
import { chromium } from 'playwright-core';
import { CHROMIUM, CHROMIUM_ARGS, within } from '../lib/browser.mjs';
import { useHearth } from '../lib/harness.mjs';
import { mockUser, tempDir, unsignedJwt, writeTemp } from '../lib/rules.mjs';
import { freePort, COMPAT_DIR, REPO_DIR } from '../lib/server.mjs';
import { waitFor } from '../lib/util.mjs';
import { connect } from '../../clients/webtransport/index.js';

const WAIT = 10_000;

const RULES = {
  rules: {
    rooms: {
      $room: {
        '.read': true,
        cursors: {
          '.volatile': true,
          $uid: {
            '.write': 'auth != null && auth.uid === $uid',
            '.validate': "newData.hasChildren(['x', 'y'])",
          },
        },
      },
    },
  },
};

const rulesFile = writeTemp(tempDir('hearth-webtransport-'), 'rules.json', RULES);
const wtPort = await freePort();
// A port with nothing behind it, for the fallback.
const deadPort = await freePort();

/** The page the tests drive: the client module and the SDK (for the fallback) by import map. */
const PAGE = `<!doctype html><html><head><meta charset="utf-8">
<script type="importmap">{"imports":{"firebase/app":"/firebase-app.js","firebase/database":"/firebase-database.js","https://www.gstatic.com/firebasejs/12.19.0/firebase-app.js":"/firebase-app.js"}}</script>
</head><body>webtransport test</body></html>`;

const FILES = {
  '/': ['text/html', () => PAGE],
  '/client.js': ['text/javascript', () => fs.readFileSync(path.join(REPO_DIR, 'clients/webtransport/index.js'))],
  '/firebase-app.js': ['text/javascript', () => fs.readFileSync(path.join(COMPAT_DIR, 'node_modules/firebase/firebase-app.js'))],
  '/firebase-database.js': [
    'text/javascript',
    () => fs.readFileSync(path.join(COMPAT_DIR, 'node_modules/firebase/firebase-database.js')),
  ],
};

const token = (uid) => unsignedJwt({ sub: uid, user_id: uid });

let site;
let origin;
let browser;

before(async () => {
  site = http.createServer((request, response) => {
    const file = FILES[new URL(request.url, 'http://x').pathname];
    if (!file) {
      response.writeHead(404).end();
      return;
    }
    response.writeHead(200, { 'content-type': file[0] }).end(file[1]());
  });
  await new Promise((resolve) => site.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${site.address().port}`;
  assert.ok(fs.existsSync(CHROMIUM), `Chromium not found at ${CHROMIUM}`);
  // QUIC stays on (the other browser tests turn it off): WebTransport runs on it.
  const args = CHROMIUM_ARGS.filter((arg) => arg !== '--disable-quic');
  browser = await within(30_000, 'launching chromium', () =>
    chromium.launch({ executablePath: CHROMIUM, headless: true, args, timeout: 30_000 }),
  );
}, { timeout: 60_000 });

after(async () => {
  await browser?.close();
  await new Promise((resolve) => (site ? site.close(resolve) : resolve()));
});

/** The endpoint's certificate hash, from the server's log (written at start). */
async function certificateHash(server) {
  const pattern = /certificate sha-256 ([0-9a-f]{64})/;
  await waitFor(() => pattern.test(fs.readFileSync(server.logPath, 'utf8')), WAIT, 'the certificate hash in the log');
  return fs.readFileSync(server.logPath, 'utf8').match(pattern)[1];
}

describe('volatile paths over WebTransport in Chromium', { timeout: 120_000 }, () => {
  const h = useHearth({ extraArgs: ['--rules', rulesFile, '--webtransport-listen', `127.0.0.1:${wtPort}`] });
  let hash;

  before(async () => {
    hash = await certificateHash(h.server);
  }, { timeout: 60_000 });

  /** A page of `uid` connected to `ns` through the client; `url` defaults to the endpoint. */
  async function open(ns, uid, { url = `https://127.0.0.1:${wtPort}`, fallback = false } = {}) {
    const page = await browser.newPage();
    const errors = [];
    page.on('pageerror', (error) => errors.push(error));
    await page.goto(origin);
    const transport = await page.evaluate(
      async ({ url, ns, token, hash, fallback, httpPort }) => {
        const client = await import('/client.js');
        const options = { url, namespace: ns, token, certificateHashes: [hash], connectTimeoutMs: 4000 };
        if (fallback) {
          const { initializeApp } = await import('firebase/app');
          const database = await import('firebase/database');
          const app = initializeApp({ databaseURL: `http://127.0.0.1:${httpPort}?ns=${ns}`, projectId: 'demo-hearth' });
          const db = database.getDatabase(app);
          database.connectDatabaseEmulator(db, '127.0.0.1', httpPort, { mockUserToken: { sub: fallback, user_id: fallback } });
          options.fallback = { database: db, ref: database.ref, set: database.set, onValue: database.onValue };
        }
        window.live = await client.connect(options);
        window.seen = {};
        return window.live.transport;
      },
      { url, ns, token: token(uid), hash, fallback, httpPort: h.port },
    );
    return { page, transport, errors };
  }

  /** Listens in `page` to `path`, keeping the newest value in `window.seen[path]`. */
  const listen = (page, listenPath) =>
    page.evaluate((listenPath) => {
      window.live.listen(listenPath, (value) => {
        window.seen[listenPath] = value;
      });
    }, listenPath);

  // `resend`, for pushes that travel as datagrams: QUIC datagrams are unreliable by design,
  // and a lost push is never repeated (the next newer value replaces it), so a test that waits
  // for one value rewrites that same newest value each second until it is seen (a CI run
  // on a busy machine once lost one). The wait as a whole is still bounded by WAIT.
  const until = async (page, listenPath, expected, resend) => {
    const slice = resend ? 1_000 : WAIT;
    try {
      for (let waited = 0; ; waited += slice) {
        try {
          await page.waitForFunction(
            ({ listenPath, expected }) => {
              // Key order does not matter (the page's object gains keys in arrival order).
              const canon = (v) =>
                v && typeof v === 'object' ? Object.keys(v).sort().map((k) => [k, canon(v[k])]) : v;
              return JSON.stringify(canon(window.seen[listenPath] ?? null)) === JSON.stringify(canon(expected));
            },
            { listenPath, expected },
            { timeout: slice },
          );
          return;
        } catch (error) {
          if (!resend || waited + slice >= WAIT) throw error;
          console.log(`${listenPath}: not seen after ${waited + slice} ms, the newest value written again`);
          await resend();
        }
      }
    } catch (error) {
      const seen = await page.evaluate((listenPath) => window.seen[listenPath], listenPath);
      assert.deepEqual(seen, expected, `${listenPath} in the page (${error.message})`);
    }
  };

  const write = (page, writePath, value) =>
    page.evaluate(
      ({ writePath, value }) =>
        window.live.set(writePath, value).then(
          () => 'ok',
          (error) => error.code,
        ),
      { writePath, value },
    );

  it('two pages exchange positions over datagrams', async () => {
    const ns = h.ns('wt');
    const alice = await open(ns, 'alice');
    const bob = await open(ns, 'bob');
    assert.equal(alice.transport, 'webtransport');
    assert.equal(bob.transport, 'webtransport');
    await listen(alice.page, 'rooms/r1/cursors');
    await listen(bob.page, 'rooms/r1/cursors');
    assert.equal(await write(alice.page, 'rooms/r1/cursors/alice', { x: 1, y: 2 }), 'ok');
    assert.equal(await write(bob.page, 'rooms/r1/cursors/bob', { x: 3, y: 4 }), 'ok');
    const both = { alice: { x: 1, y: 2 }, bob: { x: 3, y: 4 } };
    const resendBoth = async () => {
      await write(alice.page, 'rooms/r1/cursors/alice', { x: 1, y: 2 });
      await write(bob.page, 'rooms/r1/cursors/bob', { x: 3, y: 4 });
    };
    await until(alice.page, 'rooms/r1/cursors', both, resendBoth);
    await until(bob.page, 'rooms/r1/cursors', both, resendBoth);
    // Many moves, faster than the tick: the newest wins everywhere.
    await alice.page.evaluate(async () => {
      for (let x = 1; x <= 50; x++) window.live.set('rooms/r1/cursors/alice', { x, y: 0 }).catch(() => {});
    });
    await until(bob.page, 'rooms/r1/cursors', { alice: { x: 50, y: 0 }, bob: { x: 3, y: 4 } }, () =>
      write(alice.page, 'rooms/r1/cursors/alice', { x: 50, y: 0 }),
    );
    assert.deepEqual([...alice.errors, ...bob.errors], []);
  });

  it('the rules refuse what they refuse over WebSocket', async () => {
    const ns = h.ns('wt');
    const alice = await open(ns, 'alice');
    assert.equal(await write(alice.page, 'rooms/r1/cursors/bob', { x: 1, y: 1 }), 'permission_denied', 'another user\'s cursor');
    assert.equal(await write(alice.page, 'rooms/r1/cursors/alice', { x: 1 }), 'permission_denied', '.validate');
    assert.equal(await write(alice.page, 'rooms/r1/title', 'mine'), 'permission_denied', 'no .write there');
    const sdk = h.client(ns);
    const value = await new Promise((resolve) => onValue(sdk.ref('rooms/r1'), (snap) => resolve(snap.val()), { onlyOnce: true }));
    assert.equal(value, null, 'nothing refused was applied');
  });

  it('the SDK over WebSocket and WebTransport pages see each other\'s writes', async () => {
    const ns = h.ns('wt');
    const alice = await open(ns, 'alice');
    await listen(alice.page, 'rooms/r1/cursors');
    const watcher = h.client(ns);
    let seen = null;
    onValue(watcher.ref('rooms/r1/cursors/alice'), (snap) => {
      seen = snap.val();
    });
    assert.equal(await write(alice.page, 'rooms/r1/cursors/alice', { x: 5, y: 6 }), 'ok');
    await waitFor(() => JSON.stringify(seen) === JSON.stringify({ x: 5, y: 6 }), WAIT, 'the SDK listener gets the WebTransport write');
    const carol = mockUser(h, ns, 'carol');
    await set(carol.ref('rooms/r1/cursors/carol'), { x: 7, y: 8 });
    await until(alice.page, 'rooms/r1/cursors', { alice: { x: 5, y: 6 }, carol: { x: 7, y: 8 } });
  });

  it('falls back to the SDK\'s WebSocket when there is no WebTransport endpoint', async () => {
    const ns = h.ns('wt');
    const dave = await open(ns, 'dave', { url: `https://127.0.0.1:${deadPort}`, fallback: 'dave' });
    assert.equal(dave.transport, 'websocket');
    const alice = await open(ns, 'alice');
    assert.equal(alice.transport, 'webtransport');
    await listen(alice.page, 'rooms/r1/cursors');
    await listen(dave.page, 'rooms/r1/cursors');
    assert.equal(await write(dave.page, 'rooms/r1/cursors/dave', { x: 1, y: 1 }), 'ok');
    assert.equal(await write(alice.page, 'rooms/r1/cursors/alice', { x: 2, y: 2 }), 'ok');
    const both = { alice: { x: 2, y: 2 }, dave: { x: 1, y: 1 } };
    await until(alice.page, 'rooms/r1/cursors', both);
    await until(dave.page, 'rooms/r1/cursors', both);
    assert.notEqual(await write(dave.page, 'rooms/r1/cursors/alice', { x: 0, y: 0 }), 'ok', 'the rules still apply');
  });

  it('falls back in Node, which has no WebTransport', async () => {
    const ns = h.ns('wt');
    const client = mockUser(h, ns, 'erin');
    const { ref } = await import('firebase/database');
    const live = await connect({ url: `https://127.0.0.1:${wtPort}`, namespace: ns, fallback: { database: client.db, ref, set, onValue } });
    assert.equal(live.transport, 'websocket');
    let seen = null;
    const stop = live.listen('rooms/r2/cursors', (value) => {
      seen = value;
    });
    await live.set('rooms/r2/cursors/erin', { x: 9, y: 9 });
    await waitFor(() => JSON.stringify(seen) === JSON.stringify({ erin: { x: 9, y: 9 } }), WAIT, 'the fallback listener');
    stop();
  });
});

// An ECDSA P-256 certificate valid for 10 days, made with openssl: the --tls-cert pair serves
// WebTransport too, and a browser may pin it by the hash the log shows.
const certDir = tempDir('hearth-webtransport-cert-');
execFileSync('openssl', [
  'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
  '-keyout', path.join(certDir, 'key.pem'), '-out', path.join(certDir, 'cert.pem'), '-days', '10',
  '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1',
], { stdio: 'ignore' });
const tlsPort = await freePort();

describe('WebTransport with the --tls-cert certificate', { timeout: 60_000 }, () => {
  const h = useHearth({
    extraArgs: [
      '--rules', rulesFile,
      '--tls-cert', path.join(certDir, 'cert.pem'), '--tls-key', path.join(certDir, 'key.pem'),
      '--webtransport-listen', `127.0.0.1:${tlsPort}`,
    ],
  });

  it('serves it, and the hash in the log is the certificate\'s', async () => {
    const der = execFileSync('openssl', ['x509', '-in', path.join(certDir, 'cert.pem'), '-outform', 'der']);
    const expected = crypto.createHash('sha256').update(der).digest('hex');
    assert.equal(await certificateHash(h.server), expected);
    const page = await browser.newPage();
    await page.goto(origin);
    // Each step bounded, so that a stuck one fails with its name and the server's log
    // rather than the whole test's timeout.
    const seen = await page.evaluate(
      async ({ url, ns, token, hash }) => {
        const within = (ms, what, promise) => Promise.race([
          promise,
          new Promise((_, reject) => setTimeout(() => reject(new Error(`${what}: nothing in ${ms} ms`)), ms)),
        ]);
        const client = await import('/client.js');
        const live = await within(20_000, 'the WebTransport session',
          client.connect({ url, namespace: ns, token, certificateHashes: [hash] }));
        const value = new Promise((resolve) => live.listen('rooms/r1/cursors/frank', (v) => v && resolve(v)));
        // A push is a datagram, which a loaded machine may drop: the write is made again
        // until the listener has seen it (a volatile write of the same value changes nothing).
        let seen;
        value.then((v) => { seen = v; });
        for (let attempt = 0; seen === undefined; attempt++) {
          if (attempt === 50) throw new Error('the position: no push of it after 50 writes');
          await within(5_000, `write ${attempt}`, live.set('rooms/r1/cursors/frank', { x: 1, y: 2 }));
          await Promise.race([value, new Promise((r) => setTimeout(r, 500))]);
        }
        return { transport: live.transport, value: await value };
      },
      { url: `https://127.0.0.1:${tlsPort}`, ns: h.ns('wt'), token: token('frank'), hash: expected },
    ).catch((error) => {
      throw new Error(`${error.message}\nLog ${h.server.logPath}:\n${h.server.logTail(30)}`);
    });
    assert.deepEqual(seen, { transport: 'webtransport', value: { x: 1, y: 2 } });
    await page.close();
  });
});
