// Declared triggers (`hearth serve --triggers FILE`, docs/triggers.md) against the real
// binary and a real HTTP receiver: each change arrives as the CloudEvent the Firebase SDK
// reads; a receiver that fails is retried until it recovers, with the lag visible; one that
// never recovers fills the dead letters, which an operator sends again or drops; and a
// SIGKILL in the middle of writes and deliveries loses no acknowledged change, delivers
// nothing that did not survive, and keeps each database's order.

import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { set } from 'firebase/database';
import { useHearth, T } from '../lib/harness.mjs';
import { freePort } from '../lib/server.mjs';
import { waitFor } from '../lib/util.mjs';
import { OWNER, baseURL, rest, restURL } from './rest/rest-client.mjs';

// The receiver: every event taken, by trigger (its URL's last segment); a trigger whose
// mode is 'fail' answers 500.
const received = { msgs: [], items: [], doomed: [], batched: [], live: [], moved: [], big: [] };
const requests = { batched: [] }; // the events per request
const failing = new Set(['doomed']);
const slow = new Set(); // answered after 5 ms
const receiver = http.createServer((request, response) => {
  let body = '';
  request.on('data', (chunk) => { body += chunk; });
  request.on('end', () => {
    const trigger = request.url.split('/').at(-1);
    if (trigger === 'moved') {
      // Moved elsewhere: a redirect is no delivery (a client following it would GET).
      received.moved.push(body);
      response.writeHead(301, { location: `http://127.0.0.1:${port}/hooks/msgs` }).end();
      return;
    }
    if (failing.has(trigger)) {
      response.writeHead(500).end('not now');
      return;
    }
    const parsed = JSON.parse(body);
    const events = Array.isArray(parsed) ? parsed : [parsed];
    requests[trigger]?.push({ type: request.headers['content-type'], count: events.length });
    for (const event of events) received[trigger].push({ type: request.headers['content-type'], event });
    if (slow.has(trigger)) setTimeout(() => response.writeHead(204).end(), 5);
    else response.writeHead(204).end();
  });
});
const port = await freePort();
await new Promise((resolve) => receiver.listen(port, '127.0.0.1', resolve));
const hook = (name) => ({ url: `http://127.0.0.1:${port}/hooks/${name}` });

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-triggers-'));
const file = path.join(dir, 'triggers.json');
const DECLARED = {
  triggers: {
    msgs: { path: '/rooms/{room}/messages/{id}', event: 'created', http: hook('msgs') },
    items: { path: '/items/{id}', http: hook('items') },
    doomed: { path: '/doomed/{id}', http: hook('doomed'), maxAttempts: 2 },
    batched: { path: '/batched/{id}', http: hook('batched'), batchSize: 10 },
    moved: { path: '/moved/{id}', http: hook('moved') },
    big: { path: '/big/{id}', http: hook('big') },
  },
};
fs.writeFileSync(file, JSON.stringify(DECLARED));

