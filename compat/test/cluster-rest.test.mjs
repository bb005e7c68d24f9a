// REST requests and event streams across the node-to-node link (issue #21,
// docs/cluster-link.md): a node that does not own the database forwards them to the owner,
// whose answer is what the client gets. Barriers are answers and events, never pauses.

import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { T } from '../lib/harness.mjs';
import { logShows, nsOwnedBy as nsOwnedByIn } from '../lib/cluster.mjs';
import { HearthServer, freePort } from '../lib/server.mjs';
import { withTimeout, waitFor } from '../lib/util.mjs';
import { unsignedJwt, nowSecs } from '../lib/rules.mjs';

const IDS = ['a', 'b'];
const LINK_HOSTS = { a: '127.0.0.2', b: '127.0.0.3' };

const nsOwnedBy = (id) => nsOwnedByIn(IDS, id, 'cr');

/** Reads server-sent events from a fetch body; `next()` resolves with the next event. */
function events(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  return {
    async next(label) {
      for (;;) {
        const end = buffer.indexOf('\n\n');
        if (end >= 0) {
          const text = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const event = /^event: (.*)$/m.exec(text)?.[1];
          const data = /^data: (.*)$/m.exec(text)?.[1];
          const id = /^id: (.*)$/m.exec(text)?.[1];
          if (event === 'keep-alive') continue;
          const parsed = { event, data: data === undefined ? undefined : JSON.parse(data) };
          // Only a change feed's events have ids.
          return id === undefined ? parsed : { ...parsed, id };
        }
        const { value, done } = await withTimeout(reader.read(), 15_000, label);
        if (done) return null;
        buffer += decoder.decode(value, { stream: true });
      }
    },
    cancel: () => reader.cancel().catch(() => {}),
  };
}

