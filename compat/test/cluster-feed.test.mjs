// The change feed in a cluster on etcd (docs/change-feed.md): its ids carry the owner's fencing
// epoch with the log position; a feed opened through another node resumes from them; after a
// failover (SIGKILL of the owner) the follower's log is another log, so a position the old
// owner gave is refused with 410, never read against it, and a feed started again from `now`
// goes on with the new epoch.
//
// Three nodes, clients on 127.0.0.1 and links on 127.0.0.2-4; the feeds go through n1, which
// is never the owner. Needs etcd (Debian's etcd-server, /usr/bin/etcd, or HEARTH_TEST_ETCD).

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { uniqueNs } from '../lib/harness.mjs';
import { waitFor } from '../lib/util.mjs';
import { ETCD, etcdClusterSuite, etcdRanked, firstWrite } from '../lib/cluster.mjs';
import { SseStream } from './rest/rest-client.mjs';

const IDS = ['n1', 'n2', 'n3'];
const OWNER = { authorization: 'Bearer owner' };

const idOf = (event) => /^id: (.*)$/m.exec(event.raw)?.[1];

describe('the change feed on etcd', { skip: !fs.existsSync(ETCD) && 'no etcd' }, () => {
  const cluster = etcdClusterSuite(IDS, ['--durability', 'strict', '--replication', 'sync']);
  const { nodes, claimOf } = cluster;
  const url = (id, ns, p, params = {}) =>
    `http://127.0.0.1:${nodes[id].port}/${p}.json?${new URLSearchParams({ ns, ...params })}`;
  const put = async (ns, p, body) => {
    // Through the edge: forwarded to whichever node owns the database now.
    const r = await fetch(url('n1', ns, p), { method: 'PUT', headers: OWNER, body: JSON.stringify(body) });
    return r.status;
  };

  it('ids carry the epoch; a failover makes the old ones 410 and a new feed goes on', { timeout: 90_000 }, async () => {
    let ns;
    do {
      ns = uniqueNs('feed');
    } while (etcdRanked(IDS, ns)[0] === 'n1' || etcdRanked(IDS, ns)[1] === 'n1');
    await firstWrite(nodes.n1, ns);
    const claim = claimOf(ns);
    const feed = new SseStream(url('n1', ns, 'f', { changesSince: 'now' }), { headers: OWNER });
    try {
      await feed.untilData(1, 15_000);
      assert.equal(await put(ns, 'f/a', 1), 200);
      await feed.untilData(2, 15_000);
      const [start, write] = feed.dataEvents.map(idOf);
      assert.match(start, new RegExp(`^${claim.epoch}\\.\\d+$`), `ids ${start}, ${write}`);
      assert.ok(Number(write.split('.')[1]) > Number(start.split('.')[1]));
      feed.close();
      // Resumed through the edge from the first position: the write after it.
      const again = new SseStream(url('n1', ns, 'f', { changesSince: start }), { headers: OWNER });
      await again.untilData(1, 15_000);
      assert.deepEqual(again.dataEvents[0].data, { path: '/a', data: 1 });
      assert.equal(idOf(again.dataEvents[0]), write);
      again.close();

      await nodes[claim.owner].kill('SIGKILL');
      await waitFor(async () => (await put(ns, 'f/b', 2)) === 200, 30_000, 'a write after the failover');
      const now = claimOf(ns);
      assert.equal(now.epoch, claim.epoch + 1);
      // The old owner's position is not one of the new owner's: 410, and how to start again.
      const gone = await fetch(url('n1', ns, 'f', { changesSince: write }), {
        headers: { ...OWNER, accept: 'text/event-stream' },
      });
      assert.equal(gone.status, 410);
      assert.match((await gone.json()).error, /another owner[\s\S]*changesSince=now/);
      // Started again: the whole value, with the new owner's epoch, then its changes.
      const fresh = new SseStream(url('n1', ns, 'f', { changesSince: 'now' }), { headers: OWNER });
      try {
        await fresh.untilData(1, 15_000);
        assert.deepEqual(fresh.dataEvents[0].data, { path: '/', data: { a: 1, b: 2 } });
        assert.match(idOf(fresh.dataEvents[0]), new RegExp(`^${now.epoch}\\.\\d+$`));
        assert.equal(await put(ns, 'f/c', 3), 200);
        await fresh.untilData(2, 15_000);
        assert.deepEqual(fresh.dataEvents[1].data, { path: '/c', data: 3 });
      } finally {
        fresh.close();
      }
    } finally {
      feed.close();
    }
  });
});
