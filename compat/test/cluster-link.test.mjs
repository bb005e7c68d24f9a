// Two nodes of a cluster with a static placement (issue #21, docs/cluster-link.md): a client
// may reach either node; the node that does not own the client's database forwards its
// session over the node-to-node link, and the owner sends back what the client must get.
// What the SDK sees must be what it sees on one node.
//
// Each node serves clients on 127.0.0.1 and its link on 127.0.0.2 / 127.0.0.3. Barriers are
// replies and log lines, never pauses.

import { describe, it, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  set, update, push, onValue, onDisconnect, runTransaction, query, orderByKey, limitToLast, get,
} from 'firebase/database';
import { createClient, T } from '../lib/harness.mjs';
import { logShows, nsOwnedBy as nsOwnedByIn } from '../lib/cluster.mjs';
import { HearthServer, freePort } from '../lib/server.mjs';
import { RawClient } from '../lib/raw.mjs';
import { valueWhere, withTimeout } from '../lib/util.mjs';

const IDS = ['a', 'b'];
const LINK_HOSTS = { a: '127.0.0.2', b: '127.0.0.3' };

/** A fresh namespace owned by node `id`. */
const nsOwnedBy = (id, prefix = 'cl') => nsOwnedByIn(IDS, id, prefix);

describe('two nodes over the node-to-node link', () => {
  const nodes = {};
  const disposers = [];
  let secretFile;

  async function startNode(id, peers) {
    const server = await HearthServer.start({
      threads: 2,
      extraArgs: ['--cluster-peers', peers, '--node-id', id, '--cluster-secret-file', secretFile,
        '--cluster-plaintext'],
    });
    return server;
  }

  before(async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-cluster-'));
    secretFile = path.join(dir, 'secret');
    fs.writeFileSync(secretFile, 'a shared secret of the test cluster\n');
    const ports = { a: await freePort(), b: await freePort() };
    const peers = IDS.map((id) => `${id}=${LINK_HOSTS[id]}:${ports[id]}`).join(',');
    nodes.peers = peers;
    nodes.a = await startNode('a', peers);
    nodes.b = await startNode('b', peers);
    await logShows(nodes.a, /node link up/, 'the link on a');
    await logShows(nodes.b, /node link up/, 'the link on b');
  }, { timeout: 40_000 });

  afterEach(async () => {
    await Promise.allSettled(disposers.splice(0).reverse().map((d) => withTimeout(Promise.resolve().then(d), 10_000, 'cleanup')));
  });

  after(async () => {
    await Promise.allSettled([nodes.a?.stop(), nodes.b?.stop()]);
  }, { timeout: 20_000 });

  function client(node, ns) {
    const c = createClient(nodes[node], ns);
    disposers.push(c.dispose);
    return c;
  }

  async function raw(node, ns) {
    const c = await RawClient.connect(nodes[node].wsURL(ns));
    disposers.push(() => c.terminate());
    await c.handshake();
    return c;
  }

  for (const owner of IDS) {
    it(`set, update, push, transactions and a query behave as on one node (database on ${owner})`, T, async () => {
      const ns = nsOwnedBy(owner);
      const onA = client('a', ns);
      const onB = client('b', ns);
      const done = (v) => v && v.x === 1 && v.y === 2 && v.counter === 10 && v.list && Object.keys(v.list).length === 2;
      const seenA = valueWhere(onA.ref('room'), done, 'the room on a');
      const seenB = valueWhere(onB.ref('room'), done, 'the room on b');
      const last = [];
      const offQuery = onValue(query(onB.ref('room/list'), orderByKey(), limitToLast(1)), (snap) => {
        last.push(Object.values(snap.val() ?? {}));
      });
      await set(onA.ref('room/x'), 1);
      await update(onB.ref('room'), { y: 2 });
      await push(onA.ref('room/list'), 'first');
      const bump = (c) => runTransaction(c.ref('room/counter'), (n) => (n ?? 0) + 1);
      await Promise.all(Array.from({ length: 5 }, () => [bump(onA), bump(onB)]).flat());
      await push(onB.ref('room/list'), 'second');
      const [a, b] = await Promise.all([seenA, seenB]);
      assert.deepEqual(a, b);
      // The server's copy, read from the other node than the last writer.
      assert.deepEqual((await get(onA.ref('room'))).val(), a);
      await valueWhere(onB.ref('room/list'), (v) => v && Object.keys(v).length === 2, 'list');
      offQuery();
      assert.deepEqual(last.at(-1), ['second']);
    });
  }

  it("a write's pushes reach its writer before its ok, across the link", T, async () => {
    for (const [edge, owner] of [['a', 'b'], ['b', 'a']]) {
      const ns = nsOwnedBy(owner);
      const writer = await raw(edge, ns);
      const watcher = await raw(owner, ns);
      for (const c of [writer, watcher]) assert.equal((await c.request('q', { p: '/w', h: '' })).s, 'ok');
      const from = writer.messages.length;
      for (let i = 1; i <= 5; i++) {
        const r = writer.sendRequest('p', { p: `/w/k${i}`, d: i });
        const { index } = await writer.response(r);
        const pushed = writer.messages.findIndex((m, j) => j >= from && m.t === 'd' && m.d.a === 'd' && m.d.b.p === `/w/k${i}`);
        assert.ok(pushed >= 0 && pushed < index, `the push of k${i} (${pushed}) before its ok (${index})`);
      }
      await watcher.waitMessage((m) => m.t === 'd' && m.d.a === 'd' && m.d.b.p === '/w/k5', { label: 'watcher' });
    }
  });

  it('a large write (decoded off the owner\'s thread) keeps its place among the writes after it', T, async () => {
    const ns = nsOwnedBy('b');
    const writer = client('a', ns);
    const watcher = client('b', ns);
    const big = 'x'.repeat(400 * 1024);
    const seen = [];
    const off = onValue(watcher.ref('doc'), (snap) => seen.push(snap.val()));
    const writes = [set(writer.ref('doc'), { big, n: 1 }), set(writer.ref('doc/n'), 2), set(writer.ref('doc/n'), 3)];
    await Promise.all(writes);
    const last = await valueWhere(watcher.ref('doc'), (v) => v && v.n === 3, 'the last write');
    off();
    assert.equal(last.big.length, big.length);
    // What the other node's client saw follows the writes' order.
    const order = seen.filter((v) => v && v.big).map((v) => v.n);
    assert.deepEqual([...order].sort((x, y) => x - y), order);
    assert.equal(order.at(-1), 3);
  });

  it('onDisconnect runs on the owner when the client leaves the other node', T, async () => {
    const ns = nsOwnedBy('b');
    const leaving = createClient(nodes.a, ns);
    const watcher = client('b', ns);
    await onDisconnect(leaving.ref('presence/a')).set('gone');
    await set(leaving.ref('presence/a'), 'here');
    await valueWhere(watcher.ref('presence/a'), (v) => v === 'here', 'here');
    await leaving.dispose();
    await valueWhere(watcher.ref('presence/a'), (v) => v === 'gone', 'gone');
  });

  it('SIGKILL of the edge node ends its sessions on the owner (onDisconnect ran)', { timeout: 40_000 }, async () => {
    const ns = nsOwnedBy('b');
    const doomed = client('a', ns);
    const watcher = client('b', ns);
    await onDisconnect(doomed.ref('presence/a')).set('lost');
    await set(doomed.ref('presence/a'), 'here');
    await valueWhere(watcher.ref('presence/a'), (v) => v === 'here', 'here');
    await nodes.a.kill('SIGKILL');
    await valueWhere(watcher.ref('presence/a'), (v) => v === 'lost', 'lost');
    const from = nodes.a.log().length;
    await nodes.a.start();
    await logShows(nodes.a, /node link up/, 'the link again', { from });
  });

  it('losing the owner node closes its clients on the edge node, with a reason, counted', { timeout: 40_000 }, async () => {
    const ns = nsOwnedBy('b');
    const c = await raw('a', ns);
    assert.equal((await c.request('q', { p: '/x', h: '' })).s, 'ok');
    const fromA = nodes.a.log().length;
    await nodes.b.kill('SIGKILL');
    const closed = await c.waitClose(15_000);
    assert.equal(closed.code, 1013);
    assert.match(closed.reason, /owns the database is unreachable/);
    await logShows(nodes.a, /node link lost.*connections_moving=1/, 'the loss logged', { from: fromA });
    const fromB = nodes.b.log().length;
    await nodes.b.start();
    await logShows(nodes.b, /node link up/, 'the link again', { from: fromB });
  });
});
