// The web console (/_/console/) in Debian's Chromium, driven by playwright-core, against the
// real binary: signing in with the admin token, the database list, the live tree following a
// REST write, editing, adding, deleting, import and export, the edit panel following the live
// value and refusing to overwrite one changed since it was read, deletes that name their path
// (the database's name typed at the root), errors shown at the box that caused them, the
// rules editor's errors at their line, the ruleset history (a diff with the stable ruleset, a
// rollback) and the two settings, the audit trail (turned on, searched, filtered, a user's
// entries erased), the metrics charts (a time axis, and what each counts), and the declared
// triggers (each trigger's figures, its databases, a dead letter sent again and dropped once
// confirmed; a server without triggers says so; the declaration read, refused and saved).
// Also: without the token, everything the console calls refuses.
//
//   cd compat && npm ci && HEARTH_BIN=../target/release/hearth node --test browser/console.test.mjs
//   CHROMIUM_BIN=/path/to/chromium            (default /usr/bin/chromium)
//   CONSOLE_SCREENSHOTS=../docs/console        (where screenshots go; default .artifacts/console)
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { chromium } from 'playwright-core';
import { launchChromium, within } from '../lib/browser.mjs';
import { ARTIFACTS_DIR, COMPAT_DIR, HearthServer, REPO_DIR, freePort } from '../lib/server.mjs';

const SHOTS = path.resolve(COMPAT_DIR, process.env.CONSOLE_SCREENSHOTS || path.join(ARTIFACTS_DIR, 'console'));
const WAIT = 5_000; // every "the page shows it" expectation
const TOKEN = `console-test-${crypto.randomBytes(8).toString('hex')}`;
const JWT_SECRET = 'console-test-jwt-secret';

/** An HS256 user token the server accepts with --jwt-secret: a credential, not an admin's. */
function userToken(uid) {
  const part = (value) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const now = Math.floor(Date.now() / 1000);
  const body = `${part({ alg: 'HS256', typ: 'JWT' })}.${part({ sub: uid, uid, iat: now, exp: now + 3600 })}`;
  const signature = crypto.createHmac('sha256', JWT_SECRET).update(body).digest('base64url');
  return `${body}.${signature}`;
}

const launch = () => launchChromium(chromium);

describe('the console files', () => {
  it('vendor the same firebase SDK build that compat tests', () => {
    for (const name of ['firebase-app.js', 'firebase-database.js']) {
      const vendored = fs.readFileSync(path.join(REPO_DIR, 'crates/transport/console/vendor', name));
      const installed = fs.readFileSync(path.join(COMPAT_DIR, 'node_modules/firebase', name));
      assert.ok(vendored.equals(installed), `crates/transport/console/vendor/${name} differs from compat's firebase: see vendor/README.md`);
    }
  });
});

