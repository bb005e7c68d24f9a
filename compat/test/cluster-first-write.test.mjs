// The first write to a new database in a cluster on etcd (issue #21, docs/cluster.md): nobody
// holds the database yet, so the node placement names claims it in etcd, and the write waits
// for that claim instead of being refused "claiming; retry". Writes here are sent once, never
// retried: an SDK does not resend a refused write, and neither does an application's REST call.
// Also many new databases at once (their claims go to etcd in batches).
//
// Needs etcd (Debian's etcd-server, /usr/bin/etcd, or HEARTH_TEST_ETCD); skipped without it.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { get, ref, set } from 'firebase/database';
import { createClient, uniqueNs } from '../lib/harness.mjs';
import { withTimeout } from '../lib/util.mjs';
import { ETCD, etcdClusterSuite } from '../lib/cluster.mjs';

const IDS = ['n1', 'n2', 'n3'];

describe('the first write to a new database in a cluster', { skip: !fs.existsSync(ETCD) && 'no etcd' }, () => {
  const cluster = etcdClusterSuite(IDS);
  const { nodes } = cluster;

  it('succeeds over WebSocket on whichever node the client reaches', { timeout: 60_000 }, async () => {
    for (const id of IDS) {
      for (let i = 0; i < 4; i += 1) {
        const ns = uniqueNs(`first${id}`);
        const client = createClient(nodes[id], ns);
        try {
          await withTimeout(set(ref(client.db, 'greeting'), { from: id, i }), 10_000, `the first write to ${ns} through ${id}`);
          const seen = await withTimeout(get(ref(client.db, 'greeting')), 10_000, 'the read');
          assert.deepEqual(seen.val(), { from: id, i });
          const claim = cluster.claimOf(ns);
          assert.ok(claim?.owner, `${ns} has an owner in etcd`);
          assert.equal(claim.epoch, 1, 'claimed once');
        } finally {
          await client.dispose();
        }
      }
    }
  });

  it('succeeds over REST on whichever node the request reaches', { timeout: 60_000 }, async () => {
    for (const id of IDS) {
      for (let i = 0; i < 4; i += 1) {
        const ns = uniqueNs(`firstrest${id}`);
        const url = `http://127.0.0.1:${nodes[id].port}/a/b.json?ns=${ns}`;
        const put = await fetch(url, { method: 'PUT', body: JSON.stringify({ i }) });
        assert.equal(put.status, 200, `the first PUT to ${ns} through ${id}: ${await put.clone().text()}`);
        const other = IDS[(IDS.indexOf(id) + 1) % IDS.length];
        const read = await fetch(`http://127.0.0.1:${nodes[other].port}/a/b.json?ns=${ns}`);
        assert.deepEqual(await read.json(), { i }, 'read back through another node');
      }
    }
  });

  it('succeeds for 120 new databases at once', { timeout: 90_000 }, async () => {
    const namespaces = Array.from({ length: 120 }, (_, i) => uniqueNs(`burst${i}`));
    const clients = namespaces.map((ns, i) => createClient(nodes[IDS[i % IDS.length]], ns));
    try {
      const writes = clients.map((client, i) =>
        withTimeout(set(ref(client.db, 'n'), i), 20_000, `the first write to ${namespaces[i]}`));
      const outcomes = await Promise.allSettled(writes);
      const refused = outcomes.filter((o) => o.status === 'rejected').map((o) => String(o.reason));
      assert.deepEqual(refused, [], 'no first write refused');
      const owners = new Set(namespaces.map((ns) => cluster.claimOf(ns)?.owner));
      assert.ok(!owners.has(undefined), 'every database is claimed');
      assert.ok(owners.size > 1, 'the databases are spread over the nodes');
    } finally {
      await Promise.all(clients.map((client) => client.dispose()));
    }
  });
});
