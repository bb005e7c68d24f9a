// Failover with data on etcd (issue #21, docs/cluster.md "Failover"): the owner of a database
// ships its log to the follower (`--replication sync`, `--durability strict`), so when the
// owner is killed with SIGKILL during writes, the follower claims the database with the next
// epoch and serves every write that was acknowledged; it then ships to a new follower, which
// in turn serves everything when the second owner is killed too.
//
// Three nodes, clients on 127.0.0.1 and links on 127.0.0.2-4. The writer's node is never
// killed: its SDK client keeps its socket to it while the owner behind it changes. Barriers
// are acknowledged writes and etcd's answers, polled: never pauses that hope.
//
// Needs etcd (Debian's etcd-server, /usr/bin/etcd, or HEARTH_TEST_ETCD); skipped without it.

import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { set } from 'firebase/database';
import { createClient, uniqueNs } from '../lib/harness.mjs';
import { valueWhere, waitFor } from '../lib/util.mjs';
import { ETCD, etcdClusterSuite, etcdRanked, firstWrite, writer } from '../lib/cluster.mjs';

const IDS = ['n1', 'n2', 'n3'];

describe('failover on etcd keeps every acknowledged write', { skip: !fs.existsSync(ETCD) && 'no etcd' }, () => {
  const cluster = etcdClusterSuite(IDS, ['--durability', 'strict', '--replication', 'sync']);
  const { nodes, claimOf } = cluster;

  /** Everything under `items` as a node serves it over REST (forwarded to the owner). */
  async function itemsVia(id, ns) {
    const r = await fetch(`http://127.0.0.1:${nodes[id].port}/items.json?ns=${ns}`);
    assert.equal(r.status, 200, `GET through ${id}: ${r.status}`);
    return (await r.json()) ?? {};
  }


  it('the follower takes over with every acknowledged write, twice', { timeout: 90_000 }, async () => {
    // A database placed first on n2 or n3, then on the other, then on n1: n1 stays the edge
    // until both are killed. Placement is checked against etcd's claim below.
    let ns;
    let order;
    do {
      ns = uniqueNs('failover');
      order = etcdRanked(IDS, ns);
    } while (order[2] !== 'n1');
    const writer = { client: null };
    await firstWrite(nodes.n1, ns);
    const owner = claimOf(ns)?.owner;
    assert.equal(owner, order[0], 'the owner placement names');
    assert.equal(claimOf(ns).follower, order[1], '`hearth cluster status` names the follower');
    writer.client = createClient(nodes.n1, ns);
    const acked = new Map();
    let next = 0;
    let stop = false;
    // Four writers in a loop: each write is a new key, kept once acknowledged; a refused one
    // (the claim moving) is tried again as a new key.
    const loops = [0, 1, 2, 3].map(async () => {
      while (!stop) {
        const value = next++;
        const key = `k${String(value).padStart(5, '0')}`;
        try {
          await set(writer.client.ref(`items/${key}`), value);
          acked.set(key, value);
        } catch {
          await new Promise((r) => setTimeout(r, 50));
        }
      }
    });
    const ackedPast = (n, label) => waitFor(() => acked.size >= n, 30_000, label);
    try {
      const epoch = claimOf(ns).epoch;
      await ackedPast(40, 'writes before the first kill');
      await nodes[owner].kill('SIGKILL');
      const killed = [owner];
      await ackedPast(acked.size + 40, 'writes after the first failover');
      const second = claimOf(ns);
      assert.ok(!killed.includes(second.owner), `claimed again by ${second.owner}`);
      assert.equal(second.epoch, epoch + 1);

      assert.equal(second.owner, order[1], 'the follower took it over');
      // The new owner ships to the node left besides it (n1), whose copy must be complete:
      // kill the second owner too.
      await nodes[second.owner].kill('SIGKILL');
      killed.push(second.owner);
      await ackedPast(acked.size + 40, 'writes after the second failover');
      const third = claimOf(ns);
      assert.equal(third.owner, 'n1');
      assert.equal(third.epoch, epoch + 2);
      stop = true;
      await Promise.all(loops);
      const served = await itemsVia('n1', ns);
      const missing = [...acked.keys()].filter((key) => served[key] === undefined);
      assert.deepEqual(missing, [], `acknowledged writes lost (${acked.size} acknowledged)`);
      for (const [key, value] of acked) assert.equal(served[key], value, key);
      // A listener on the surviving edge sees the database as it is now.
      const listener = createClient(nodes.n1, ns);
      const last = [...acked.keys()].sort().at(-1);
      await valueWhere(listener.ref(`items/${last}`), (v) => v === acked.get(last), 'the last write');
      await listener.dispose();
    } finally {
      stop = true;
      await Promise.all(loops);
      await writer.client.dispose();
    }
  });
});

describe('a planned move: an owner stopped with SIGTERM hands its databases over at once', { skip: !fs.existsSync(ETCD) && 'no etcd' }, () => {
  // A lease of 10 s: a takeover well within it can only come from the owner leaving on
  // purpose (revoking its lease after its last write), never from the lease running out.
  const LEASE_SECS = 10;
  const cluster = etcdClusterSuite(IDS, ['--durability', 'strict', '--replication', 'sync'],
    { leaseSecs: LEASE_SECS });
  const { nodes, claimOf } = cluster;

  it('writes go on on the follower within a fraction of the lease, with every acknowledged write and none refused', { timeout: 60_000 }, async () => {
    let ns;
    let order;
    do {
      ns = uniqueNs('move');
      order = etcdRanked(IDS, ns);
    } while (order[0] === 'n1');
    // The database claimed first, so that the writer's session starts on its owner.
    await firstWrite(nodes.n1, ns);
    await waitFor(() => claimOf(ns)?.owner === order[0], 10_000, 'the claim');
    const client = createClient(nodes.n1, ns);
    // The stopping owner answers what it handled and handles nothing more; the edge sends
    // the rest to the next owner: no write of the kept socket fails.
    const writes = writer(client, 'k', 3);
    const { acked, refused } = writes;
    try {
      await waitFor(() => acked.size >= 30, 20_000, 'writes before the move');
      assert.equal(claimOf(ns).owner, order[0]);
      const before = acked.size;
      const stoppedAt = Date.now();
      await nodes[order[0]].kill('SIGTERM');
      await waitFor(() => claimOf(ns)?.owner === order[1], LEASE_SECS * 1000, 'the follower\'s claim');
      await waitFor(() => acked.size >= before + 30, 20_000, 'writes after the move');
      const took = Date.now() - stoppedAt;
      assert.ok(took < (LEASE_SECS * 1000) / 2, `the move took ${took} ms, not much less than the lease`);
      await writes.end();
      const r = await fetch(`http://127.0.0.1:${nodes.n1.port}/items.json?ns=${ns}`);
      const served = (await r.json()) ?? {};
      const missing = [...acked.keys()].filter((key) => served[key] !== acked.get(key));
      assert.deepEqual(missing, [], `acknowledged writes lost (${acked.size} acknowledged)`);
      assert.deepEqual(refused, [], 'writes refused across the move');
    } finally {
      await writes.end();
      await client.dispose();
    }
  });
});
