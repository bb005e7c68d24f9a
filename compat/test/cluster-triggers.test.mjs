// Declared triggers in a cluster on etcd (docs/triggers.md, "In a cluster"): the owner logs
// each change's event with its write (record kind 5) and ships it to the follower, which keeps
// it in its own outbox without delivering it; when the owner is killed with SIGKILL in the
// middle of writes and deliveries, the follower claims the database and delivers what it kept,
// then its own events. Every acknowledged change reaches the receiver at least once, nothing
// reaches it that the database does not hold (none before it was durable), and with the
// repeats set aside each epoch's events arrive in log order. A follower that comes back with
// an empty disk gets the owner's unconfirmed events with its full copy of the database, and
// delivers them once it takes the database over.
//
// Three nodes with the same triggers file, clients on 127.0.0.1 and links on 127.0.0.2-4, a
// receiver in this process on 127.0.0.1; the writes go through n1, which neither owns nor
// follows the database. Needs etcd (Debian's etcd-server, /usr/bin/etcd, or HEARTH_TEST_ETCD).

import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { uniqueNs } from '../lib/harness.mjs';
import { freePort } from '../lib/server.mjs';
import { waitFor } from '../lib/util.mjs';
import { ETCD, etcdClusterSuite, etcdRanked, firstWrite, readyNode } from '../lib/cluster.mjs';

const IDS = ['n1', 'n2', 'n3'];
const OWNER = { authorization: 'Bearer owner' };

// The receiver: every event in the order it arrived, answered after 5 ms so that events wait
// in the owner's outbox when it dies. The events of a database in `refusing` are answered 503
// and not counted (a receiver that is down).
const received = [];
const refusing = new Set();
const receiver = http.createServer((request, response) => {
  let body = '';
  request.on('data', (chunk) => { body += chunk; });
  request.on('end', () => {
    let event;
    try {
      event = JSON.parse(body);
    } catch {
      response.writeHead(400).end('not JSON');
      return;
    }
    if (refusing.has(event.instance)) {
      response.writeHead(503).end('down for now');
      return;
    }
    received.push(event);
    setTimeout(() => response.writeHead(204).end(), 5);
  });
});
const port = await freePort();
await new Promise((resolve) => receiver.listen(port, '127.0.0.1', resolve));

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-cluster-triggers-'));
const file = path.join(dir, 'triggers.json');
fs.writeFileSync(file, JSON.stringify({
  triggers: { items: { path: '/items/{id}', http: { url: `http://127.0.0.1:${port}/hooks/items` } } },
}));

/** `EPOCH.POS.INDEX` as numbers. */
const idParts = (id) => id.split('.').map(Number);

