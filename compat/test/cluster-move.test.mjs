// Moving one database while every node stays up (issue #21, docs/cluster.md "Moving one
// database"): `hearth cluster move` has the owner stop the database's writes for a moment,
// wait until its follower has every one, and hand its claim to the follower with the next
// epoch. A client kept by another node follows the database without seeing a disconnect or
// a failed write; a client of the old owner itself reconnects and its SDK sends its writes
// again; every acknowledged write is stored; the old owner serves the database as an edge.
//
// Three nodes, clients on 127.0.0.1; `--durability strict --replication sync`.
//
// Needs etcd (Debian's etcd-server, /usr/bin/etcd, or HEARTH_TEST_ETCD); skipped without it.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { promisify } from 'node:util';
import { onValue } from 'firebase/database';
import { createClient, uniqueNs } from '../lib/harness.mjs';
import { waitFor } from '../lib/util.mjs';
import { hearthBinary } from '../lib/server.mjs';
import { ETCD, etcdClusterSuite, etcdRanked, firstWrite, writer } from '../lib/cluster.mjs';

const IDS = ['n1', 'n2', 'n3'];

describe('moving one database to its follower while every node stays up', { skip: !fs.existsSync(ETCD) && 'no etcd' }, () => {
  const cluster = etcdClusterSuite(IDS, ['--durability', 'strict', '--replication', 'sync']);
  const { nodes, claimOf } = cluster;

  it('hands the claim over with the next epoch, and no write is lost or refused', { timeout: 60_000 }, async () => {
    let ns;
    let order;
    do {
      ns = uniqueNs('move1');
      order = etcdRanked(IDS, ns);
    } while (order[0] === 'n1');
    const [owner, follower] = order;
    const kept = createClient(nodes.n1, ns);
    const direct = createClient(nodes[owner], ns);
    let seen = {};
    const unsubscribe = onValue(kept.ref('items'), (snap) => {
      seen = snap.val() ?? {};
    });
    await firstWrite(nodes.n1, ns);
    const before = claimOf(ns);
    assert.equal(before.owner, owner);
    assert.equal(before.follower, follower);
    const viaEdge = writer(kept, 'e', 3);
    const onOwner = writer(direct, 'o', 1);
    try {
      await waitFor(() => viaEdge.acked.size >= 30 && onOwner.acked.size >= 10, 20_000, 'writes before the move');
      const { stdout } = await promisify(execFile)(hearthBinary(),
        ['cluster', 'move', '--etcd', cluster.etcd.url, ns, '--wait-secs', '20']);
      assert.match(stdout, new RegExp(`moved from ${owner} to ${follower} \\(epoch ${before.epoch + 1}\\)`));
      const after = claimOf(ns);
      assert.equal(after.owner, follower);
      assert.equal(after.epoch, before.epoch + 1);
      const [edgeCount, ownerCount] = [viaEdge.acked.size, onOwner.acked.size];
      await waitFor(() => viaEdge.acked.size >= edgeCount + 30 && onOwner.acked.size >= ownerCount + 10,
        20_000, 'writes after the move');
      await viaEdge.end();
      await onOwner.end();
      assert.deepEqual(viaEdge.refused, [], 'writes of the kept client refused across the move');
      assert.deepEqual(onOwner.refused, [], 'writes of the old owner\'s own client refused (its SDK sends them again)');
      // Every acknowledged write is stored, read through the old owner, an edge now.
      const r = await fetch(`http://127.0.0.1:${nodes[owner].port}/items.json?ns=${ns}`);
      assert.equal(r.status, 200);
      const served = (await r.json()) ?? {};
      const acked = new Map([...viaEdge.acked, ...onOwner.acked]);
      const missing = [...acked.keys()].filter((key) => served[key] !== acked.get(key));
      assert.deepEqual(missing, [], `acknowledged writes lost (${acked.size} acknowledged)`);
      // The kept listener holds what is stored.
      await waitFor(() => JSON.stringify(seen) === JSON.stringify(served), 10_000,
        'the kept listener holds what is stored');
      // The old owner follows the database now.
      assert.equal(claimOf(ns).follower, owner);
      // The kept client's session moved (its node counts it), the owner logged the move.
      const metrics = await (await fetch(`http://127.0.0.1:${nodes.n1.port}/metrics`,
        { headers: { authorization: 'Bearer owner' } })).text();
      const moved = Number(/^hearth_websocket_sessions_moved_total (\d+)/m.exec(metrics)?.[1] ?? 0);
      assert.ok(moved >= 1, `sessions counted as moved on n1: ${moved}`);
      assert.match(nodes[owner].log(), /database moved to its follower/);
    } finally {
      await viaEdge.end();
      await onOwner.end();
      unsubscribe();
      await kept.dispose();
      await direct.dispose();
    }
  });

  it('refuses to move a database nobody holds', { timeout: 20_000 }, async () => {
    const ns = uniqueNs('move2');
    const failed = await promisify(execFile)(hearthBinary(),
      ['cluster', 'move', '--etcd', cluster.etcd.url, ns, '--wait-secs', '2']).catch((error) => error);
    assert.equal(failed.code, 1);
    assert.match(failed.stderr, /not claimed by any node/);
  });
});