describe('the web console against a server with an admin token', { timeout: 120_000 }, () => {
  const ns = `console-${crypto.randomBytes(4).toString('hex')}`;
  let server;
  let browser;
  let page;
  let base;
  const offLoopback = [];
  const pageErrors = [];

  /** A REST call: `body` is sent as JSON, `raw` as it is. */
  const rest = async (method, dataPath, { body, raw, token = TOKEN, query = '' } = {}) => {
    const headers = token ? { authorization: `Bearer ${token}` } : {};
    const response = await fetch(`${base}${dataPath}?ns=${ns}${query}`, {
      method,
      headers,
      body: raw ?? (body === undefined ? undefined : JSON.stringify(body)),
      signal: AbortSignal.timeout(WAIT),
    });
    const text = await response.text();
    return { status: response.status, text, json: () => JSON.parse(text) };
  };
  const shot = (name) => page.screenshot({ path: path.join(SHOTS, name) });
  const message = () => page.locator('#message');
  /** The status line under a group of the edit panel: `edit`, `add` or `io`. */
  const status = (where) => page.locator(`#editor #${where}-status`);
  /** Waits until the edit box holds exactly `text`. */
  const boxHolds = (text) =>
    page.waitForFunction((expected) => document.querySelector('#edit-value').value === expected, text, { timeout: WAIT });
  const select = (nodePath) => node(nodePath).locator(':scope > .row .key').click();
  const node = (nodePath) => page.locator(`#tree li.node[data-path="${nodePath}"]`).first();
  const nodeValue = (nodePath) => node(nodePath).locator(':scope > .row .value');
  /** Expands the branches above `nodePath` (the tree opens two levels by itself). */
  const reveal = async (nodePath) => {
    const segments = nodePath.split('/').filter(Boolean);
    for (let i = 1; i < segments.length; i++) {
      const toggle = node(`/${segments.slice(0, i).join('/')}`).locator(':scope > .row button.toggle');
      if ((await toggle.getAttribute('aria-label')) === 'expand') await toggle.click();
    }
    return nodeValue(nodePath);
  };

  before(async () => {
    fs.mkdirSync(SHOTS, { recursive: true });
    server = await HearthServer.start({ dev: false, extraArgs: ['--admin-token', TOKEN, '--jwt-secret', JWT_SECRET] });
    base = `http://127.0.0.1:${server.port}`;
    const seeded = await rest('PUT', '/.json', {
      body: { rooms: { general: { title: 'General', members: 2 }, random: { title: 'Random' } }, messages: { m1: 'hello' } },
    });
    assert.equal(seeded.status, 200, seeded.text);
    browser = await launch();
    const context = await browser.newContext({ viewport: { width: 1280, height: 760 }, acceptDownloads: true });
    page = await context.newPage();
    page.setDefaultTimeout(WAIT);
    const watch = (url) => {
      const { hostname, protocol } = new URL(url);
      if (!['data:', 'about:', 'blob:'].includes(protocol) && hostname !== '127.0.0.1') offLoopback.push(url);
    };
    page.on('request', (request) => watch(request.url()));
    page.on('websocket', (socket) => watch(socket.url()));
    page.on('pageerror', (error) => pageErrors.push(error.message));
  });

  after(async () => {
    if (browser) await within(10_000, 'closing chromium', () => browser.close()).catch((e) => console.error(e.message));
    if (server) await server.stop();
  });

  it('refuses every data endpoint without the admin token; the page itself is public', async () => {
    const page = await fetch(`${base}/_/console/`, { signal: AbortSignal.timeout(WAIT) });
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-security-policy'), /default-src 'none'/);
    const bare = await fetch(`${base}/_/console`, { redirect: 'manual', signal: AbortSignal.timeout(WAIT) });
    assert.equal(bare.status, 308);
    assert.equal(bare.headers.get('location'), '/_/console/');

    const user = userToken('mallory');
    const calls = [
      ['GET', '/.admin/databases'],
      ['GET', '/.settings/rules.json'],
      ['PUT', '/.settings/rules.json', '{"rules":{".read":true}}'],
      ['POST', '/_/console/rules-check', '{"rules":{}}'],
      ['GET', '/.settings/rulesets.json'],
      ['GET', '/.settings/rulesets/1.json'],
      ['PUT', '/.settings/ruleset_labels.json', '{"stable":"1"}'],
      ['GET', '/.settings/defaultWriteSizeLimit.json'],
      ['PUT', '/.settings/defaultWriteSizeLimit.json', '"small"'],
      ['GET', '/.settings/strictTriggerValidation.json'],
      ['PUT', '/.settings/strictTriggerValidation.json', 'false'],
      ['GET', '/.settings/appCheck.json'],
      ['PUT', '/.settings/appCheck.json', '"enforced"'],
      ['GET', '/.settings/quotas.json'],
      ['PUT', '/.settings/quotas.json', '{"connections": 1}'],
      ['GET', '/metrics'],
      ['GET', '/.admin/triggers'],
      ['GET', '/.admin/triggers/any/dead'],
      ['POST', '/.admin/triggers/any/retry'],
      ['DELETE', '/.admin/triggers/any/dead'],
      ['GET', '/.admin/triggers/declaration'],
      ['PUT', '/.admin/triggers/declaration', '{"triggers":{}}'],
      ['GET', '/rooms.json'],
      ['PUT', '/rooms/general/title.json', '"taken"'],
    ];
    for (const [method, endpoint, body] of calls) {
      for (const [who, token, statuses] of [
        ['nobody', null, [401]],
        ['a wrong token', 'not-the-token', [401]],
        ['a user', user, [401, 403]],
      ]) {
        const answer = await rest(method, endpoint, { raw: body, token });
        assert.ok(statuses.includes(answer.status), `${method} ${endpoint} as ${who}: ${answer.status} ${answer.text}`);
      }
    }
    assert.equal((await rest('GET', '/rooms/general/title.json')).json(), 'General', 'nothing was written');
    assert.equal((await rest('GET', '/.settings/defaultWriteSizeLimit.json')).json(), 'unlimited', 'no setting was changed');
    assert.deepEqual((await rest('GET', '/.settings/ruleset_labels.json')).json(), {}, 'no label was moved');
  });

  it('signs in with the token and lists the databases', async () => {
    await page.goto(`${base}/_/console/`, { timeout: 15_000 });
    await page.locator('#login-form').waitFor();
    await shot('login.png');
    await page.fill('#token', 'not-the-token');
    await page.click('#login-form button[type=submit]');
    await page.locator('#login-error', { hasText: 'refused' }).waitFor();
    await page.fill('#token', TOKEN);
    await page.click('#login-form button[type=submit]');
    const row = page.locator(`#database-rows tr[data-name="${ns}"]`);
    await row.waitFor();
    const cells = await row.locator('td').allTextContents();
    assert.equal(cells[0], ns);
    assert.match(cells[1], /B$/, `a size: ${cells}`);
    assert.equal(await page.evaluate(() => sessionStorage.getItem('hearth-console-token')), TOKEN);
  });

  it('shows the tree live: a REST write appears without a reload', async () => {
    await page.click(`#database-rows tr[data-name="${ns}"]`);
    await page.locator('#status[data-state="online"]').waitFor({ timeout: 15_000 });
    await (await reveal('/rooms/general/title')).filter({ hasText: '"General"' }).waitFor();
    const written = await rest('PUT', '/rooms/general/title.json', { body: 'Lobby' });
    assert.equal(written.status, 200, written.text);
    await nodeValue('/rooms/general/title').filter({ hasText: '"Lobby"' }).waitFor();
    const added = await rest('PUT', '/rooms/new.json', { body: { title: 'New room' } });
    assert.equal(added.status, 200, added.text);
    await (await reveal('/rooms/new/title')).filter({ hasText: '"New room"' }).waitFor();
    // The database list now counts the console's own connection.
    await page.click('#refresh-dbs');
    await page.locator(`#database-rows tr[data-name="${ns}"] td:nth-child(3)`, { hasText: '1' }).waitFor();
    await shot('tree.png');
  });

  it('edits, adds and deletes values through the UI, as REST then sees', async () => {
    await select('/rooms/general/title');
    assert.equal(await page.inputValue('#edit-path'), '/rooms/general/title');
    await boxHolds('"Lobby"');
    await page.fill('#edit-value', '{"text": "Main hall", "n": 3}');
    await page.click('#edit-set');
    // The line under the buttons says so once the server took the write.
    await status('edit').filter({ hasText: 'Set /rooms/general/title.' }).waitFor();
    assert.deepEqual((await rest('GET', '/rooms/general/title.json')).json(), { text: 'Main hall', n: 3 });
    await (await reveal('/rooms/general/title/text')).filter({ hasText: '"Main hall"' }).waitFor();

    await page.fill('#edit-path', '/messages');
    await page.fill('#edit-value', '"pushed"');
    await page.click('#edit-add');
    await status('add').filter({ hasText: 'Added /messages/' }).waitFor();
    const messages = (await rest('GET', '/messages.json')).json();
    assert.equal(Object.keys(messages).length, 2);
    assert.ok(Object.entries(messages).some(([key, value]) => key.startsWith('-') && value === 'pushed'), JSON.stringify(messages));

    await page.fill('#child-key', 'named');
    await page.fill('#edit-value', 'not json');
    await page.click('#edit-add');
    await page.locator('#add-status.error', { hasText: 'not JSON' }).waitFor();
    assert.equal((await rest('GET', '/messages/named.json')).json(), null);

    // A value: the button names the path and wants a second click.
    await page.fill('#edit-path', '/messages/m1');
    await page.click('#edit-delete');
    await page.locator('#edit-delete', { hasText: 'Delete /messages/m1?' }).waitFor();
    assert.equal((await rest('GET', '/messages/m1.json')).json(), 'hello', 'one click deletes nothing');
    await page.click('#edit-delete');
    await status('edit').filter({ hasText: 'Deleted /messages/m1.' }).waitFor();
    assert.equal((await rest('GET', '/messages/m1.json')).json(), null);

    // A node with children: its path must be typed.
    await page.fill('#edit-path', '/rooms/random');
    await page.click('#edit-delete');
    await page.locator('#delete-confirm-text', { hasText: 'Delete /rooms/random and the 1 child under it? Type /rooms/random' }).waitFor();
    assert.ok(await page.locator('#delete-confirm-go').isDisabled());
    await page.fill('#delete-confirm-name', '/rooms');
    assert.ok(await page.locator('#delete-confirm-go').isDisabled(), 'another path does not confirm');
    await page.fill('#delete-confirm-name', '/rooms/random');
    await page.click('#delete-confirm-go');
    await status('edit').filter({ hasText: 'Deleted /rooms/random.' }).waitFor();
    assert.equal((await rest('GET', '/rooms/random.json')).json(), null);
    await node('/rooms/random').waitFor({ state: 'detached' });
  });

  it('follows the live value, and never overwrites a value changed since it was read', async () => {
    assert.equal((await rest('PUT', '/shop/stock.json', { body: 73 })).status, 200);
    await (await reveal('/shop/stock')).filter({ hasText: '73' }).waitFor();
    await select('/shop/stock');
    await boxHolds('73');
    await page.locator('#edit-note', { hasText: 'following the live value' }).waitFor();

    // Not edited: the box follows a write made behind the console's back.
    assert.equal((await rest('PUT', '/shop/stock.json', { body: 5 })).status, 200);
    await boxHolds('5');

    // Edited, then changed underneath: the box keeps the edit and shows the value there now.
    await page.fill('#edit-value', '74');
    assert.equal((await rest('PUT', '/shop/stock.json', { body: 6 })).status, 200);
    await page.locator('#edit-stale #edit-current', { hasText: '6' }).waitFor();
    assert.equal(await page.inputValue('#edit-value'), '74');
    await page.click('#edit-set');
    await page.locator('#edit-stale-text', { hasText: '/shop/stock changed since you read it: nothing was written' }).waitFor();
    assert.equal((await rest('GET', '/shop/stock.json')).json(), 6, 'Set value did not overwrite the newer value');
    await shot('stale-edit.png');

    // Reload takes the current value; a write of an unchanged value goes through.
    await page.click('#edit-stale-reload');
    await boxHolds('6');
    assert.ok(await page.locator('#edit-stale').isHidden());
    await page.fill('#edit-value', '75');
    await page.click('#edit-set');
    await status('edit').filter({ hasText: 'Set /shop/stock.' }).waitFor();
    assert.equal((await rest('GET', '/shop/stock.json')).json(), 75);

    // The write itself is conditional: with the value out of the watched tree (so the panel
    // cannot see it change), the server's ETag check still refuses it.
    await page.fill('#watch-path', '/rooms');
    await page.click('#watch-form button[type=submit]');
    await node('/shop').waitFor({ state: 'detached' });
    await page.fill('#edit-value', '76');
    assert.equal((await rest('PUT', '/shop/stock.json', { body: 8 })).status, 200);
    await page.click('#edit-set');
    await page.locator('#edit-stale-text', { hasText: 'changed since you read it' }).waitFor();
    assert.equal((await page.locator('#edit-current').textContent()).trim(), '8');
    assert.equal((await rest('GET', '/shop/stock.json')).json(), 8);
    // And so is Delete.
    await page.click('#edit-delete');
    await page.locator('#edit-delete', { hasText: 'Delete /shop/stock?' }).waitFor();
    assert.equal((await rest('PUT', '/shop/stock.json', { body: 9 })).status, 200);
    await page.click('#edit-delete');
    await page.locator('#edit-current', { hasText: '9' }).waitFor();
    assert.equal((await rest('GET', '/shop/stock.json')).json(), 9, 'Delete did not remove the newer value');

    // A path typed but never read is only created: one that holds a value is not replaced.
    await page.fill('#edit-path', '/rooms/general/members');
    await page.fill('#edit-value', '40');
    await page.click('#edit-set');
    await page.locator('#edit-stale-text', { hasText: '/rooms/general/members already holds a value' }).waitFor();
    assert.equal((await rest('GET', '/rooms/general/members.json')).json(), 2);
    await page.fill('#edit-path', '/shop/new');
    await page.fill('#edit-value', '"made"');
    await page.click('#edit-set');
    await status('edit').filter({ hasText: 'Set /shop/new.' }).waitFor();
    assert.equal((await rest('GET', '/shop/new.json')).json(), 'made');
    assert.ok(await page.locator('#edit-stale').isHidden(), 'a write that went through clears the warning');

    await page.fill('#watch-path', '/');
    await page.click('#watch-form button[type=submit]');
    await (await reveal('/shop/stock')).filter({ hasText: '9' }).waitFor();
  });

  it('shows errors at the box that caused them, and clears them on success, tab or database', async () => {
    await select('/shop/new');
    await boxHolds('"made"');
    await page.fill('#edit-value', '{oops');
    await page.click('#edit-set');
    await page.locator('#editor #edit-status.error', { hasText: 'The value is not JSON' }).waitFor();
    assert.equal(await message().textContent(), '', 'not in the bar under the title');
    // Success clears it.
    await page.fill('#edit-value', '"fixed"');
    await page.click('#edit-set');
    await status('edit').filter({ hasText: 'Set /shop/new.' }).waitFor();
    assert.equal(await page.locator('#editor .status-line.error').count(), 0);

    // Another tab clears it.
    await page.fill('#edit-value', '{oops');
    await page.click('#edit-set');
    await page.locator('#edit-status.error').waitFor();
    await page.click('.tabs button[data-tab="rules"]');
    await page.click('.tabs button[data-tab="data"]');
    assert.equal(await status('edit').textContent(), '');

    // Another database clears it, and the panel it read from.
    await page.fill('#child-key', 'x');
    await page.click('#edit-add');
    await page.locator('#add-status.error').waitFor();
    await page.fill('#open-db-name', `${ns}-other`);
    await page.click('#open-db button[type=submit]');
    await page.locator('#current-db', { hasText: `${ns}-other` }).waitFor();
    assert.equal(await page.locator('#editor .status-line.error').count(), 0);
    assert.equal(await page.inputValue('#edit-value'), '');
    await page.fill('#open-db-name', ns);
    await page.click('#open-db button[type=submit]');
    await page.locator('#current-db', { hasText: new RegExp(`^${ns}$`) }).waitFor();
    await page.locator('#status[data-state="online"]').waitFor({ timeout: 15_000 });
    await nodeValue('/shop/new').filter({ hasText: '"fixed"' }).waitFor();
  });

  it('exports a path as a download and imports a file into a path', async () => {
    await page.fill('#edit-path', '/rooms');
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#export')]);
    assert.equal(download.suggestedFilename(), `${ns}-rooms.json`);
    const exported = JSON.parse(fs.readFileSync(await download.path(), 'utf8'));
    assert.deepEqual(exported, (await rest('GET', '/rooms.json', { query: '&format=export' })).json());

    const imported = { people: { ada: { born: 1815 }, alan: { born: 1912 } } };
    await page.fill('#edit-path', '/imported');
    await page.setInputFiles('#import-file', {
      name: 'people.json',
      mimeType: 'application/json',
      buffer: Buffer.from(JSON.stringify(imported)),
    });
    await page.click('#import');
    await status('io').filter({ hasText: 'Imported people.json' }).waitFor();
    assert.deepEqual((await rest('GET', '/imported.json')).json(), imported);
    await (await reveal('/imported/people/ada/born')).filter({ hasText: '1815' }).waitFor();
  });

  it('deletes the whole database only once its name is typed', async () => {
    const everything = (await rest('GET', '/.json')).json();
    assert.ok(everything && everything.rooms, 'there is data to lose');
    await page.fill('#edit-path', '/');
    await page.click('#edit-delete');
    const children = Object.keys(everything).length;
    await page
      .locator('#delete-confirm-text', { hasText: `Delete everything in the database ${ns} (${children} children at /)? Type the database name, ${ns}, to confirm.` })
      .waitFor();
    assert.ok(await page.locator('#delete-confirm-go').isDisabled());
    for (const wrong of ['/', `${ns}x`]) {
      await page.fill('#delete-confirm-name', wrong);
      assert.ok(await page.locator('#delete-confirm-go').isDisabled(), `${wrong} does not confirm`);
      await page.press('#delete-confirm-name', 'Enter');
    }
    await page.click('#delete-confirm-cancel');
    assert.ok(await page.locator('#delete-confirm').isHidden());
    assert.deepEqual((await rest('GET', '/.json')).json(), everything, 'nothing was deleted');

    await page.click('#edit-delete');
    await page.fill('#delete-confirm-name', ns);
    await shot('delete-root.png');
    await page.click('#delete-confirm-go');
    await status('edit').filter({ hasText: 'Deleted /.' }).waitFor();
    assert.equal((await rest('GET', '/.json')).json(), null);
    await node('/rooms').waitFor({ state: 'detached' });
  });

  it('shows a refused rules document at its line, and saves a valid one', async () => {
    await page.click('.tabs button[data-tab="rules"]');
    await page.locator('#rules-status', { hasText: `rules of ${ns}` }).waitFor();
    const before = (await rest('GET', '/.settings/rules.json')).text;
    assert.equal(await page.inputValue('#rules-text'), before);

    const invalid = '{\n  "rules": {\n    ".read": "auth.uid ==",\n    ".write": false\n  }\n}';
    await page.fill('#rules-text', invalid);
    await page.click('#rules-save');
    await page.locator('#rules-error', { hasText: /^line 3, column \d+: / }).waitFor();
    await page.locator('#rules-gutter div.error[data-line="3"]').waitFor();
    assert.equal(await page.locator('#rules-gutter div.error').count(), 1);
    assert.ok(await page.locator('#rules-band').isVisible(), 'the line is marked in the text');
    assert.equal((await rest('GET', '/.settings/rules.json')).text, before, 'a refused document is not installed');
    await shot('rules-error.png');

    await page.fill('#rules-text', '{\n  "rules": {\n    ".read": "auth.uid ==="\n  }\n}');
    await page.click('#rules-check');
    await page.locator('#rules-error', { hasText: /^line 3, column / }).waitFor();

    const valid = '{\n  // admins only, and readers of rooms\n  "rules": {\n    "rooms": { ".read": "auth != null" }\n  }\n}';
    await page.fill('#rules-text', valid);
    assert.equal(await page.locator('#rules-gutter div.error').count(), 0, 'editing clears the mark');
    await page.click('#rules-check');
    await page.locator('#rules-status', { hasText: 'the rules are valid' }).waitFor();
    assert.equal((await rest('GET', '/.settings/rules.json')).text, before, 'a check installs nothing');
    await page.click('#rules-save');
    await page.locator('#rules-status', { hasText: 'saved' }).waitFor();
    assert.equal((await rest('GET', '/.settings/rules.json')).text, valid);
  });

  it('draws live charts of the server metrics', async () => {
    await page.click('.tabs button[data-tab="metrics"]');
    // The panel scrapes from sign-in on; writes between two scrapes give every chart a value
    // (rates need two scrapes, latencies observations between them).
    for (let i = 0; i < 5; i++) assert.equal((await rest('PUT', `/load/${i}.json`, { body: i })).status, 200);
    const charts = ['connections', 'writes', 'ack', 'pushes', 'sync'];
    await page.waitForFunction(
      (names) =>
        names.every((name) => Number(document.querySelector(`#charts figure[data-chart="${name}"] canvas`).dataset.points) >= 2),
      charts,
      { timeout: 15_000 },
    );
    assert.equal(await page.locator('#metrics-note').textContent(), '');
    // Each chart says what it counts, and has a time axis labelled with the clock.
    for (const name of charts) {
      const figure = page.locator(`#charts figure[data-chart="${name}"]`);
      assert.equal(await figure.locator('.scope-tag').textContent(), 'server-wide', name);
      assert.match(await figure.locator('canvas').getAttribute('data-ticks'), /^\d\d:\d\d(,\d\d:\d\d){3,}$/, name);
    }
    assert.match(await page.locator('#metrics-scope').textContent(), new RegExp(`server-wide count every database of this server, not ${ns} alone`));
    // The open database's own numbers, from the lists of the busiest databases.
    for (let i = 0; i < 5; i++) assert.equal((await rest('PUT', `/load/${i}.json`, { body: i + 10 })).status, 200);
    await page.waitForFunction(
      () => Number(document.querySelector('#charts figure[data-chart="database-writes"] canvas').dataset.points) >= 1,
      undefined,
      { timeout: 15_000 },
    );
    for (const name of ['database-clients', 'database-writes']) {
      assert.equal(await page.locator(`#charts figure[data-chart="${name}"] .scope-tag`).textContent(), `database ${ns}`, name);
    }
    const own = await page.locator('#charts figure[data-chart="database-clients"] .legend').textContent();
    assert.match(own, /clients [1-9]/, `the console's own connection: ${own}`);
    const legend = await page.locator('#charts figure[data-chart="connections"] .legend').textContent();
    assert.match(legend, /WebSocket [1-9]/, `the console's own connection is counted: ${legend}`);
    // The canvas has ink on it, not only an empty frame.
    const inked = await page.locator('#charts figure[data-chart="connections"] canvas').evaluate((canvas) => {
      const { data } = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height);
      let colored = 0;
      for (let i = 0; i < data.length; i += 4) if (data[i + 3] > 0 && data[i + 2] > data[i] + 60) colored++;
      return colored;
    });
    assert.ok(inked > 20, `the line is drawn (${inked} blue pixels)`);
    await shot('metrics.png');
  });

  it('profiles the open database: operations by path pattern, and the .indexOn an unindexed query needs', async () => {
    await page.click('.tabs button[data-tab="profiler"]');
    await page.click('#profiler-start');
    await page.locator('#profiler-status[data-state="running"]').waitFor();
    // Thirty children of one location: shown as one pattern.
    for (let i = 0; i < 30; i++) assert.equal((await rest('PUT', `/visits/v${i}.json`, { body: { at: i } })).status, 200);
    assert.equal((await rest('GET', '/visits/v1.json')).status, 200);
    // A REST event stream of a query ordered by a child no .indexOn declares.
    const controller = new AbortController();
    const stream = await fetch(`${base}/visits.json?ns=${ns}&orderBy=%22at%22&limitToFirst=3`, {
      headers: { authorization: `Bearer ${TOKEN}`, accept: 'text/event-stream' },
      signal: controller.signal,
    });
    assert.equal(stream.status, 200);
    const rows = page.locator('#profiler-rows tr');
    await rows.filter({ hasText: 'rest-write' }).filter({ hasText: '/visits/$key' }).waitFor();
    const write = await rows.filter({ hasText: 'rest-write' }).filter({ hasText: '/visits/$key' }).locator('td').allTextContents();
    assert.equal(write[2], '30', `thirty writes under one pattern: ${write}`);
    const query = page.locator('#profiler-unindexed tr', { hasText: '/visits' });
    await query.waitFor();
    const cells = await query.locator('td').allTextContents();
    assert.deepEqual(cells.slice(0, 3), ['/visits', '/at', '1']);
    assert.deepEqual(JSON.parse(cells[3]), { rules: { visits: { '.indexOn': ['at'] } } });
    controller.abort();
    await shot('profiler.png');
    await page.click('#profiler-stop');
    await page.locator('#profiler-status', { hasText: /operations recorded/ }).waitFor();
    assert.equal(await page.locator('#profiler-start').isEnabled(), true);
  });

  it('says no trigger is declared when the server was started without --triggers', async () => {
    assert.deepEqual((await rest('GET', '/.admin/triggers')).json(), { triggers: [] });
    await page.click('.tabs button[data-tab="triggers"]');
    await page.locator('#triggers-none', { hasText: 'No trigger is declared' }).waitFor();
    await page.locator('#triggers-status', { hasText: 'read at' }).waitFor();
    assert.ok(await page.locator('#triggers-table').isHidden());
    assert.equal(await page.locator('#triggers-rows tr').count(), 0);
    await page.click('.tabs button[data-tab="data"]');
  });

  it('made no request beyond this server and threw no errors', () => {
    assert.deepEqual(offLoopback, []);
    assert.deepEqual(pageErrors, []);
  });
});