describe('declared triggers on etcd: a failover delivers what the follower kept', { skip: !fs.existsSync(ETCD) && 'no etcd' }, () => {
  const cluster = etcdClusterSuite(IDS, ['--durability', 'strict', '--replication', 'sync', '--triggers', file]);
  const { nodes, claimOf } = cluster;
  after(() => {
    receiver.closeAllConnections();
    receiver.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const base = (id) => `http://127.0.0.1:${nodes[id].port}`;
  /** `/.admin/triggers` of node `id`: the trigger `items`, and its entry of `ns` (if any). */
  async function itemsStatus(id, ns) {
    const r = await fetch(`${base(id)}/.admin/triggers`, { headers: OWNER, signal: AbortSignal.timeout(5_000) });
    const text = await r.text();
    assert.equal(r.status, 200, `GET /.admin/triggers on ${id}: ${r.status} ${text}`);
    const items = JSON.parse(text).triggers.find((t) => t.name === 'items');
    return { items, database: items.databases.find((d) => d.database === ns) };
  }
  /** What the live nodes show of their outboxes and logged about triggers and claims. */
  async function diagnose({ logs = true } = {}) {
    const out = [];
    for (const id of IDS) {
      const node = nodes[id];
      if (node.running) {
        try {
          const r = await fetch(`${base(id)}/.admin/triggers`, { headers: OWNER, signal: AbortSignal.timeout(5_000) });
          out.push(`${id} /.admin/triggers: ${r.status} ${await r.text()}`);
        } catch (error) {
          out.push(`${id} /.admin/triggers: ${error.message}`);
        }
      } else {
        out.push(`${id}: not running (${JSON.stringify(node.exit)})`);
      }
      if (!logs) continue;
      const lines = node.log().split('\n').filter((l) => /trigger|outbox|claim|fence|epoch|follow|replica/i.test(l));
      out.push(`${id} log (${node.logPath}), last lines about triggers and claims:\n${lines.slice(-25).join('\n')}`);
    }
    return out.join('\n');
  }

  it('SIGKILL of the owner: every acknowledged change delivered at least once, none lost or early, in log order', { timeout: 180_000 }, async (t) => {
    // Owned and followed by n2 and n3: n1 stays the edge the writes go through.
    let ns;
    let order;
    do {
      ns = uniqueNs('trig');
      order = etcdRanked(IDS, ns);
    } while (order[2] !== 'n1');
    await firstWrite(nodes.n1, ns);
    const claim = claimOf(ns);
    assert.equal(claim.owner, order[0], 'the owner placement names');
    assert.equal(claim.follower, order[1], 'the follower placement names');
    const [owner, follower] = [claim.owner, claim.follower];

    const mine = () => received.filter((e) => e.instance === ns);
    const deliveredKeys = () => new Set(mine().map((e) => e.ref.split('/')[1]));

    // Eight writers through n1, each write a new key; only a 200 counts as acknowledged.
    const acked = new Map();
    const failures = new Map();
    let stop = false;
    const writers = Array.from({ length: 8 }, async (_, w) => {
      for (let i = 0; !stop; i++) {
        const key = `k${w}-${String(i).padStart(5, '0')}`;
        try {
          const r = await fetch(`${base('n1')}/items/${key}.json?ns=${ns}`, {
            method: 'PUT', headers: OWNER, body: JSON.stringify(i), signal: AbortSignal.timeout(10_000),
          });
          await r.text();
          if (r.status === 200) {
            acked.set(key, i);
            continue;
          }
          failures.set(r.status, (failures.get(r.status) ?? 0) + 1);
        } catch (error) {
          const why = error.name === 'TimeoutError' ? 'timeout' : error.message;
          failures.set(why, (failures.get(why) ?? 0) + 1);
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    });
    try {
      // A backlog: enough writes, and events of them not yet delivered.
      await waitFor(() => acked.size >= 300 && acked.size - deliveredKeys().size >= 50, 40_000,
        '300 acknowledged writes with a backlog of 50 undelivered events', 20);
      // The follower keeps the events and delivers none; the owner delivers.
      const kept = await itemsStatus(follower, ns);
      assert.ok(kept.database, `the follower ${follower} keeps an outbox of ${ns}: ${JSON.stringify(kept.items)}`);
      assert.equal(kept.database.following, true, `the follower's outbox: ${JSON.stringify(kept.database)}`);
      assert.ok(kept.database.lastTaken > 0, `the follower took events: ${JSON.stringify(kept.database)}`);
      assert.equal(kept.items.delivered, 0, `the follower delivered: ${JSON.stringify(kept.items)}`);
      const owning = await itemsStatus(owner, ns);
      assert.equal(owning.database?.following, false, `the owner's outbox: ${JSON.stringify(owning.database)}`);
      assert.ok(owning.items.delivered > 0, `the owner delivers: ${JSON.stringify(owning.items)}`);
      for (const e of mine()) {
        assert.equal(idParts(e.id)[0], claim.epoch, `${e.id}: an event before the kill of epoch ${claim.epoch}`);
      }
      // The owner tells the follower (once a second, with its writes) how far the receiver
      // confirmed, and the follower drops those events: a failover repeats only the rest.
      await waitFor(async () => (await itemsStatus(follower, ns)).database?.lastConfirmed > 0, 10_000,
        'the owner\'s confirmations on the follower');
      // A backlog still, at the kill.
      await waitFor(() => acked.size - deliveredKeys().size >= 50, 20_000, 'a backlog of 50 undelivered events', 20);
      const confirmedBefore = deliveredKeys().size;

      await nodes[owner].kill('SIGKILL');
      const atKill = { acked: acked.size, delivered: deliveredKeys().size };
      t.diagnostic(`killed ${owner} with ${atKill.acked} acknowledged and ${atKill.delivered} delivered`);
      assert.ok(atKill.delivered < atKill.acked, `a backlog at the kill (${atKill.delivered} of ${atKill.acked})`);
      t.diagnostic(`${confirmedBefore} delivered when the follower had dropped confirmed events`);

      await waitFor(() => {
        const now = claimOf(ns);
        return now?.owner === follower && now.epoch === claim.epoch + 1;
      }, 30_000, `${follower}'s claim with epoch ${claim.epoch + 1}`, 200);
      const atClaim = acked.size;
      await waitFor(() => acked.size >= atClaim + 40, 30_000, 'writes acknowledged after the takeover', 20);
      stop = true;
      await Promise.all(writers);
      t.diagnostic(`${acked.size} acknowledged; refused or failed: ${JSON.stringify([...failures])}`);

      // Every acknowledged change delivered at least once.
      const missing = () => [...acked.keys()].filter((key) => !deliveredKeys().has(key));
      try {
        await waitFor(() => missing().length === 0, 60_000, 'every acknowledged change delivered', 50);
      } catch (error) {
        const lost = missing();
        assert.fail(`${error.message}: ${lost.length} of ${acked.size} acknowledged keys never delivered `
          + `(${mine().length} events received), e.g. ${lost.sort().slice(0, 30).join(' ')}\n${await diagnose()}`);
      }

      // Nothing delivered that the database does not hold: none before it was durable.
      const r = await fetch(`${base('n1')}/items.json?ns=${ns}`, { headers: OWNER });
      assert.equal(r.status, 200, 'the items through n1');
      const data = (await r.json()) ?? {};
      for (const [key, value] of acked) assert.equal(data[key], value, `acknowledged ${key} in the database`);
      for (const event of mine()) {
        const key = event.ref.split('/')[1];
        assert.equal(event.ref, `items/${key}`);
        assert.ok(key in data, `${event.id} (${event.ref}) was delivered but is not in the database`);
        assert.equal(event.data.delta, data[key], `${event.id} (${event.ref}) carries the value held`);
      }

      // In log order within each epoch, once the repeats are set aside.
      const seen = new Set();
      const last = new Map();
      for (const event of mine()) {
        if (seen.has(event.id)) continue;
        seen.add(event.id);
        const [epoch, pos, index] = idParts(event.id);
        const before = last.get(epoch);
        assert.ok(!before || pos > before[0] || (pos === before[0] && index > before[1]),
          `${event.id} arrived after ${epoch}.${before?.join('.')}`);
        last.set(epoch, [pos, index]);
      }
      assert.ok(last.has(claim.epoch + 1), `events of the new owner's epoch ${claim.epoch + 1}: ${[...last.keys()]}`);
      const repeats = mine().length - seen.size;
      t.diagnostic(`${mine().length} events received, ${seen.size} distinct, ${repeats} repeats`);
      // The follower had dropped what the receiver confirmed: not all of it comes again.
      assert.ok(repeats < atKill.delivered, `${repeats} repeats of the ${atKill.delivered} delivered before the kill`);

      // The new owner delivers; n1 never delivered.
      const now = await itemsStatus(follower, ns);
      assert.equal(now.database?.following, false, `the new owner's outbox: ${JSON.stringify(now.database)}`);
      assert.ok(now.items.delivered > 0, `the new owner delivered: ${JSON.stringify(now.items)}`);
      const edge = await itemsStatus('n1', ns);
      assert.equal(edge.items.delivered, 0, `n1 delivered: ${JSON.stringify(edge.items)}`);
      t.diagnostic(await diagnose({ logs: false }));
    } finally {
      stop = true;
      await Promise.all(writers);
    }
  });

  it('a follower that lost its disk gets the owner\'s unconfirmed events with its copy, and delivers them after a failover', { timeout: 180_000 }, async (t) => {
    // The owner the test before killed comes back first: placement is over all three.
    for (const id of IDS) {
      if (!nodes[id].running) await nodes[id].start();
      await readyNode(nodes[id]);
    }
    let ns;
    let order;
    do {
      ns = uniqueNs('trigcopy');
      order = etcdRanked(IDS, ns);
    } while (order[2] !== 'n1');
    const mine = () => received.filter((e) => e.instance === ns);
    refusing.add(ns);
    await firstWrite(nodes.n1, ns);
    const claim = claimOf(ns);
    const [owner, follower] = [claim.owner, claim.follower];
    const keys = [];
    const put = async (key) => {
      const r = await fetch(`${base('n1')}/items/${key}.json?ns=${ns}`, {
        method: 'PUT', headers: OWNER, body: JSON.stringify(key), signal: AbortSignal.timeout(10_000),
      });
      assert.equal(r.status, 200, `PUT ${key}: ${r.status} ${await r.text()}`);
      keys.push(key);
    };
    // Events the receiver refuses: they wait in the owner's outbox, and in the follower's.
    for (let i = 0; i < 20; i++) await put(`a${i}`);
    await waitFor(async () => (await itemsStatus(follower, ns)).database?.pending === 20, 20_000,
      'the follower keeps the 20 events');

    // The follower's disk is lost while it is down; writes go on without it.
    await nodes[follower].kill('SIGKILL');
    fs.rmSync(nodes[follower].dataDir, { recursive: true, force: true });
    for (let i = 0; i < 10; i++) await put(`b${i}`);
    await nodes[follower].start();

    // Its full copy carries the 30 events the receiver has not confirmed.
    try {
      await waitFor(async () => (await itemsStatus(follower, ns)).database?.pending === 30, 30_000,
        'the follower back with an empty disk keeps the owner\'s 30 unconfirmed events');
    } catch (error) {
      assert.fail(`${error.message}\n${await diagnose()}`);
    }
    assert.equal(mine().length, 0, 'nothing delivered yet');
    // Back in the database's sync set (which it joins with a write, once it keeps up), it may
    // take the database over.
    await put('c0');
    await waitFor(() => claimOf(ns)?.sync?.includes(follower), 30_000, `${follower} in the sync set`, 200);

    await nodes[owner].kill('SIGKILL');
    // A write after the kill is what makes the follower claim the database.
    await waitFor(async () => {
      try {
        await put('d0');
        return true;
      } catch {
        return false;
      }
    }, 30_000, 'a write through n1 once the follower claimed the database', 200);
    assert.equal(claimOf(ns)?.owner, follower, `${follower}'s claim`);
    refusing.delete(ns);
    const delivered = () => new Set(mine().map((e) => e.ref.split('/')[1]));
    try {
      await waitFor(() => keys.every((key) => delivered().has(key)), 60_000, 'every change delivered by the new owner', 50);
    } catch (error) {
      const lost = keys.filter((key) => !delivered().has(key));
      assert.fail(`${error.message}: ${lost.length} never delivered: ${lost.join(' ')}\n${await diagnose()}`);
    }
    t.diagnostic(`${mine().length} events received for ${keys.length} changes`);
  });
});
