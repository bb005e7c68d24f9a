// A node that joins an etcd cluster between a database's owner and its follower becomes the
// database's follower (issue #21, docs/cluster-link.md "Catching up"): the owner copies the
// database to it without waiting for a write, evicted databases included, so that when the
// owner is then killed with SIGKILL, the joined node (the one placement asks to claim) serves
// every write acknowledged before it joined.
//
// Two nodes, then a third; clients on 127.0.0.1. Databases are chosen so that the third node
// ranks between the owner and the old follower. Barriers are the owner's /metrics (copies
// shipped and acknowledged) and etcd's claims, polled.
//
// Needs etcd (Debian's etcd-server, /usr/bin/etcd, or HEARTH_TEST_ETCD); skipped without it.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { onValue } from 'firebase/database';
import { createClient, uniqueNs } from '../lib/harness.mjs';
import { waitFor } from '../lib/util.mjs';
import { ETCD, etcdClusterSuite, etcdRanked, logShows } from '../lib/cluster.mjs';

const IDS = ['n1', 'n2'];
const ALL = ['n1', 'n2', 'n3'];

/** A metric of `node`'s /metrics for follower `follower`. */
async function followerMetric(node, name, follower) {
  const text = await (await fetch(`http://127.0.0.1:${node.port}/metrics`,
    { headers: { authorization: 'Bearer owner' } })).text();
  const line = new RegExp(`^hearth_${name}\\{follower="${follower}"\\} (\\d+)`, 'm').exec(text);
  return Number(line?.[1] ?? 0);
}

describe('a node that joins between owner and follower is caught up', { skip: !fs.existsSync(ETCD) && 'no etcd' }, () => {
  const cluster = etcdClusterSuite(IDS,
    ['--durability', 'strict', '--replication', 'sync', '--evict-idle-secs', '1']);
  const { nodes, claimOf } = cluster;

  it('gets every database it now follows, evicted or not, and serves it after the owner is killed', { timeout: 90_000 }, async () => {
    // Two databases with the same owner, each ranked owner, n3, old follower.
    let owner;
    const names = [];
    while (names.length < 2) {
      const ns = uniqueNs('join');
      const order = etcdRanked(ALL, ns);
      if (order[1] !== 'n3' || (owner && order[0] !== owner)) continue;
      owner = order[0];
      names.push(ns);
    }
    const [kept, idle] = names;
    const edge = IDS.find((id) => id !== owner);
    const written = {};
    for (const ns of names) {
      const items = {};
      for (let i = 0; i < 30; i++) items[`k${i}`] = { ns, i, text: 'x'.repeat(i) };
      await waitFor(async () => {
        const r = await fetch(`http://127.0.0.1:${nodes[edge].port}/items.json?ns=${ns}`,
          { method: 'PUT', body: JSON.stringify(items) });
        return r.ok;
      }, 15_000, `the first write to ${ns}`);
      const r = await fetch(`http://127.0.0.1:${nodes[edge].port}/items/k0/i.json?ns=${ns}`,
        { method: 'PUT', body: '100' });
      assert.equal(r.status, 200);
      items.k0.i = 100;
      written[ns] = items;
      assert.equal(claimOf(ns).owner, owner);
      assert.equal(claimOf(ns).follower, edge, 'the old follower');
    }
    // One database stays in the owner's memory (a listener holds it), the other is evicted.
    const listener = createClient(nodes[edge], kept);
    const unsubscribe = onValue(listener.ref('items'), () => {});
    try {
      const from = nodes[owner].log().length;
      await logShows(nodes[owner], new RegExp(`idle databases evicted from memory.*${idle}`),
        'the idle database evicted', { from });

      const joined = await cluster.join('n3');
      await waitFor(() => names.every((ns) => claimOf(ns)?.follower === 'n3'), 15_000,
        'n3 named the follower');
      // Both copies shipped and on n3's disk: nothing written meanwhile, so only a catch-up
      // without a write can have sent them.
      await waitFor(async () => await followerMetric(nodes[owner], 'replication_copies_total', 'n3') >= 2
        && await followerMetric(nodes[owner], 'replication_lag_records', 'n3') === 0,
      15_000, 'the copies on n3');
      // n3 may take over only once the owner has put it in each database's sync set in etcd
      // (decision 58), which follows its acknowledgement of the copy: on a busy machine that
      // etcd transaction can come later than the metrics above.
      await waitFor(() => names.every((ns) => claimOf(ns)?.sync?.includes('n3')), 15_000,
        'n3 in the sync sets');
      assert.ok(joined.running);

      await nodes[owner].kill('SIGKILL');
      // n3 is placed first among the nodes left: it claims each database on its next use.
      for (const ns of names) {
        let served;
        await waitFor(async () => {
          const r = await fetch(`http://127.0.0.1:${nodes[edge].port}/items.json?ns=${ns}`);
          if (!r.ok) return false;
          served = await r.json();
          return claimOf(ns)?.owner === 'n3';
        }, 20_000, `n3 owns ${ns}`);
        assert.deepEqual(served, written[ns], `${ns} as n3 serves it`);
      }
    } finally {
      unsubscribe();
      await listener.dispose();
    }
  });
});