describe('the web console against a --dev server', { timeout: 90_000 }, () => {
  let server;
  let browser;

  before(async () => {
    fs.mkdirSync(SHOTS, { recursive: true });
    server = await HearthServer.start({ dev: true });
    browser = await launch();
  });

  after(async () => {
    if (browser) await within(10_000, 'closing chromium', () => browser.close()).catch((e) => console.error(e.message));
    if (server) await server.stop();
  });

  it('signs in as owner without asking and opens the database in the address', async () => {
    const put = await fetch(`http://127.0.0.1:${server.port}/a.json?ns=devdb`, {
      method: 'PUT',
      headers: { authorization: 'Bearer owner' },
      body: '{"b": true}',
      signal: AbortSignal.timeout(WAIT),
    });
    assert.equal(put.status, 200);
    const context = await browser.newContext();
    const page = await context.newPage();
    page.setDefaultTimeout(WAIT);
    await page.goto(`http://127.0.0.1:${server.port}/_/console/#ns=devdb`, { timeout: 15_000 });
    await page.locator('#database-rows tr[data-name="devdb"]').waitFor();
    assert.ok(await page.locator('#login').isHidden());
    await page.locator('#tree li.node[data-path="/a/b"] .value', { hasText: 'true' }).waitFor();
    await context.close();
  });

  it('lists the ruleset history, compares a ruleset with the stable one, rolls back to it, and changes the settings', async () => {
    const db = 'historydb';
    const base = `http://127.0.0.1:${server.port}`;
    const owner = async (method, endpoint, body) => {
      const response = await fetch(`${base}${endpoint}?ns=${db}`, {
        method,
        headers: { authorization: 'Bearer owner' },
        body,
        signal: AbortSignal.timeout(WAIT),
      });
      const text = await response.text();
      return { status: response.status, text, json: () => JSON.parse(text) };
    };
    const rules = (write) => `{\n  // everyone reads\n  "rules": {\n    ".read": true,\n    ".write": ${write}\n  }\n}`;
    const first = rules('false');
    const second = rules('"auth != null"');
    for (const text of [first, second]) {
      const put = await owner('PUT', '/.settings/rules.json', text);
      assert.equal(put.status, 200, put.text);
    }
    const listed = (await owner('GET', '/.settings/rulesets.json')).json();
    assert.deepEqual(listed.rulesets.map((ruleset) => ruleset.id), ['1', '2']);
    assert.deepEqual(listed.labels, { stable: '2' });

    const context = await browser.newContext({ viewport: { width: 1280, height: 760 } });
    const errors = [];
    try {
      const page = await context.newPage();
      page.setDefaultTimeout(WAIT);
      page.on('pageerror', (error) => errors.push(error.message));
      await page.goto(`${base}/_/console/#ns=${db}`, { timeout: 15_000 });
      await page.locator('#current-db', { hasText: db }).waitFor();
      await page.click('.tabs button[data-tab="history"]');
      await page.locator('#history-status', { hasText: `2 rulesets of ${db}; ruleset 2 is stable` }).waitFor();
      const row = (id) => page.locator(`#history-rows tr[data-id="${id}"]`);
      assert.deepEqual(await page.locator('#history-rows tr').evaluateAll((rows) => rows.map((r) => r.dataset.id)), ['2', '1'], 'newest first');
      assert.deepEqual(await row('2').locator('.badge').allTextContents(), ['stable']);
      assert.equal(await row('1').locator('.badge').count(), 0);
      const cells = await row('1').locator('td').allTextContents();
      assert.match(cells[1], /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/, `a creation time: ${cells}`);
      assert.equal(cells[2], 'an admin, over REST, from 127.0.0.1');

      // Ruleset 1 against the stable ruleset 2: what would change if it were made stable.
      await row('1').click();
      await page.locator('#history-diff-note', { hasText: 'From the stable ruleset 2 to ruleset 1: 1 line added (+), 1 line removed (-).' }).waitFor();
      assert.deepEqual(await page.locator('#history-diff [data-op="-"]').allTextContents(), ['-     ".write": "auth != null"']);
      assert.deepEqual(await page.locator('#history-diff [data-op="+"]').allTextContents(), ['+     ".write": false']);
      assert.equal(await page.locator('#history-diff [data-op=" "]').count(), 6, 'the lines both share');
      await page.screenshot({ path: path.join(SHOTS, 'rules-history.png') });

      // Make stable asks first; dismissed, nothing moves.
      const answer = (accept) =>
        new Promise((resolve) =>
          page.once('dialog', async (dialog) => {
            resolve(dialog.message());
            await (accept ? dialog.accept() : dialog.dismiss());
          }),
        );
      let asked = answer(false);
      await page.click('#history-make-stable');
      assert.equal(await asked, `Make ruleset 1 stable? ${db} uses its rules at once, in place of ruleset 2.`);
      assert.deepEqual((await owner('GET', '/.settings/ruleset_labels.json')).json(), { stable: '2' }, 'dismissed: nothing moved');

      asked = answer(true);
      await page.click('#history-make-stable');
      await asked;
      await page.locator('#history-status', { hasText: `ruleset 1 is stable; ${db} uses its rules now` }).waitFor();
      assert.deepEqual((await owner('GET', '/.settings/ruleset_labels.json')).json(), { stable: '1' });
      assert.equal((await owner('GET', '/.settings/rules.json')).text, first, 'ruleset 1 is in effect');
      assert.deepEqual(await row('1').locator('.badge').allTextContents(), ['stable']);
      assert.equal(await row('2').locator('.badge').count(), 0);
      assert.ok(await page.locator('#history-make-stable').isHidden(), 'the stable ruleset has no Make stable');
      await page.locator('#history-diff-note', { hasText: 'Ruleset 1 is stable' }).waitFor();
      assert.equal(await page.locator('#history-releases tr').count(), 3, 'two deploys and the rollback');
      assert.deepEqual((await page.locator('#history-releases tr').first().locator('td').allTextContents()).slice(2), ['1', '']);
      // The rules editor was read again.
      await page.waitForFunction((expected) => document.querySelector('#rules-text').value === expected, first, { timeout: WAIT });

      // A save in the rules editor is a new ruleset, and the stable one.
      await page.click('.tabs button[data-tab="rules"]');
      await page.locator('#rules-status', { hasText: `rules of ${db}` }).waitFor();
      await page.fill('#rules-text', rules('true'));
      await page.click('#rules-save');
      await page.locator('#rules-status', { hasText: 'saved' }).waitFor();
      await page.click('.tabs button[data-tab="history"]');
      await row('3').locator('.badge.stable').waitFor();

      // The diff is bounded: past 2,000 differing lines on each side it is not computed.
      const bounds = await page.evaluate(async () => {
        const { lineDiff } = await import('/_/console/diff.js');
        const text = (prefix, count) => Array.from({ length: count }, (_, i) => `${prefix}${i}`).join('\n');
        const shared = text('same', 50_000);
        return {
          atTheBound: lineDiff(text('a', 2000), text('b', 2000))?.length,
          pastIt: lineDiff(text('a', 2001), text('b', 2001)),
          longButClose: lineDiff(shared, `${shared}\nmore`)?.filter((line) => line.op !== ' '),
        };
      });
      assert.equal(bounds.atTheBound, 4000);
      assert.equal(bounds.pastIt, null);
      assert.deepEqual(bounds.longButClose, [{ op: '+', text: 'more' }]);

      // The settings, each saved when changed.
      await page.click('.tabs button[data-tab="settings"]');
      await page.locator('#settings-status', { hasText: `settings of ${db}` }).waitFor();
      assert.equal(await page.inputValue('#setting-write-size'), 'unlimited');
      assert.equal(await page.isChecked('#setting-strict'), true);
      await page.selectOption('#setting-write-size', 'small');
      await page.locator('#settings-status', { hasText: `defaultWriteSizeLimit of ${db} is "small" now` }).waitFor();
      assert.equal((await owner('GET', '/.settings/defaultWriteSizeLimit.json')).json(), 'small');
      await page.uncheck('#setting-strict');
      await page.locator('#settings-status', { hasText: `strictTriggerValidation of ${db} is false now` }).waitFor();
      assert.equal((await owner('GET', '/.settings/strictTriggerValidation.json')).json(), false);
      assert.equal(await page.inputValue('#setting-app-check'), 'unenforced');
      await page.selectOption('#setting-app-check', 'enforced');
      await page.locator('#settings-status', { hasText: `appCheck of ${db} is "enforced" now` }).waitFor();
      assert.equal((await owner('GET', '/.settings/appCheck.json')).json(), 'enforced');
      await page.selectOption('#setting-app-check', 'unenforced');
      await page.locator('#settings-status', { hasText: `appCheck of ${db} is "unenforced" now` }).waitFor();
      // A quota typed and left (Tab, as a user leaves a field: the browser's own change event,
      // so that no other is left to fire later) is saved; emptied, it is none again.
      assert.equal(await page.inputValue('#quota-writes'), '');
      await page.fill('#quota-writes', '250');
      await page.press('#quota-writes', 'Tab');
      await page.locator('#settings-status', { hasText: `quotas of ${db} is` }).waitFor();
      assert.equal((await owner('GET', '/.settings/quotas.json')).json().writesPerSecond, 250);
      await page.fill('#quota-writes', '0');
      await page.press('#quota-writes', 'Tab');
      await page.locator('#settings-status.error', { hasText: 'quotas was not changed' }).waitFor();
      assert.equal(await page.inputValue('#quota-writes'), '250', 'the field goes back to what the server holds');
      await page.fill('#quota-writes', '');
      await page.press('#quota-writes', 'Tab');
      await page.locator('#settings-status:not(.error)', { hasText: `quotas of ${db} is` }).waitFor();
      assert.equal((await owner('GET', '/.settings/quotas.json')).json().writesPerSecond, null);

      // A refused change is shown on the status line, and the control goes back.
      await page.route('**/.settings/defaultWriteSizeLimit.json*', (route) =>
        route.request().method() === 'PUT'
          ? route.fulfill({ status: 503, contentType: 'application/json', body: '{"error": "the database refuses writes"}' })
          : route.continue(),
      );
      await page.selectOption('#setting-write-size', 'medium');
      await page.locator('#settings-status.error', { hasText: 'defaultWriteSizeLimit was not changed: the database refuses writes' }).waitFor();
      assert.equal(await page.inputValue('#setting-write-size'), 'small');
      await page.unroute('**/.settings/defaultWriteSizeLimit.json*');

      // A change made elsewhere shows when the tab is opened again.
      assert.equal((await owner('PUT', '/.settings/defaultWriteSizeLimit.json', '"large"')).status, 200);
      await page.click('.tabs button[data-tab="data"]');
      await page.click('.tabs button[data-tab="settings"]');
      await page.locator('#settings-status', { hasText: `settings of ${db}` }).waitFor();
      assert.equal(await page.inputValue('#setting-write-size'), 'large');
      assert.ok(!(await page.locator('#settings-status').getAttribute('class')).includes('error'));
    } finally {
      await context.close();
    }
    assert.deepEqual(errors, []);
  });

  it('turns auditing on, lists the entries of a search, filters them by uid, and erases a uid once confirmed', async () => {
    const db = 'auditdb';
    const base = `http://127.0.0.1:${server.port}`;
    const call = async (method, endpoint, { body, token = 'owner', query = '' } = {}) => {
      const auth = token === 'owner' ? '' : `&auth=${token}`;
      const response = await fetch(`${base}${endpoint}?ns=${db}${auth}${query}`, {
        method,
        headers: token === 'owner' ? { authorization: 'Bearer owner' } : {},
        body,
        signal: AbortSignal.timeout(WAIT),
      });
      const text = await response.text();
      return { status: response.status, text, json: () => JSON.parse(text) };
    };
    /** An unsigned mock token of `uid`, which a --dev server accepts as the user's. */
    const userOf = (uid) => {
      const part = (value) => Buffer.from(JSON.stringify(value)).toString('base64url');
      return `${part({ alg: 'none', typ: 'JWT' })}.${part({ sub: uid, user_id: uid, iat: Math.floor(Date.now() / 1000) })}.`;
    };
    const trail = async (query = '') => {
      const answer = await call('GET', '/.settings/auditTrail.json', { query });
      assert.equal(answer.status, 200, answer.text);
      return answer.text.split('\n').filter(Boolean).map((line) => JSON.parse(line));
    };
    const rules = { rules: { '.read': true, rooms: { $room: { '.write': 'auth != null' } } } };
    assert.equal((await call('PUT', '/.settings/rules.json', { body: JSON.stringify(rules) })).status, 200);

    const context = await browser.newContext({ viewport: { width: 1280, height: 760 } });
    const errors = [];
    try {
      const page = await context.newPage();
      page.setDefaultTimeout(WAIT);
      page.on('pageerror', (error) => errors.push(error.message));
      await page.goto(`${base}/_/console/#ns=${db}`, { timeout: 15_000 });
      await page.locator('#current-db', { hasText: db }).waitFor();

      // The switch and the retention, each saved at once, the effective values shown.
      await page.click('.tabs button[data-tab="audit"]');
      await page.locator('#audit-setting-status', { hasText: 'writes are not audited (entries are kept 30 days)' }).waitFor();
      assert.equal(await page.isChecked('#audit-enabled'), false);
      assert.equal(await page.inputValue('#audit-retention'), '30');
      await page.check('#audit-enabled');
      await page.locator('#audit-setting-status', { hasText: 'saved: writes are audited; entries are kept 30 days' }).waitFor();
      assert.deepEqual((await call('GET', '/.settings/audit.json')).json(), { enabled: true, retentionDays: 30 });
      await page.fill('#audit-retention', '7');
      await page.press('#audit-retention', 'Tab');
      await page.locator('#audit-setting-status', { hasText: 'saved: writes are audited; entries are kept 7 days' }).waitFor();
      assert.deepEqual((await call('GET', '/.settings/audit.json')).json(), { enabled: true, retentionDays: 7 });

      // Writes: two of ada's and one of bob's over REST with their tokens, a set and an
      // update of the owner's.
      const ada = userOf('ada');
      const bob = userOf('bob');
      for (const [endpoint, method, body, token] of [
        ['/rooms/r1/title.json', 'PUT', '"One"', ada],
        ['/rooms/r2/title.json', 'PUT', '"Two"', bob],
        ['/rooms/r1/topic.json', 'PUT', '"cats"', ada],
        ['/rooms/r3.json', 'PUT', '{"title": "Three"}', 'owner'],
        ['/rooms.json', 'PATCH', '{"r1/pinned": true, "r3/pinned": false}', 'owner'],
      ]) {
        const written = await call(method, endpoint, { body, token });
        assert.equal(written.status, 200, `${method} ${endpoint}: ${written.text}`);
      }
      // The trail's thread copies entries a moment after their writes are acknowledged.
      for (let tries = 0; (await trail()).length < 5; tries++) {
        assert.ok(tries < 600, 'the five writes are traced');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }

      const rows = page.locator('#audit-rows tr');
      const table = () =>
        rows.evaluateAll((trs) =>
          trs.map((tr) => {
            const cells = [...tr.children].map((td) => td.textContent);
            return { op: cells[1], path: tr.querySelector('.audit-path').textContent, uid: cells[3], transport: cells[5], rules: cells[7] };
          }),
        );
      await page.click('#audit-search');
      await page.locator('#audit-status', { hasText: '5 entries, oldest first' }).waitFor();
      assert.deepEqual(await table(), [
        { op: 'set', path: '/rooms/r1/title', uid: 'ada', transport: 'rest', rules: '/rooms/$room/.write' },
        { op: 'set', path: '/rooms/r2/title', uid: 'bob', transport: 'rest', rules: '/rooms/$room/.write' },
        { op: 'set', path: '/rooms/r1/topic', uid: 'ada', transport: 'rest', rules: '/rooms/$room/.write' },
        { op: 'set', path: '/rooms/r3', uid: '—', transport: 'rest', rules: 'admin' },
        { op: 'update', path: '/rooms', uid: '—', transport: 'rest', rules: 'admin' },
      ]);
      assert.deepEqual(
        (await rows.nth(4).locator('.audit-paths li').allTextContents()).sort(),
        ['/rooms/r1/pinned', '/rooms/r3/pinned'],
        "the update's paths",
      );
      const first = await rows.first().locator('td').allTextContents();
      assert.match(first[0], /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}$/, `a local time: ${first}`);
      assert.equal(first[6], '127.0.0.1');
      assert.ok(await page.locator('#audit-more').isHidden(), 'one page holds them all');
      await page.screenshot({ path: path.join(SHOTS, 'audit.png') });

      // Filtered by uid, and by path.
      await page.fill('#audit-uid', 'ada');
      await page.click('#audit-search');
      await page.locator('#audit-status', { hasText: '2 entries, oldest first' }).waitFor();
      assert.deepEqual((await table()).map((row) => [row.uid, row.path]), [['ada', '/rooms/r1/title'], ['ada', '/rooms/r1/topic']]);
      await page.fill('#audit-uid', '');
      await page.fill('#audit-path', 'rooms/r3');
      await page.click('#audit-search');
      // The same count as the search before: wait for the owner's rows themselves.
      await page.locator('#audit-rows tr:not([data-uid])').nth(1).waitFor();
      await page.locator('#audit-status', { hasText: '2 entries, oldest first' }).waitFor();
      assert.deepEqual((await table()).map((row) => [row.op, row.path]), [['set', '/rooms/r3'], ['update', '/rooms']]);
      await page.fill('#audit-path', '');

      // Erasing asks first; dismissed, nothing goes.
      const answer = (accept) =>
        new Promise((resolve) =>
          page.once('dialog', async (dialog) => {
            resolve(dialog.message());
            await (accept ? dialog.accept() : dialog.dismiss());
          }),
        );
      await page.fill('#audit-erase-uid', 'ada');
      let asked = answer(false);
      await page.click('#audit-erase-go');
      assert.equal(await asked, `Erase every audit entry of ada in ${db}? They cannot be brought back.`);
      assert.equal((await trail('&uid=ada')).length, 2, 'dismissed: nothing erased');
      asked = answer(true);
      await page.click('#audit-erase-go');
      await asked;
      await page.locator('#audit-erase-status', { hasText: '2 entries erased' }).waitFor();
      assert.deepEqual(await trail('&uid=ada'), []);
      await page.click('#audit-search');
      await page.locator('#audit-status', { hasText: '3 entries, oldest first' }).waitFor();
      assert.deepEqual((await table()).map((row) => row.uid), ['bob', '—', '—']);

      // A refused value is said next to the box, and the box goes back to the server's.
      await page.fill('#audit-retention', '0');
      await page.press('#audit-retention', 'Tab');
      await page.locator('#audit-setting-status.error', { hasText: 'not changed' }).waitFor();
      assert.equal(await page.inputValue('#audit-retention'), '7');
      assert.equal(await page.isChecked('#audit-enabled'), true);
    } finally {
      await context.close();
    }
    assert.deepEqual(errors, []);
  });

  it('works over https, its realtime connection over wss, behind a TLS-terminating proxy', async () => {
    const proxy = await startTlsProxy(server.port);
    const context = await browser.newContext({ ignoreHTTPSErrors: true });
    try {
      const page = await context.newPage();
      page.setDefaultTimeout(WAIT);
      const sockets = [];
      page.on('websocket', (socket) => sockets.push(socket.url()));
      await page.goto(`${proxy.url}/_/console/#ns=devdb`, { timeout: 15_000 });
      await page.locator('#status[data-state="online"]').waitFor({ timeout: 15_000 });
      const value = page.locator('#tree li.node[data-path="/a/b"] .value');
      await value.filter({ hasText: 'true' }).waitFor();
      const put = await fetch(`http://127.0.0.1:${server.port}/a/b.json?ns=devdb`, {
        method: 'PUT',
        headers: { authorization: 'Bearer owner' },
        body: 'false',
        signal: AbortSignal.timeout(WAIT),
      });
      assert.equal(put.status, 200);
      await value.filter({ hasText: 'false' }).waitFor();
      assert.ok(sockets.length > 0, 'a realtime connection');
      for (const url of sockets) assert.ok(url.startsWith(`wss://127.0.0.1:${proxy.port}/.ws?`), url);
    } finally {
      await context.close();
      await proxy.close();
    }
  });
});

