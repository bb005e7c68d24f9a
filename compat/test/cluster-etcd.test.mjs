// Three nodes placed by etcd and joined by the node-to-node link (issue #21, docs/cluster.md):
// a client on any node reaches a database another node owns (WebSocket and REST); when the owner dies (SIGKILL),
// another node claims the database with the next epoch once the owner's lease ends, and the
// clients of the surviving nodes write again. Data the dead owner held is not asserted
// (replication is not here). Barriers are acknowledged writes, seen values and etcd's
// answers, polled: never pauses that hope.
//
// Needs etcd (Debian's etcd-server, /usr/bin/etcd, or HEARTH_TEST_ETCD); skipped without it.

import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { set } from 'firebase/database';
import { createClient, uniqueNs } from '../lib/harness.mjs';
import { hearthBinary } from '../lib/server.mjs';
import { valueWhere, withTimeout } from '../lib/util.mjs';
import { ETCD, etcdClusterSuite } from '../lib/cluster.mjs';

const IDS = ['n1', 'n2', 'n3'];

/** Sets `r` to `value`, again after each refusal (a claim being made, an owner gone). */
async function setAcknowledged(r, value, ms = 15_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      return await withTimeout(set(r, value), ms, 'the write');
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

describe('a cluster on etcd forwards over the node link', { skip: !fs.existsSync(ETCD) && 'no etcd' }, () => {
  const cluster = etcdClusterSuite(IDS);
  const { nodes } = cluster;
  const status = () => JSON.parse(execFileSync(hearthBinary(),
    ['cluster', 'status', '--etcd', cluster.etcd.url, '--json']).toString());

  it('a REST PUT and GET through a node that does not own the database reach its owner', { timeout: 40_000 }, async () => {
    const url = (id, ns, p) => `http://127.0.0.1:${nodes[id].port}/${p}.json?ns=${ns}`;
    /** A REST PUT through `id`, again after each refusal (a claim being made). */
    async function put(id, ns, p, value) {
      const deadline = Date.now() + 15_000;
      for (;;) {
        const r = await fetch(url(id, ns, p), { method: 'PUT', body: JSON.stringify(value) });
        if (r.status === 200) return r.json();
        if (Date.now() > deadline) throw new Error(`PUT through ${id}: ${r.status} ${await r.text()}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    // A database first used on n1 whose owner is another node (placement decides).
    let ns;
    let owner;
    for (;;) {
      ns = uniqueNs('etcdrest');
      await put('n1', ns, 'probe', true);
      owner = status().databases.find((d) => d.namespace === ns)?.owner;
      if (owner && owner !== 'n1') break;
    }
    const third = IDS.find((id) => id !== 'n1' && id !== owner);
    // Through n1, which does not own it: answered by the owner (a non-owner refuses writes
    // and has no copy of its data).
    assert.deepEqual(await put('n1', ns, 'room', { msg: 'over rest' }), { msg: 'over rest' });
    for (const id of ['n1', third, owner]) {
      const r = await fetch(url(id, ns, 'room/msg'));
      assert.equal(r.status, 200, `GET through ${id}`);
      assert.equal(await r.json(), 'over rest', `GET through ${id}`);
    }
    assert.equal(status().databases.find((d) => d.namespace === ns).owner, owner);
  });

  it('a write on one node reaches the owner and a listener on a third; after SIGKILL of the owner another claims it', { timeout: 40_000 }, async () => {
    // A database first used on n1 whose owner is another node (placement decides).
    let ns;
    let owner;
    for (;;) {
      ns = uniqueNs('etcd');
      const probe = createClient(nodes.n1, ns);
      await setAcknowledged(probe.ref('probe'), true);
      await probe.dispose();
      owner = status().databases.find((d) => d.namespace === ns)?.owner;
      if (owner && owner !== 'n1') break;
    }
    const third = IDS.find((id) => id !== 'n1' && id !== owner);
    const epoch = status().databases.find((d) => d.namespace === ns).epoch;
    const writer = createClient(nodes.n1, ns);
    const listener = createClient(nodes[third], ns);
    const seen = valueWhere(listener.ref('room/msg'), (v) => v === 'hello', 'the message on the third node');
    await set(writer.ref('room/msg'), 'hello');
    await seen;

    await nodes[owner].kill('SIGKILL');
    const again = valueWhere(listener.ref('room/msg'), (v) => v === 'again', 'the write after the failover');
    await setAcknowledged(writer.ref('room/msg'), 'again', 20_000);
    await again;
    const now = status().databases.find((d) => d.namespace === ns);
    assert.notEqual(now.owner, owner);
    assert.equal(now.epoch, epoch + 1);
    await Promise.all([writer.dispose(), listener.dispose()]);
  });
});