describe('REST and event streams through a node that does not own the database', () => {
  const nodes = {};
  let secretFile;

  before(async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-cluster-rest-'));
    secretFile = path.join(dir, 'secret');
    fs.writeFileSync(secretFile, 'a shared secret of the test cluster\n');
    const ports = { a: await freePort(), b: await freePort() };
    const peers = IDS.map((id) => `${id}=${LINK_HOSTS[id]}:${ports[id]}`).join(',');
    for (const id of IDS) {
      nodes[id] = await HearthServer.start({
        threads: 2,
        extraArgs: ['--cluster-peers', peers, '--node-id', id, '--cluster-secret-file', secretFile,
        '--cluster-plaintext'],
      });
    }
    await logShows(nodes.a, /node link up/, 'the link on a');
    await logShows(nodes.b, /node link up/, 'the link on b');
  }, { timeout: 40_000 });

  after(async () => {
    await Promise.allSettled([nodes.a?.stop(), nodes.b?.stop()]);
  }, { timeout: 20_000 });

  const url = (node, ns, p, query = '') => `http://127.0.0.1:${nodes[node].port}/${p}.json?ns=${ns}${query}`;

  it('PUT, GET, PATCH, POST, DELETE and a query through the other node answer as the owner does', T, async () => {
    const ns = nsOwnedBy('b');
    let r = await fetch(url('a', ns, 'items'), { method: 'PUT', body: JSON.stringify({ x: { n: 3 }, y: { n: 1 } }) });
    assert.equal(r.status, 200, await r.clone().text());
    assert.deepEqual(await r.json(), { x: { n: 3 }, y: { n: 1 } });
    r = await fetch(url('a', ns, 'items'), { method: 'PATCH', body: JSON.stringify({ z: { n: 2 } }) });
    assert.equal(r.status, 200);
    r = await fetch(url('a', ns, 'items'), { method: 'POST', body: JSON.stringify({ n: 4 }) });
    const { name } = await r.json();
    assert.match(name, /^-/);
    // The owner's copy, read on the owner.
    r = await fetch(url('b', ns, 'items'));
    assert.equal(Object.keys(await r.json()).length, 4);
    r = await fetch(url('a', ns, 'items', '&orderBy="n"&limitToFirst=2'));
    assert.deepEqual(await r.json(), { y: { n: 1 }, z: { n: 2 } });
    r = await fetch(url('a', ns, 'items', '&shallow=true'));
    assert.deepEqual(Object.keys(await r.json()).sort(), [name, 'x', 'y', 'z'].sort());
    r = await fetch(url('a', ns, 'items/x'), { method: 'DELETE' });
    assert.equal(r.status, 200);
    r = await fetch(url('b', ns, 'items/x'));
    assert.equal(await r.text(), 'null');
    // A large answer crosses in many frames.
    const big = 'x'.repeat(1024 * 1024);
    r = await fetch(url('a', ns, 'big', '&print=silent'), { method: 'PUT', body: JSON.stringify(big) });
    assert.equal(r.status, 204);
    r = await fetch(url('a', ns, 'big'));
    assert.equal((await r.json()).length, big.length);
  });

  it("the audit trail is the owner's, asked and erased through the other node", T, async () => {
    const ns = nsOwnedBy('b');
    const owner = { authorization: 'Bearer owner' };
    const audit = await fetch(url('a', ns, '.settings/audit'), { method: 'PUT', body: '{"enabled":true}', headers: owner });
    assert.equal(audit.status, 200, await audit.clone().text());
    const ada = unsignedJwt({ sub: 'ada', user_id: 'ada', iat: nowSecs(), exp: nowSecs() + 3600 });
    for (const n of [1, 2]) {
      const r = await fetch(url('a', ns, `doc/${n}`, `&auth=${ada}`), { method: 'PUT', body: String(n) });
      assert.equal(r.status, 200, await r.clone().text());
    }
    const trail = async (node) => {
      const r = await fetch(url(node, ns, '.settings/auditTrail'), { headers: owner });
      assert.equal(r.status, 200, await r.clone().text());
      return (await r.text()).split('\n').filter(Boolean).map((line) => JSON.parse(line));
    };
    const seen = await waitFor(async () => ((await trail('a')).length === 2 ? trail('a') : null), 10_000);
    assert.deepEqual(seen.map((e) => [e.path, e.uid]), [['/doc/1', 'ada'], ['/doc/2', 'ada']]);
    // Erased through the other node: gone from the owner's trail, and from this node's copy
    // (a follower's files).
    const erased = await fetch(url('a', ns, '.settings/auditTrail', '&uid=ada'), { method: 'DELETE', headers: owner });
    assert.deepEqual(await erased.json(), { erased: 2 });
    assert.deepEqual(await trail('b'), []);
    const copy = path.join(nodes.a.dataDir, 'audit', ns);
    for (const file of fs.existsSync(copy) ? fs.readdirSync(copy) : []) {
      assert.ok(!fs.readFileSync(path.join(copy, file), 'utf8').includes('"ada"'), `${file} on a`);
    }
  });

  it('an ETag conditional write through the other node', T, async () => {
    const ns = nsOwnedBy('b');
    await fetch(url('b', ns, 'doc'), { method: 'PUT', body: '1' });
    let r = await fetch(url('a', ns, 'doc'), { headers: { 'X-Firebase-ETag': 'true' } });
    const etag = r.headers.get('etag');
    assert.ok(etag, 'an ETag');
    assert.equal(r.headers.get('content-type'), 'application/json; charset=utf-8');
    r = await fetch(url('a', ns, 'doc'), { method: 'PUT', body: '2', headers: { 'if-match': 'wrong' } });
    assert.equal(r.status, 412);
    assert.equal(r.headers.get('etag'), etag);
    r = await fetch(url('a', ns, 'doc'), { method: 'PUT', body: '2', headers: { 'if-match': etag } });
    assert.equal(r.status, 200);
    assert.equal(await (await fetch(url('b', ns, 'doc'))).text(), '2');
  });

  it("the owner's rules refuse through the other node as they do locally", T, async () => {
    const ns = nsOwnedBy('b');
    const rules = JSON.stringify({ rules: { '.read': false, open: { '.read': true, '.write': true } } });
    const admin = { authorization: 'Bearer owner' };
    let r = await fetch(url('a', ns, '.settings/rules').replace('/.settings/rules.json', '/.settings/rules.json'), { method: 'PUT', body: rules, headers: admin });
    assert.equal(r.status, 200, await r.clone().text());
    const local = await fetch(url('b', ns, 'secret'));
    r = await fetch(url('a', ns, 'secret'));
    assert.equal(r.status, local.status);
    assert.ok([401, 403].includes(r.status));
    assert.deepEqual(await r.json(), await local.json());
    r = await fetch(url('a', ns, 'open'), { method: 'PUT', body: '"ok"' });
    assert.equal(r.status, 200);
  });

  it('an event stream through the other node sees a write made on the owner, and ends when the owner dies', { timeout: 40_000 }, async () => {
    const ns = nsOwnedBy('b');
    await fetch(url('b', ns, 'room'), { method: 'PUT', body: '{"a":1}' });
    const r = await fetch(url('a', ns, 'room'), { headers: { accept: 'text/event-stream' } });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('content-type'), 'text/event-stream');
    const stream = events(r);
    assert.deepEqual(await stream.next('first put'), { event: 'put', data: { path: '/', data: { a: 1 } } });
    await fetch(url('b', ns, 'room/b'), { method: 'PUT', body: '2' });
    assert.deepEqual(await stream.next('the write'), { event: 'put', data: { path: '/b', data: 2 } });
    await fetch(url('b', ns, 'room'), { method: 'PATCH', body: '{"c":3}' });
    // As on one node: an update of one child is pushed as a put of that child.
    assert.deepEqual(await stream.next('the update'), { event: 'put', data: { path: '/c', data: 3 } });
    const from = nodes.a.log().length;
    await nodes.b.kill('SIGKILL');
    assert.equal(await stream.next('the end'), null);
    await logShows(nodes.a, /node link lost/, 'the loss', { from });
    // While the owner is down, its databases' requests answer 503 at once.
    const down = await fetch(url('a', ns, 'room'));
    assert.equal(down.status, 503);
    const fromB = nodes.b.log().length;
    await nodes.b.start();
    await logShows(nodes.b, /node link up/, 'the link again', { from: fromB });
  });

  it('a change feed through the other node gives the owner\'s positions and resumes from them', T, async () => {
    const ns = nsOwnedBy('b');
    const owner = { authorization: 'Bearer owner', accept: 'text/event-stream' };
    await fetch(url('b', ns, 'feed'), { method: 'PUT', body: '{"a":1}' });
    const first = events(await fetch(url('a', ns, 'feed', '&changesSince=now'), { headers: owner }));
    const start = await first.next('the whole value');
    assert.deepEqual(start.data, { path: '/', data: { a: 1 } });
    // Static placement has no fencing epochs (no failover): the position alone.
    assert.match(start.id, /^\d+$/);
    await fetch(url('b', ns, 'feed/b'), { method: 'PUT', body: '2' });
    const write = await first.next('the write');
    assert.deepEqual(write.data, { path: '/b', data: 2 });
    await first.cancel();
    await fetch(url('b', ns, 'feed/c'), { method: 'PUT', body: '3' });
    // Resumed through the other node from the first event's position: the two writes after it.
    const again = await fetch(url('a', ns, 'feed', '&changesSince=now'), {
      headers: { ...owner, 'last-event-id': start.id },
    });
    assert.equal(again.status, 200);
    const resumed = events(again);
    assert.deepEqual(await resumed.next('the first missed'), write);
    assert.deepEqual((await resumed.next('the second missed')).data, { path: '/c', data: 3 });
    await resumed.cancel();
  });

  it('closing the stream on the edge ends its session on the owner', T, async () => {
    const ns = nsOwnedBy('b');
    const r = await fetch(url('a', ns, 'x'), { headers: { accept: 'text/event-stream' } });
    const stream = events(r);
    assert.equal((await stream.next('first put')).event, 'put');
    await stream.cancel();
    // The owner's session count drops back: its stream ended (seen in /metrics of b).
    const deadline = Date.now() + 15_000;
    for (;;) {
      const m = await (await fetch(`http://127.0.0.1:${nodes.b.port}/metrics`, { headers: { authorization: 'Bearer owner' } })).text();
      const streams = [...m.matchAll(/^hearth_event_streams(?:\{[^}]*\})? (\d+)/gm)].reduce((s, x) => s + Number(x[1]), 0);
      if (streams === 0) break;
      if (Date.now() > deadline) throw new Error(`streams still open on b: ${streams}\n${nodes.b.logTail(10)}`);
      await new Promise((res) => setTimeout(res, 50));
    }
  });
});
