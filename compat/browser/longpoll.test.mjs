// Long polling (/.lp) in Debian's Chromium, driven by playwright-core, with the official web
// SDK against the real binary:
// 1. forceLongPolling(): writes, pushes, listens, a query window, transactions from two
//    pages at once, a large write (many segments), a refused write, server timestamps, and
//    onDisconnect when a page closes; no WebSocket is ever opened;
// 2. a WebSocket that cannot connect: the SDK falls back to long polling by itself;
// 3. a browser that remembers a failed WebSocket starts with long polling and moves the
//    session onto a WebSocket (`s=`) by itself: listens, writes (a burst across the switch),
//    a transaction and onDisconnect carry on, the polls stop, the SDK forgets the failure.
//
//   cd compat && npm ci && HEARTH_BIN=../target/release/hearth npm run test:longpoll
//   CHROMIUM_BIN=/path/to/chromium            (default /usr/bin/chromium)
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { chromium } from 'playwright-core';
import { launchChromium, within } from '../lib/browser.mjs';
import { COMPAT_DIR, HearthServer } from '../lib/server.mjs';

const WAIT = 10_000; // every "the page shows it" expectation
const PAGE_DIR = path.join(COMPAT_DIR, 'browser/longpoll');
const FILES = {
  '/': ['index.html', 'text/html'],
  '/app.js': ['app.js', 'text/javascript'],
  '/vendor/firebase-app.js': ['../../node_modules/firebase/firebase-app.js', 'text/javascript'],
  '/vendor/firebase-database.js': ['../../node_modules/firebase/firebase-database.js', 'text/javascript'],
};

/** The test page's files, from an origin of their own (as an app's would be). */
function startStatic() {
  const server = http.createServer((req, res) => {
    const file = FILES[new URL(req.url, 'http://x').pathname];
    if (!file) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': file[1] });
    res.end(fs.readFileSync(path.join(PAGE_DIR, file[0])));
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => resolve({ server, port: server.address().port }));
  });
}