describe('the web console against a server with declared triggers', { timeout: 90_000 }, () => {
  const db = 'triggersdb';
  // The trigger that fails: nothing listens at its receiver's port, and one attempt is all
  // it gets. Its second event's key has markup in it: the console must show it as text.
  const key = 'report-42';
  const markup = '<img src=x onerror=alert(1)>';
  let dir;
  let server;
  let browser;
  let base;
  let natsPort;

  const admin = async (method, endpoint, body) => {
    const response = await fetch(`${base}${endpoint}`, {
      method,
      headers: { authorization: 'Bearer owner' },
      body,
      signal: AbortSignal.timeout(WAIT),
    });
    const text = await response.text();
    return { status: response.status, text, json: () => JSON.parse(text) };
  };
  const deadLetters = async () => {
    const answer = await admin('GET', '/.admin/triggers/doomed/dead');
    assert.equal(answer.status, 200, answer.text);
    return answer.json();
  };
  const write = async (name, value) => {
    const answer = await admin('PUT', `/jobs/${encodeURIComponent(name)}.json?ns=${db}`, JSON.stringify(value));
    assert.equal(answer.status, 200, answer.text);
  };

  before(async () => {
    fs.mkdirSync(SHOTS, { recursive: true });
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-console-triggers-'));
    const nobody = await freePort();
    natsPort = await freePort();
    const file = path.join(dir, 'triggers.json');
    fs.writeFileSync(
      file,
      JSON.stringify({
        triggers: {
          doomed: { path: '/jobs/{id}', http: { url: `http://127.0.0.1:${nobody}/hooks/doomed` }, maxAttempts: 1 },
          quiet: {
            path: '/never/{id}',
            event: 'created',
            nats: { url: `nats://console:s3cret@127.0.0.1:${natsPort}`, subject: 'hearth.never' },
          },
        },
      }),
    );
    server = await HearthServer.start({ dev: true, extraArgs: ['--triggers', file] });
    base = `http://127.0.0.1:${server.port}`;
    browser = await launch();
  });

  after(async () => {
    if (browser) await within(10_000, 'closing chromium', () => browser.close()).catch((e) => console.error(e.message));
    if (server) await server.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('lists the triggers, shows a dead letter, sends it again and drops the dead letters once confirmed', async () => {
    await write(key, { n: 1 });
    const context = await browser.newContext({ viewport: { width: 1280, height: 760 } });
    const errors = [];
    try {
      const page = await context.newPage();
      page.setDefaultTimeout(WAIT);
      page.on('pageerror', (error) => errors.push(error.message));
      await page.goto(`${base}/_/console/`, { timeout: 15_000 });
      await page.locator(`#database-rows tr[data-name="${db}"]`).waitFor();
      await page.click('.tabs button[data-tab="triggers"]');

      // Both triggers, each with its figures; a destination's password is not shown.
      const trigger = (name) => page.locator(`#triggers-rows tr.trigger[data-name="${name}"]`);
      const figure = (name, field) => trigger(name).locator(`td[data-field="${field}"]`);
      const detail = (name) => page.locator(`#triggers-rows tr.trigger-detail[data-name="${name}"]`);
      await trigger('doomed').waitFor();
      await trigger('quiet').waitFor();
      assert.ok(await page.locator('#triggers-none').isHidden());
      assert.deepEqual(
        await page.locator('#triggers-rows tr.trigger').evaluateAll((rows) => rows.map((row) => row.dataset.name)),
        ['doomed', 'quiet'],
      );
      const quiet = await trigger('quiet').locator('td').allTextContents();
      assert.deepEqual(quiet.slice(1), [
        '/never/{id}',
        'created',
        `nats://•••@127.0.0.1:${natsPort} → hearth.never`,
        '0', '0', '0', '0', '0', '0.0',
      ]);
      assert.ok(!(await page.content()).includes('s3cret'), 'the NATS password is not on the page');
      // The failing receiver: its one attempt failed, and the event is a dead letter.
      await figure('doomed', 'deadLetters').filter({ hasText: /^1$/ }).waitFor({ timeout: 15_000 });
      const doomed = await trigger('doomed').locator('td').allTextContents();
      assert.deepEqual(doomed.slice(1, 3), ['/jobs/{id}', 'written']);
      assert.match(doomed[3], /^http:\/\/127\.0\.0\.1:\d+\/hooks\/doomed$/);
      assert.deepEqual(doomed.slice(4), ['0', '1', '1', '0', '0', '0.0'], 'delivered, failed, dead letters, dropped, pending, lag');

      // Opened: its databases and its dead letter, the event's ref shown as text.
      assert.ok(await detail('doomed').isHidden());
      await trigger('doomed').click();
      const letters = detail('doomed').locator('.trigger-dead tbody tr');
      await letters.first().waitFor();
      assert.equal(await letters.count(), 1);
      const [letter] = await deadLetters();
      const cells = await letters.first().locator('td').allTextContents();
      assert.deepEqual([cells[0], cells[1], cells[2], cells[5]], [db, letter.id, '1', `jobs/${key}`]);
      assert.equal(cells[3], letter.error);
      assert.match(cells[3], /refused|connect/i, `the receiver could not be reached: ${cells[3]}`);
      assert.match(cells[4], /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}$/, `when: ${cells[4]}`);
      const database = await detail('doomed').locator(`.trigger-databases tr[data-database="${db}"] td`).allTextContents();
      assert.deepEqual(database.slice(0, 3), [db, '0', '0'], 'nothing pending');
      assert.equal(database[5], 'no', 'this node delivers');
      assert.ok(await detail('quiet').isHidden(), 'only the trigger opened shows its detail');
      await page.screenshot({ path: path.join(SHOTS, 'triggers.png') });

      // Send again: the receiver still cannot be reached, so the letter comes back after one
      // more failed attempt.
      const firstDeadAt = letter.deadAt;
      await page.click('#triggers-rows tr.trigger-detail[data-name="doomed"] .trigger-retry');
      await detail('doomed').locator('.trigger-letters-status', { hasText: '1 dead letter sent again' }).waitFor();
      await figure('doomed', 'failed').filter({ hasText: /^2$/ }).waitFor({ timeout: 15_000 });
      await figure('doomed', 'deadLetters').filter({ hasText: /^1$/ }).waitFor({ timeout: 15_000 });
      await letters.first().waitFor();
      const again = await deadLetters();
      assert.equal(again.length, 1);
      assert.ok(again[0].deadAt >= firstDeadAt, 'dead again, later');
      assert.equal(again[0].event.ref, `jobs/${key}`);
      assert.equal(await letters.locator('td:nth-child(6)').textContent(), `jobs/${key}`);

      // A second failing write shows up without a click (the tab reads again by itself), its
      // ref as text, not markup.
      await write(markup, { n: 2 });
      await page.waitForFunction(
        () => document.querySelectorAll('#triggers-rows tr.trigger-detail[data-name="doomed"] .trigger-dead tbody tr').length === 2,
        undefined,
        { timeout: 15_000 },
      );
      assert.equal(await figure('doomed', 'deadLetters').textContent(), '2');
      assert.deepEqual(await letters.locator('td:nth-child(6)').allTextContents(), [`jobs/${key}`, `jobs/${markup}`]);
      assert.equal(await page.locator('#tab-triggers img').count(), 0, 'the ref is text, not markup');

      // Drop asks first; dismissed, nothing goes.
      const answer = (accept) =>
        new Promise((resolve) =>
          page.once('dialog', async (dialog) => {
            resolve(dialog.message());
            await (accept ? dialog.accept() : dialog.dismiss());
          }),
        );
      let asked = answer(false);
      await page.click('#triggers-rows tr.trigger-detail[data-name="doomed"] .trigger-drop');
      assert.equal(
        await asked,
        'Drop every dead letter of doomed (2 dead letters shown)? Their events will never be delivered, and cannot be brought back.',
      );
      assert.equal((await deadLetters()).length, 2, 'dismissed: nothing dropped');
      asked = answer(true);
      await page.click('#triggers-rows tr.trigger-detail[data-name="doomed"] .trigger-drop');
      await asked;
      await detail('doomed').locator('.trigger-letters-status', { hasText: '2 dead letters dropped' }).waitFor();
      await detail('doomed').locator('.trigger-no-letter', { hasText: 'No dead letter.' }).waitFor();
      assert.equal(await letters.count(), 0);
      assert.deepEqual(await deadLetters(), []);
      await figure('doomed', 'deadLetters').filter({ hasText: /^0$/ }).waitFor();
      assert.deepEqual(
        (await trigger('doomed').locator('td').allTextContents()).slice(4),
        ['0', '3', '0', '0', '0', '0.0'],
        'three failed attempts, no dead letter left',
      );
      assert.ok(await page.locator('#triggers-rows tr.trigger-detail[data-name="doomed"] .trigger-retry').isDisabled());
      assert.ok(await page.locator('#triggers-rows tr.trigger-detail[data-name="doomed"] .trigger-drop').isDisabled());

      // Refresh reads at once; another tab stops the reading.
      await Promise.all([
        page.waitForRequest((request) => request.url().endsWith('/.admin/triggers')),
        page.click('#triggers-refresh'),
      ]);
      await page.click('.tabs button[data-tab="data"]');
      const reads = [];
      page.on('request', (request) => {
        if (request.url().includes('/.admin/triggers')) reads.push(request.url());
      });
      await new Promise((resolve) => setTimeout(resolve, 4_000));
      assert.deepEqual(reads, [], 'no reading while the tab is hidden');
    } finally {
      await context.close();
    }
    assert.deepEqual(errors, []);
  });

  it('reads the declaration when opened, refuses a wrong one with the server\'s reason, and saves another', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const errors = [];
    try {
      const page = await context.newPage();
      page.setDefaultTimeout(WAIT);
      page.on('pageerror', (error) => errors.push(error.message));
      const declarationReads = [];
      page.on('request', (request) => {
        if (request.url().endsWith('/.admin/triggers/declaration')) declarationReads.push(request.method());
      });
      await page.goto(`${base}/_/console/`, { timeout: 15_000 });
      await page.locator(`#database-rows tr[data-name="${db}"]`).waitFor();
      await page.click('.tabs button[data-tab="triggers"]');
      await page.locator('#triggers-rows tr.trigger[data-name="doomed"]').waitFor();
      assert.deepEqual(declarationReads, [], 'not read (nor its credentials shown) until opened');

      // Opened: the file as the server holds it.
      await page.click('#triggers-declaration summary');
      await page.locator('#triggers-declaration-status', { hasText: 'read at' }).waitFor();
      const text = page.locator('#triggers-declaration-text');
      const read = JSON.parse(await text.inputValue());
      assert.deepEqual(Object.keys(read.triggers), ['doomed', 'quiet']);
      assert.equal(await text.inputValue(), (await admin('GET', '/.admin/triggers/declaration')).text);

      // A wrong declaration: refused whole, with the trigger named; nothing changes.
      const wrong = structuredClone(read);
      wrong.triggers.fresh = { path: '/fresh/{id}', http: { url: 'http://127.0.0.1:9/x' }, retries: 3 };
      await text.fill(JSON.stringify(wrong, null, 2));
      await page.click('#triggers-declaration-save');
      const error = page.locator('#triggers-declaration-error');
      await error.filter({ hasText: 'Not saved' }).waitFor();
      assert.match(await error.textContent(), /fresh/, await error.textContent());
      assert.deepEqual(Object.keys((await admin('GET', '/.admin/triggers/declaration')).json().triggers), ['doomed', 'quiet']);

      // A right one: saved, applied, and in the table at once.
      const right = structuredClone(read);
      right.triggers.fresh = { path: '/fresh/{id}', event: 'deleted', http: { url: 'http://127.0.0.1:9/x' } };
      await text.fill(JSON.stringify(right, null, 2));
      assert.equal(await error.textContent(), '', 'typing clears the error');
      await page.click('#triggers-declaration-save');
      await page.locator('#triggers-declaration-status', { hasText: '3 triggers declared' }).waitFor();
      await page.locator('#triggers-rows tr.trigger[data-name="fresh"]').waitFor();
      const fresh = await page.locator('#triggers-rows tr.trigger[data-name="fresh"] td').allTextContents();
      assert.deepEqual(fresh.slice(1, 3), ['/fresh/{id}', 'deleted']);
      assert.deepEqual((await admin('GET', '/.admin/triggers/declaration')).json(), right);
      const names = (await admin('GET', '/.admin/triggers')).json().triggers.map((t) => t.name).sort();
      assert.deepEqual(names, ['doomed', 'fresh', 'quiet']);
      await page.screenshot({ path: path.join(SHOTS, 'triggers-declaration.png') });
    } finally {
      await context.close();
    }
    assert.deepEqual(errors, []);
  });
});

