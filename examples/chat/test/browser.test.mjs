// End-to-end: the built chat app in Debian's Chromium (driven by playwright-core) against a
// real `hearth serve --dev` process with database.rules.json. Two users, alice and bob.
//
//   npm test                      (builds dist/ first, see "pretest")
//   HEARTH_BIN=/path/to/hearth npm test
//   CHROMIUM_BIN=/path/to/chromium npm test   (default /usr/bin/chromium)
//
// Screenshots go to test-artifacts/.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { chromium } from 'playwright-core';
import { launchChromium, within } from './browser.mjs';
import { CHAT_DIR, putRules, startHearth, startStatic } from '../scripts/local.mjs';

const ARTIFACTS = path.join(CHAT_DIR, 'test-artifacts');
const WAIT = 5_000; // every "the other side sees it" expectation

describe('chat example in Chromium against hearth', { timeout: 90_000 }, () => {
  const ns = `chat-e2e-${Date.now().toString(36)}`;
  const room = 'lobby';
  let hearth;
  let web;
  let browser;
  const pages = {};
  const offLoopback = []; // any request that left 127.0.0.1
  const pageErrors = [];

  before(async () => {
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    hearth = await startHearth();
    await putRules(hearth.port, ns);
    web = await startStatic();
    browser = await launchChromium(chromium);
  });

  after(async () => {
    for (const [user, page] of Object.entries(pages)) {
      if (!page.isClosed()) await page.screenshot({ path: path.join(ARTIFACTS, `${user}-final.png`) }).catch(() => {});
    }
    if (browser) await within(10_000, 'closing chromium', () => browser.close()).catch((e) => console.error(e.message));
    if (web) await web.close();
    if (hearth) {
      const exit = await hearth.stop();
      if (process.env.HEARTH_CHAT_VERBOSE) console.log(hearth.log.join('\n'));
      assert.ok(exit, 'hearth stopped');
    }
  });

  async function open(user) {
    const context = await browser.newContext({ viewport: { width: 1000, height: 640 } });
    const page = await context.newPage();
    page.setDefaultTimeout(WAIT);
    const watch = (url) => {
      const { hostname, protocol } = new URL(url);
      if (!['data:', 'about:', 'blob:'].includes(protocol) && hostname !== '127.0.0.1') offLoopback.push(`${user}: ${url}`);
    };
    page.on('request', (req) => watch(req.url()));
    page.on('websocket', (ws) => watch(ws.url()));
    page.on('pageerror', (err) => pageErrors.push(`${user}: ${err.message}`));
    const url = `${web.url}?host=127.0.0.1&port=${hearth.port}&ns=${ns}&user=${user}&room=${room}`;
    await page.goto(url, { timeout: 15_000 });
    await page.locator('#status[data-state="online"]').waitFor({ timeout: 15_000 });
    pages[user] = page;
    return page;
  }

  const member = (page, uid) => page.locator(`#members li[data-uid="${uid}"]`);
  const message = (page, text) => page.locator('#messages li.msg .text', { hasText: text });

  async function send(page, text) {
    await page.fill('#input', text);
    await page.click('#send');
  }

  it('two users see each other, chat, type, get refused, and leave', async () => {
    const alice = await open('alice');
    const bob = await open('bob');

    // Member list (presence): each sees both.
    for (const page of [alice, bob]) {
      await member(page, 'alice').waitFor({ timeout: WAIT });
      await member(page, 'bob').waitFor({ timeout: WAIT });
    }

    // Messages both ways, each visible on the other side within 5 s.
    await send(alice, 'hi bob, alice here');
    await message(bob, 'hi bob, alice here').waitFor({ timeout: WAIT });
    await send(bob, 'hello alice!');
    await message(alice, 'hello alice!').waitFor({ timeout: WAIT });
    // Messages carry the server's timestamp and the author.
    const bobMsg = alice.locator('#messages li.msg[data-uid="bob"]').first();
    assert.match((await bobMsg.locator('.author').textContent()) ?? '', /bob/);
    assert.ok(await bobMsg.locator('time').getAttribute('datetime'), 'message shows a time from serverTimestamp');

    // Typing indicator: bob types without sending.
    await bob.fill('#input', 'something long');
    await bob.locator('#input').dispatchEvent('input');
    await alice.locator('#typing', { hasText: 'bob is typing' }).waitFor({ timeout: WAIT });

    // A refused write: alice tries to edit bob's message; the rules say no.
    await bobMsg.locator('button.edit').click();
    await alice.fill('#input', 'alice was here');
    await alice.click('#send');
    await alice.locator('#errors .error[data-code="permission-denied"]').waitFor({ timeout: WAIT });
    assert.match(await alice.locator('#errors').innerText(), /refused/i);
    // The SDK rolls back its optimistic edit once the server refuses it.
    await message(alice, 'hello alice!').waitFor({ timeout: WAIT });
    assert.equal(await message(alice, 'alice was here').count(), 0);
    assert.equal(await message(bob, 'alice was here').count(), 0);
    // Alice may edit her own message.
    await alice.locator('#messages li.msg[data-uid="alice"] button.edit').first().click();
    await alice.fill('#input', 'hi bob, alice here (edited)');
    await alice.click('#send');
    await message(bob, 'hi bob, alice here (edited)').waitFor({ timeout: WAIT });

    await alice.screenshot({ path: path.join(ARTIFACTS, 'alice.png') });
    await bob.screenshot({ path: path.join(ARTIFACTS, 'bob.png') });

    // Bob closes his page: his connection drops, the server runs his onDisconnect, and he
    // leaves alice's member list.
    await bob.context().close();
    await member(alice, 'bob').waitFor({ state: 'detached', timeout: WAIT });
    await member(alice, 'alice').waitFor({ timeout: WAIT });
    // His typing flag was removed by onDisconnect as well.
    await alice.waitForFunction(() => document.getElementById('typing').textContent === '', null, { timeout: WAIT });
    await alice.screenshot({ path: path.join(ARTIFACTS, 'alice-after-bob-left.png') });

    assert.deepEqual(offLoopback, [], 'all traffic stays on 127.0.0.1');
    assert.deepEqual(pageErrors, [], 'no uncaught page errors');
  });
});