describe('declared triggers', () => {
  const h = useHearth({ extraArgs: ['--triggers', file] });
  after(() => {
    receiver.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const admin = (url, init = {}) => rest(url, { ...init, headers: OWNER });
  const status = async () => {
    const answer = await admin(`${baseURL(h.server)}/.admin/triggers`);
    assert.equal(answer.status, 200, answer.text);
    return Object.fromEntries(answer.json.triggers.map((t) => [t.name, t]));
  };
  const seqOf = (event) => Number(event.id.split('.')[1]);

  it('delivers each change as the CloudEvent the SDK reads', T, async () => {
    const ns = h.ns('shape');
    const client = h.client(ns, { emulatorMockUserToken: { sub: 'ada', user_id: 'ada' } });
    await set(client.ref('rooms/r1/messages/m1'), { text: 'hi' });
    await set(client.ref('rooms/r1/messages/m1/text'), 'changed'); // an update: not 'created'
    const [{ type, event }] = await waitFor(
      () => received.msgs.filter((m) => m.event.instance === ns).length === 1 && received.msgs.filter((m) => m.event.instance === ns),
      10_000,
    );
    assert.match(type, /^application\/cloudevents\+json/);
    assert.equal(event.specversion, '1.0');
    assert.equal(event.type, 'google.firebase.database.ref.v1.created');
    assert.equal(event.ref, 'rooms/r1/messages/m1');
    assert.deepEqual(event.params, { room: 'r1', id: 'm1' });
    assert.equal(event.authtype, 'app_user');
    assert.equal(event.authid, 'ada');
    assert.equal(event.data.data, null);
    assert.deepEqual(event.data.delta, { text: 'hi' });
    assert.match(event.source, new RegExp(`/instances/${ns}$`));
    // Only admins see the triggers' state.
    assert.equal((await rest(`${baseURL(h.server)}/.admin/triggers`)).status, 401);
    const msgs = (await status()).msgs;
    assert.equal(msgs.event, 'google.firebase.database.ref.v1.created');
    assert.ok(msgs.delivered >= 1);
  });

  it('retries a failing receiver until it recovers, in order, with the lag visible', T, async () => {
    const ns = h.ns('retry');
    failing.add('items');
    for (let i = 0; i < 20; i++) {
      const answer = await admin(restURL(h.server, ns, `items/i${i}`), { method: 'PUT', body: i });
      assert.equal(answer.status, 200);
    }
    await waitFor(async () => {
      const items = (await status()).items;
      return items.failed >= 2 && items.pending >= 20;
    }, 10_000, 'failures and pending events');
    const metrics = await (await fetch(`${baseURL(h.server)}/metrics`, { headers: OWNER })).text();
    assert.match(metrics, /hearth_trigger_lag_events\{trigger="items"\} ([2-9]\d|\d{3,})/);
    assert.match(metrics, /hearth_trigger_deliveries_total\{trigger="items",outcome="failed"\} [1-9]/);
    failing.delete('items');
    const mine = () => received.items.filter((m) => m.event.instance === ns).map((m) => m.event);
    await waitFor(() => mine().length >= 20, 20_000, 'the 20 events after recovery');
    assert.deepEqual(mine().map((e) => e.ref), Array.from({ length: 20 }, (_, i) => `items/i${i}`));
    await waitFor(async () => (await status()).items.pending === 0, 10_000);
  });

  it('posts a backlog in batches when asked to, in order', T, async () => {
    const ns = h.ns('batch');
    failing.add('batched');
    for (let i = 0; i < 25; i++) {
      await admin(restURL(h.server, ns, `batched/b${String(i).padStart(2, '0')}`), { method: 'PUT', body: i });
    }
    await waitFor(async () => (await status()).batched.pending >= 25, 10_000, 'a backlog');
    failing.delete('batched');
    const mine = () => received.batched.filter((m) => m.event.instance === ns).map((m) => m.event);
    await waitFor(() => mine().length >= 25, 20_000, 'the backlog delivered');
    assert.deepEqual(mine().map((e) => e.ref), Array.from({ length: 25 }, (_, i) => `batched/b${String(i).padStart(2, '0')}`));
    const batches = requests.batched.filter((r) => r.count > 1);
    assert.ok(batches.length >= 2, JSON.stringify(requests.batched));
    assert.ok(batches.every((r) => r.count <= 10 && /^application\/cloudevents-batch\+json/.test(r.type)));
  });

  it('takes a redirect for a failure, and drops an event too large for the log without failing it', { timeout: 60_000 }, async () => {
    const ns = h.ns('odd');
    await admin(restURL(h.server, ns, 'moved/a'), { method: 'PUT', body: 1 });
    await waitFor(async () => (await status()).moved.failed >= 2, 10_000, 'failed attempts at a redirect');
    const moved = (await status()).moved;
    assert.equal(moved.delivered, 0);
    assert.equal(moved.pending, 1);
    assert.ok(!received.msgs.some((m) => m.event.instance === ns), 'nothing reached the redirect\'s target');
    // About a megabyte of control characters: within the write's limit, six times that as
    // the event's JSON, more than a log record takes.
    const odd = '\u0001'.repeat(1_000_000);
    const wrote = await admin(restURL(h.server, ns, 'big/a'), { method: 'PUT', body: odd });
    assert.equal(wrote.status, 200, wrote.text);
    await waitFor(async () => (await status()).big.dropped === 1, 10_000, 'the event dropped');
    // The log goes on: later writes are acknowledged and their events delivered.
    await admin(restURL(h.server, ns, 'big/b'), { method: 'PUT', body: 2 });
    await waitFor(() => received.big.some((m) => m.event.ref === 'big/b'), 10_000, 'the next event');
    assert.ok(!received.big.some((m) => m.event.ref === 'big/a'));
  });

  it('moves what never succeeds to the dead letters, sent again or dropped on request', T, async () => {
    const ns = h.ns('dead');
    const url = `${baseURL(h.server)}/.admin/triggers/doomed`;
    await admin(restURL(h.server, ns, 'doomed/a'), { method: 'PUT', body: 'a' });
    const letters = await waitFor(async () => {
      const answer = await admin(`${url}/dead`);
      return answer.json.length >= 1 && answer.json;
    }, 10_000, 'a dead letter');
    assert.equal(letters[0].database, ns);
    assert.equal(letters[0].attempts, 2);
    assert.match(letters[0].error, /500/);
    assert.equal(letters[0].event.ref, 'doomed/a');
    assert.equal((await status()).doomed.deadLetters, 1);
    // Sent again once the receiver works.
    failing.delete('doomed');
    assert.deepEqual((await admin(`${url}/retry`, { method: 'POST' })).json, { retried: 1, keptForOtherOwners: 0 });
    await waitFor(() => received.doomed.some((m) => m.event.instance === ns), 10_000, 'the retried event');
    assert.deepEqual((await admin(`${url}/dead`)).json, []);
    // Dropped.
    failing.add('doomed');
    await admin(restURL(h.server, ns, 'doomed/b'), { method: 'PUT', body: 'b' });
    await waitFor(async () => (await admin(`${url}/dead`)).json.length === 1, 10_000);
    assert.deepEqual((await admin(`${url}/dead`, { method: 'DELETE' })).json, { dropped: 1 });
    assert.deepEqual((await admin(`${url}/dead`)).json, []);
    assert.equal((await admin(`${baseURL(h.server)}/.admin/triggers/nope/dead`)).status, 404);
  });

  it('loses no acknowledged change across a SIGKILL, delivers nothing that was lost, and keeps the order', { timeout: 90_000 }, async () => {
    const ns = h.ns('crash');
    // A slow receiver: events wait in the outbox when the process dies.
    slow.add('items');
    const acked = new Set();
    let stop = false;
    const writers = Array.from({ length: 8 }, async (_, w) => {
      for (let i = 0; !stop; i++) {
        const key = `k${w}-${i}`;
        try {
          const answer = await admin(restURL(h.server, ns, `items/${key}`), { method: 'PUT', body: i });
          if (answer.status === 200) acked.add(`items/${key}`);
        } catch {
          return; // the server is gone
        }
      }
    });
    await waitFor(() => acked.size >= 300, 30_000, '300 acknowledged writes');
    await h.server.kill('SIGKILL');
    stop = true;
    await Promise.all(writers);
    const mine = () => received.items.filter((m) => m.event.instance === ns).map((m) => m.event);
    const before = new Set(mine().map((e) => e.ref));
    assert.ok(before.size < acked.size, `a backlog at the kill (${before.size} of ${acked.size} delivered)`);
    await h.server.start();
    await waitFor(() => {
      const refs = new Set(mine().map((e) => e.ref));
      return [...acked].every((ref) => refs.has(ref));
    }, 30_000, 'every acknowledged change delivered');
    // Nothing delivered that the database does not hold (none before it was durable).
    const data = (await admin(restURL(h.server, ns, 'items'))).json ?? {};
    for (const event of mine()) {
      const key = event.ref.split('/')[1];
      assert.ok(key in data, `${event.ref} was delivered but is not in the database`);
      assert.equal(event.data.delta, data[key]);
    }
    // In log order: after the repeats are set aside, each event is later than the one before.
    const seen = new Set();
    let last = -1;
    for (const event of mine()) {
      if (seen.has(event.id)) continue;
      seen.add(event.id);
      assert.ok(seqOf(event) > last, `${event.id} after position ${last}`);
      last = seqOf(event);
    }
  });

  it('takes a new declaration while it runs, keeps it in the file, and refuses a bad one whole', { timeout: 60_000 }, async () => {
    const ns = h.ns('declare');
    const url = `${baseURL(h.server)}/.admin/triggers/declaration`;
    assert.deepEqual((await admin(url)).json, DECLARED);
    assert.equal((await rest(url, { method: 'PUT', body: DECLARED })).status, 401);
    // A trigger added while the server runs: a database already loaded takes it.
    await admin(restURL(h.server, ns, 'live/before'), { method: 'PUT', body: 0 });
    const added = { triggers: { ...DECLARED.triggers, live: { path: '/live/{id}', http: hook('live') } } };
    const count = Object.keys(added.triggers).length;
    assert.deepEqual((await admin(url, { method: 'PUT', body: added })).json, { declared: count });
    await admin(restURL(h.server, ns, 'live/a'), { method: 'PUT', body: 1 });
    await waitFor(() => received.live.some((m) => m.event.ref === 'live/a' && m.event.instance === ns), 10_000, 'the new trigger\'s event');
    assert.ok(!received.live.some((m) => m.event.ref === 'live/before'), 'nothing from before its declaration');
    assert.deepEqual(JSON.parse(fs.readFileSync(file, 'utf8')), added, 'the triggers file holds it');
    // A bad declaration changes nothing.
    const bad = { triggers: { live: { path: '/live/{id}' } } };
    const refused = await admin(url, { method: 'PUT', body: bad });
    assert.equal(refused.status, 400);
    assert.match(refused.text, /exactly one destination/);
    assert.deepEqual((await admin(url)).json, added);
    // It lasts across a restart (the file is read at start).
    await h.server.kill('SIGKILL');
    await h.server.start();
    assert.ok((await status()).live, 'declared after the restart');
    await admin(restURL(h.server, ns, 'live/b'), { method: 'PUT', body: 2 });
    await waitFor(() => received.live.some((m) => m.event.ref === 'live/b'), 10_000, 'an event after the restart');
    // Left out: it stops.
    assert.deepEqual((await admin(url, { method: 'PUT', body: DECLARED })).json, { declared: count - 1 });
    assert.equal((await status()).live, undefined);
    await admin(restURL(h.server, ns, 'live/c'), { method: 'PUT', body: 3 });
    await admin(restURL(h.server, ns, 'items/after-live'), { method: 'PUT', body: 3 });
    await waitFor(() => received.items.some((m) => m.event.ref === 'items/after-live' && m.event.instance === ns), 10_000);
    assert.ok(!received.live.some((m) => m.event.ref === 'live/c'), 'no event once it is no longer declared');
  });
});