describe('long polling in Chromium', { timeout: 120_000 }, () => {
  let hearth;
  let web;
  let browser;
  const pageErrors = [];
  const rulesFile = path.join(os.tmpdir(), `lp-rules-${process.pid}.json`);

  before(async () => {
    fs.writeFileSync(
      rulesFile,
      JSON.stringify({ rules: { '.read': true, $top: { '.write': "$top !== 'locked'" } } }),
    );
    hearth = await HearthServer.start({ extraArgs: ['--rules', rulesFile] });
    web = await startStatic();
    browser = await launchChromium(chromium);
  });

  after(async () => {
    if (browser) await within(10_000, 'closing chromium', () => browser.close()).catch((e) => console.error(e.message));
    if (web) web.server.close();
    if (hearth) await hearth.stop();
    fs.rmSync(rulesFile, { force: true });
  });

  const rest = async (ns, p, init = {}) => {
    const res = await fetch(`http://127.0.0.1:${hearth.port}${p}.json?ns=${ns}`, init);
    assert.equal(res.status, 200, `REST ${p}`);
    return res.json();
  };

  /** A page of its own context; `traffic` collects its WebSockets and long polls. */
  async function open(ns, { mode, prepare } = {}) {
    const context = await browser.newContext();
    const page = await context.newPage();
    page.setDefaultTimeout(WAIT);
    const traffic = { websockets: [], polls: 0, starts: 0 };
    page.on('websocket', (ws) => traffic.websockets.push(ws.url()));
    page.on('request', (req) => {
      const url = new URL(req.url());
      if (url.pathname === '/.lp') {
        traffic.polls++;
        if (url.searchParams.has('start')) traffic.starts++;
      }
    });
    page.on('pageerror', (err) => pageErrors.push(err.message));
    if (prepare) await prepare(page);
    const url = `http://127.0.0.1:${web.port}/?port=${hearth.port}&ns=${ns}${mode ? `&mode=${mode}` : ''}`;
    await page.goto(url);
    await page.waitForFunction(() => window.ready === true);
    await within(WAIT, 'connecting', () => page.evaluate(() => window.api.connected()));
    return { page, context, traffic };
  }

  /** Waits until `fn` (run in the page with `arg`) is truthy. */
  const until = (page, fn, arg) => page.waitForFunction(fn, arg, { timeout: WAIT });

  it('forceLongPolling() does everything the chat example does, without a WebSocket', async () => {
    const ns = `lp-force-${crypto.randomBytes(3).toString('hex')}`;
    const alice = await open(ns, { mode: 'force' });
    const bob = await open(ns, { mode: 'force' });

    // Presence with onDisconnect, seen by the other page.
    await alice.page.evaluate(() => window.api.watch('/presence'));
    await bob.page.evaluate(() => window.api.present('/presence/bob'));
    await alice.page.evaluate(() => window.api.present('/presence/alice'));
    await until(alice.page, () => {
      const v = window.api.last('/presence');
      return v && v.alice === true && v.bob === true;
    });

    // Messages pushed from both pages reach both listeners, in the same order, with server
    // times. Push keys come from each page's clock corrected by its own estimate of the
    // server's, so the order of two pages' pushes a few milliseconds apart is not fixed (a
    // busy machine skews the estimates); one page's pushes keep their order.
    await bob.page.evaluate(() => window.api.watch('/rooms/lobby/messages'));
    await alice.page.evaluate(() => window.api.watch('/rooms/lobby/messages'));
    for (const [who, text] of [[alice, 'hi bob'], [bob, 'hi alice'], [alice, 'how are you?']]) {
      await who.page.evaluate(([t]) => window.api.push('/rooms/lobby/messages', { text: t, at: { '.sv': 'timestamp' } }), [text]);
    }
    const orders = [];
    for (const who of [alice, bob]) {
      await until(who.page, () => Object.keys(window.api.last('/rooms/lobby/messages') || {}).length === 3);
      const messages = Object.values(await who.page.evaluate(() => window.api.last('/rooms/lobby/messages')));
      const texts = messages.map((m) => m.text);
      assert.deepEqual([...texts].sort(), ['hi alice', 'hi bob', 'how are you?']);
      assert.ok(texts.indexOf('hi bob') < texts.indexOf('how are you?'), `alice's pushes in order: ${texts}`);
      assert.ok(messages.every((m) => typeof m.at === 'number' && m.at > 1.7e12), 'server timestamps');
      orders.push(texts);
    }
    assert.deepEqual(orders[0], orders[1], 'both pages see the same order');

    // A write from outside (REST) is pushed to the long-polling listener.
    await rest(ns, '/rooms/lobby/messages/zzz', { method: 'PUT', body: JSON.stringify({ text: 'from rest', at: 1 }) });
    await until(bob.page, () => (window.api.last('/rooms/lobby/messages') || {}).zzz?.text === 'from rest');

    // A query window (orderByChild + limitToLast) follows writes that enter and leave it.
    await alice.page.evaluate(() => window.api.watchTop('/scores', 'n', 2));
    await bob.page.evaluate(() => window.api.update('/scores', { a: { n: 1 }, b: { n: 5 }, c: { n: 3 } }));
    await until(alice.page, () => JSON.stringify(window.api.last('top:/scores')) === '["c","b"]');
    await bob.page.evaluate(() => window.api.set('/scores/a/n', 9));
    await until(alice.page, () => JSON.stringify(window.api.last('top:/scores')) === '["b","a"]');

    // Transactions from both pages at once: every increment lands exactly once.
    const [a, b] = await Promise.all([
      alice.page.evaluate(() => window.api.increment('/counter', 10)),
      bob.page.evaluate(() => window.api.increment('/counter', 10)),
    ]);
    assert.ok(a && b, 'every transaction committed');
    assert.equal(await rest(ns, '/counter'), 20);

    // A write of 100 KB travels as about 75 polls' worth of segments.
    const big = 'é'.repeat(50_000) + '✓';
    await alice.page.evaluate(([v]) => window.api.set('/big', v), [big]);
    assert.equal(await rest(ns, '/big'), big);
    // ...and a large push comes back whole.
    await bob.page.evaluate(() => window.api.watch('/big'));
    await until(bob.page, ([v]) => window.api.last('/big') === v, [big]);

    // The rules refuse a write: the SDK reports it.
    await alice.page.evaluate(() => window.api.tryWrite('locked', '/locked/x', 1));
    await until(alice.page, () => window.api.error('locked') !== undefined);
    assert.equal(await alice.page.evaluate(() => window.api.error('locked')), 'PERMISSION_DENIED');

    // Bob's page closes: his session ends at once (the disconnect frame's goodbye), his
    // onDisconnect runs, and alice sees him leave.
    await bob.context.close();
    await until(alice.page, () => {
      const v = window.api.last('/presence');
      return v && v.alice === true && v.bob === undefined;
    });

    for (const who of [alice, bob]) {
      assert.deepEqual(who.traffic.websockets, [], 'no WebSocket with forceLongPolling()');
      assert.ok(who.traffic.polls > 10, 'it polled');
    }
    await alice.context.close();
    assert.deepEqual(pageErrors, [], 'no uncaught page errors');
  });

  it('falls back to long polling when the WebSocket cannot connect', async () => {
    const ns = `lp-fallback-${crypto.randomBytes(3).toString('hex')}`;
    let refused = 0;
    const carol = await open(ns, {
      // Every WebSocket of the page is closed before it reaches the server.
      prepare: (page) =>
        page.routeWebSocket(/\/\.ws/, (ws) => {
          refused++;
          ws.close();
        }),
    });
    assert.ok(refused >= 1, 'the SDK tried a WebSocket first');
    assert.ok(carol.traffic.starts >= 1, 'then long polling');
    await carol.page.evaluate(() => window.api.watch('/notes'));
    await carol.page.evaluate(() => window.api.push('/notes', 'over long polling'));
    await rest(ns, '/notes/x', { method: 'PUT', body: '"from rest"' });
    await until(carol.page, () => Object.values(window.api.last('/notes') || {}).length === 2);
    assert.deepEqual(Object.values(await rest(ns, '/notes')).sort(), ['from rest', 'over long polling']);
    await carol.context.close();
  });

  it('a remembered WebSocket failure starts with long polling, then the session moves onto a WebSocket', async () => {
    const ns = `lp-upgrade-${crypto.randomBytes(3).toString('hex')}`;
    // The page's WebSockets pass through this proxy, which sees every frame and holds the
    // second pong (after which the SDK switches) until the test lets it go.
    const frames = { toServer: [], toPage: [] };
    let pongs = 0;
    let release;
    const released = new Promise((resolve) => (release = resolve));
    const sentOnWebSocket = (what) => frames.toServer.filter((m) => m.includes(what)).length;
    const dave = await open(ns, {
      prepare: async (page) => {
        // What the SDK leaves in localStorage after a WebSocket that never became healthy.
        await page.addInitScript(() => localStorage.setItem('firebase:previous_websocket_failure', 'true'));
        // The page's barrier in the middle of its burst of writes: lets the pong go and
        // returns once the SDK has switched (its `a` is on the WebSocket: it sends there
        // from then on).
        await page.exposeFunction('switchNow', async () => {
          release();
          const until = Date.now() + WAIT;
          while (!sentOnWebSocket('"t":"a"') && Date.now() < until) await new Promise((r) => setTimeout(r, 5));
          return sentOnWebSocket('"t":"a"') === 1;
        });
        await page.routeWebSocket(/\/\.ws/, (ws) => {
          const server = ws.connectToServer();
          ws.onMessage((m) => {
            frames.toServer.push(m);
            server.send(m);
          });
          server.onMessage((m) => {
            frames.toPage.push(m);
            if (typeof m === 'string' && m.includes('"t":"o"') && ++pongs === 2) {
              released.then(() => ws.send(m));
              return;
            }
            ws.send(m);
          });
        });
      },
    });
    assert.equal(dave.traffic.starts, 1, 'long polling first');
    const deadline = Date.now() + WAIT;
    while (pongs < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    assert.ok(dave.traffic.websockets.some((url) => /[?&]s=\d+-\d+\.[\w-]{22}(&|$)/.test(url)), 'a WebSocket naming the session');
    assert.equal(pongs, 2, 'the WebSocket was pinged healthy');
    assert.ok(!frames.toServer.some((m) => m.includes('"t":"d"')), 'no data on the WebSocket yet');

    // Before the switch, over long polling: presence with onDisconnect, a listener.
    await dave.page.evaluate(() => window.api.present('/presence/dave'));
    await dave.page.evaluate(() => window.api.watch('/log'));
    // A burst of writes and a transaction, with the switch in the middle of it.
    // Writes 0 to 15 and the transaction go by the polls, 16 to 29 by the WebSocket; the
    // answers to the first ones come back by either.
    const burst = dave.page.evaluate(async () => {
      const writes = [];
      let switched = false;
      for (let i = 0; i < 30; i++) {
        writes.push(window.api.set('/log', i));
        if (i === 15) {
          writes.push(window.api.increment('/counter', 5));
          switched = await window.switchNow();
        }
      }
      return switched && (await Promise.all(writes)).every(Boolean);
    });
    assert.ok(await burst, 'the switch, and every write and transaction acknowledged');
    assert.equal(sentOnWebSocket('"p":"/log"'), 14, 'the writes after the switch went by the WebSocket');
    assert.equal(await rest(ns, '/log'), 29);
    assert.equal(await rest(ns, '/counter'), 5);
    await until(dave.page, () => window.api.last('/log') === 29);

    // The WebSocket carries the session now: the page's writes and the server's pushes.
    await rest(ns, '/log', { method: 'PUT', body: '"from rest"' });
    await until(dave.page, () => window.api.last('/log') === 'from rest');
    assert.ok(frames.toServer.some((m) => m.includes('"t":"d"')), 'requests over the WebSocket');
    assert.ok(frames.toPage.some((m) => m.includes('from rest')), 'pushes over the WebSocket');
    // ...and long polling stopped.
    const polls = dave.traffic.polls;
    await dave.page.evaluate(() => window.api.set('/after', 'switch'));
    await dave.page.evaluate(() => window.api.increment('/counter', 2));
    assert.equal(await rest(ns, '/after'), 'switch');
    assert.equal(await rest(ns, '/counter'), 7);
    assert.equal(dave.traffic.polls, polls, 'no poll after the switch');
    assert.equal(dave.traffic.starts, 1, 'one session throughout');
    assert.equal(dave.traffic.websockets.length, 1, 'one WebSocket');
    // The SDK forgets the failure: its next page load starts with a WebSocket.
    assert.equal(await dave.page.evaluate(() => localStorage.getItem('firebase:previous_websocket_failure')), null);

    // The move ran no onDisconnect; the end of the session does.
    assert.deepEqual(await rest(ns, '/presence'), { dave: true });
    await dave.context.close();
    const gone = Date.now() + WAIT;
    while ((await rest(ns, '/presence')) !== null && Date.now() < gone) await new Promise((r) => setTimeout(r, 50));
    assert.equal(await rest(ns, '/presence'), null, 'onDisconnect when the page goes');
    assert.deepEqual(pageErrors, [], 'no uncaught page errors');
  });
});
