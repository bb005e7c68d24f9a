// A node of an etcd cluster answers /readyz 200 only once it has joined: its key among the
// live nodes and a link up to every other live node (docs/cluster.md "Health"). A load
// balancer that sent it clients earlier would see the other nodes' databases fail. Once
// joined it stays ready when a peer goes: every node unready at once would empty the
// balancer. A node whose links cannot come up (here: the wrong shared secret) stays 503.
//
// Needs etcd (Debian's etcd-server, /usr/bin/etcd, or HEARTH_TEST_ETCD); skipped without it.

import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { HearthServer, freePort } from '../lib/server.mjs';
import { ETCD, logShows, startEtcdCluster } from '../lib/cluster.mjs';

async function readyz(node) {
  const r = await fetch(`http://127.0.0.1:${node.port}/readyz`);
  return { status: r.status, body: await r.json() };
}

/** The answer of `node`'s /readyz once it is `status`, polled for up to `ms`. */
async function readyzBecomes(node, status, ms = 15_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const answer = await readyz(node);
    if (answer.status === status) return answer;
    if (Date.now() > deadline) throw new Error(`/readyz stayed ${answer.status}: ${JSON.stringify(answer.body)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('/readyz of a node of a cluster', { skip: !fs.existsSync(ETCD) && 'no etcd' }, () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-ready-'));
  const running = [];
  let etcd;
  after(async () => {
    await Promise.allSettled(running.map((node) => node.kill('SIGKILL')));
    etcd?.proc.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** Starts node `id` on etcd with the secret in `secret`; its link on 127.0.0.`host`. */
  async function join(id, secret, host) {
    const address = `127.0.0.${host}`;
    const node = await HearthServer.start({
      threads: 1,
      extraArgs: ['--cluster-etcd', etcd.url, '--node-id', id,
        '--advertise', `${address}:${await freePort(address)}`,
        '--cluster-lease-ttl-secs', '2', '--cluster-secret-file', secret,
        '--cluster-plaintext'],
    });
    running.push(node);
    return node;
  }

  it('is 503 "joining" until the links are up, then 200, and stays 200 when a peer goes', { timeout: 60_000 }, async () => {
    const started = await startEtcdCluster(dir, ['a']);
    etcd = started.etcd;
    const a = started.nodes.a;
    running.push(a);
    await readyzBecomes(a, 200);

    // b cannot prove the cluster's secret, so no link to a comes up: joined to etcd, not ready.
    const wrong = path.join(dir, 'wrong-secret');
    fs.writeFileSync(wrong, 'not the secret of this test cluster\n');
    const b = await join('b', wrong, 3);
    const refused = await readyzBecomes(b, 503);
    assert.equal(refused.body.status, 'joining');
    // Still 503 a while later: the link never comes up.
    await new Promise((r) => setTimeout(r, 1_500));
    const later = await readyz(b);
    assert.equal(later.status, 503);
    assert.match(later.body.reason, /link to node a|live nodes/);
    // a joined before b came and stays ready although its link to b is down.
    assert.equal((await readyz(a)).status, 200);

    // c has the right secret: ready once its link to a is up (b has left with its lease).
    await b.kill('SIGKILL');
    const c = await join('c', path.join(dir, 'secret'), 4);
    await readyzBecomes(c, 200);
    await logShows(c, /node link up/, 'c linked');

    // a peer lost after joining: both stay ready while its lease runs out and after.
    await c.kill('SIGKILL');
    for (let i = 0; i < 10; i++) {
      assert.equal((await readyz(a)).status, 200);
      await new Promise((r) => setTimeout(r, 300));
    }
  });
});