/**
 * An https server on a free port with a certificate made here (openssl), passing every
 * request and WebSocket upgrade on to the server at `port` over plain HTTP, as a reverse
 * proxy that terminates TLS does.
 */
async function startTlsProxy(port) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-console-tls-'));
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-keyout', path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem'), '-days', '1',
    '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1',
  ], { stdio: 'ignore' });
  const server = https.createServer(
    { key: fs.readFileSync(path.join(dir, 'key.pem')), cert: fs.readFileSync(path.join(dir, 'cert.pem')) },
    (request, response) => {
      const upstream = http.request(
        { host: '127.0.0.1', port, method: request.method, path: request.url, headers: request.headers },
        (answer) => {
          response.writeHead(answer.statusCode, answer.headers);
          answer.pipe(response);
        },
      );
      upstream.on('error', () => response.destroy());
      request.pipe(upstream);
    },
  );
  server.on('upgrade', (request, socket, head) => {
    const upstream = net.connect(port, '127.0.0.1', () => {
      let lines = `${request.method} ${request.url} HTTP/1.1\r\n`;
      for (let i = 0; i < request.rawHeaders.length; i += 2) lines += `${request.rawHeaders[i]}: ${request.rawHeaders[i + 1]}\r\n`;
      upstream.write(`${lines}\r\n`);
      upstream.write(head);
      upstream.pipe(socket);
      socket.pipe(upstream);
    });
    upstream.on('error', () => socket.destroy());
    socket.on('error', () => upstream.destroy());
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port: proxyPort } = server.address();
  return {
    port: proxyPort,
    url: `https://127.0.0.1:${proxyPort}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
        fs.rmSync(dir, { recursive: true, force: true });
      }),
  };
}
