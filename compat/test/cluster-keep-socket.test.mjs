// The edge keeps the client's socket when its database's owner changes (issue #21,
// docs/cluster.md "Failover" and "Draining a node"): a client connected to a node that only
// forwards its session (an edge) stays connected while the owner behind it is killed with
// SIGKILL, or stopped with SIGTERM (a planned move). The edge opens a session on the next
// owner (the follower, which claims the database), replays the client's listens and
// onDisconnect operations there, and answers the requests the old owner left unanswered with
// an error, so that no SDK call hangs and nothing is sent twice.
//
// Three nodes on etcd, `--replication sync --durability strict`. The kept client writes
// during the change and listens to everything; `.info/connected` must never turn false; its
// listener must end with what another client wrote after the change; every acknowledged
// write must be stored; every write promise must settle within a bound; and its onDisconnect
// operation must run once, when it really goes, not when its session moved.
//
// Needs etcd (Debian's etcd-server, /usr/bin/etcd, or HEARTH_TEST_ETCD); skipped without it.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { onDisconnect, onValue, ref, set } from 'firebase/database';
import { createClient, uniqueNs } from '../lib/harness.mjs';
import { sleep, waitFor, withTimeout } from '../lib/util.mjs';
import { ETCD, etcdClusterSuite, etcdRanked } from '../lib/cluster.mjs';

const IDS = ['n1', 'n2', 'n3'];

/** The longest an SDK write may take to settle, through the change included. */
const WRITE_BOUND_MS = 20_000;

/** A database that n1 neither owns nor follows: n1 is only the edge of its sessions. */
function edgeOnlyNs(prefix) {
  for (;;) {
    const ns = uniqueNs(prefix);
    const order = etcdRanked(IDS, ns);
    if (order[2] === 'n1') return { ns, order };
  }
}

async function servedVia(node, ns, path) {
  const r = await fetch(`http://127.0.0.1:${node.port}/${path}.json?ns=${ns}`);
  assert.equal(r.status, 200, `GET ${path}: ${r.status}`);
  return r.json();
}

/**
 * Runs the scenario: the kept client on n1 writes and listens, `change(owner)` replaces the
 * owner, then another client writes on the new owner.
 */
async function keptThrough(cluster, prefix, change) {
  const { nodes, claimOf } = cluster;
  const { ns, order } = edgeOnlyNs(prefix);
  const kept = createClient(nodes.n1, ns);
  let falses = 0;
  let connected = false;
  const offConnected = onValue(ref(kept.db, '.info/connected'), (snap) => {
    if (snap.val() === true) connected = true;
    else if (connected) falses += 1;
  });
  let items = {};
  const offItems = onValue(kept.ref('items'), (snap) => {
    items = snap.val() ?? {};
  });
  // A listener on the follower: its session moves to its own node when that one claims.
  const local = createClient(nodes[order[1]], ns);
  const localState = { falses: 0, connected: false, items: {} };
  const offLocalConnected = onValue(ref(local.db, '.info/connected'), (snap) => {
    if (snap.val() === true) localState.connected = true;
    else if (localState.connected) localState.falses += 1;
  });
  const offLocalItems = onValue(local.ref('items'), (snap) => {
    localState.items = snap.val() ?? {};
  });
  const acked = new Map();
  const hung = [];
  let next = 0;
  let stop = false;
  const loops = [];
  try {
    await waitFor(() => connected && localState.connected, 15_000, 'the kept clients connected');
    // Until every node's view holds every node, the database may move once at the start (a
    // write in flight then fails with `unavailable`): tried until it holds.
    await waitFor(async () => {
      try {
        await withTimeout(set(kept.ref('presence/kept'), 'online'), 10_000, 'the first write');
        await withTimeout(onDisconnect(kept.ref('presence/kept')).set('gone'), 10_000, 'onDisconnect');
        return true;
      } catch {
        return false;
      }
    }, 30_000, 'the first write and the onDisconnect');
    assert.equal(claimOf(ns)?.owner, order[0], 'the owner placement names');
    // Writers: each write is a new key, kept once acknowledged; each must settle in time.
    for (let i = 0; i < 3; i++) {
      loops.push((async () => {
        while (!stop) {
          const value = next++;
          const key = `k${String(value).padStart(5, '0')}`;
          try {
            await withTimeout(set(kept.ref(`items/${key}`), value), WRITE_BOUND_MS, `write ${key}`);
            acked.set(key, value);
          } catch (error) {
            if (/timeout after/.test(error.message)) hung.push(key);
            await sleep(50);
          }
        }
      })());
    }
    await waitFor(() => acked.size >= 30, 20_000, 'writes before the change');
    const before = acked.size;
    await change(nodes[order[0]]);
    await waitFor(() => claimOf(ns)?.owner === order[1], 20_000, 'the follower\'s claim');
    await waitFor(() => acked.size >= before + 30, 20_000, 'writes after the change');
    // Another client writes on the new owner: the kept client's listener must get it.
    const other = createClient(nodes[order[1]], ns);
    await withTimeout(set(other.ref('items/zz-after'), 'written after the change'), 15_000, 'the other write');
    await other.dispose();
    await waitFor(() => items['zz-after'] === 'written after the change', 15_000,
      'the kept listener sees the write made after the change');
    await waitFor(() => localState.items['zz-after'] === 'written after the change', 15_000,
      'the follower\'s kept listener sees it too');
    stop = true;
    await Promise.all(loops);
    assert.deepEqual(hung, [], 'write promises that never settled');
    assert.equal(falses, 0, '.info/connected turned false: the socket was closed');
    assert.equal(localState.falses, 0, 'the follower\'s client lost its socket');
    const served = (await servedVia(nodes.n1, ns, 'items')) ?? {};
    const missing = [...acked.keys()].filter((key) => served[key] !== acked.get(key));
    assert.deepEqual(missing, [], `acknowledged writes lost (${acked.size} acknowledged)`);
    // The listener ends with the data as stored (refused writes reverted, nothing missed).
    await waitFor(() => JSON.stringify(items) === JSON.stringify(served), 10_000,
      'the kept listener holds what is stored');
    // Counted as moved by the edge.
    const metrics = await (await fetch(`http://127.0.0.1:${nodes.n1.port}/metrics`,
      { headers: { authorization: 'Bearer owner' } })).text();
    const moved = Number(/^hearth_websocket_sessions_moved_total (\d+)/m.exec(metrics)?.[1] ?? 0);
    assert.ok(moved >= 1, `sessions counted as moved on n1: ${moved}`);
    // The session moved: its onDisconnect did not run, and runs when the client goes.
    assert.equal(await servedVia(nodes.n1, ns, 'presence/kept'), 'online', 'onDisconnect ran on the move');
  } finally {
    stop = true;
    await Promise.all(loops);
    offItems();
    offConnected();
    offLocalItems();
    offLocalConnected();
    await local.dispose();
    await kept.dispose();
  }
  await waitFor(async () => (await servedVia(nodes.n1, ns, 'presence/kept')) === 'gone', 15_000,
    'the onDisconnect replayed on the new owner ran when the client went');
}

describe('the edge keeps the socket when the owner is killed', { skip: !fs.existsSync(ETCD) && 'no etcd' }, () => {
  const cluster = etcdClusterSuite(IDS, ['--durability', 'strict', '--replication', 'sync']);

  it('no disconnect, listens resumed, no write lost or left hanging', { timeout: 90_000 }, async () => {
    await keptThrough(cluster, 'keep-kill', (owner) => owner.kill('SIGKILL'));
  });
});

describe('the edge keeps the socket through a planned move', { skip: !fs.existsSync(ETCD) && 'no etcd' }, () => {
  const cluster = etcdClusterSuite(IDS, ['--durability', 'strict', '--replication', 'sync'],
    { leaseSecs: 10 });

  it('no disconnect, listens resumed, no write lost or left hanging', { timeout: 90_000 }, async () => {
    await keptThrough(cluster, 'keep-move', (owner) => owner.kill('SIGTERM'));
  });
});
