// Log shipping to a follower node (issue #21, docs/cluster-link.md "Replication"): under
// `--replication sync` and `--durability strict` a write is acknowledged only once the owner
// and the database's follower (the runner-up of the placement) both have it on disk.
//
// Three nodes serve clients on 127.0.0.1 and their links on 127.0.0.2-4. The proof: SIGKILL
// the owner right after acknowledgements (and the follower too, so that only its disk
// counts), start the follower's data directory as a standalone server without cluster flags,
// and find every acknowledged write there. Barriers are replies and log lines, never pauses.

import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { set } from 'firebase/database';
import { createClient, T, uniqueNs } from '../lib/harness.mjs';
import { HearthServer, freePort } from '../lib/server.mjs';
import { withTimeout } from '../lib/util.mjs';
import { logShows, ranked } from '../lib/cluster.mjs';

const IDS = ['a', 'b', 'c'];
const LINK_HOSTS = { a: '127.0.0.2', b: '127.0.0.3', c: '127.0.0.4' };

/** A fresh namespace owned by `owner` and followed by `follower`. */
function nsPlaced(owner, follower) {
  for (;;) {
    const ns = uniqueNs('rep');
    const [first, second] = ranked(IDS, ns);
    if (first === owner && second === follower) return ns;
  }
}

async function metrics(server) {
  const res = await fetch(`http://${server.host}/metrics`, { headers: { authorization: 'Bearer owner' } });
  return await res.text();
}

describe('log shipping to a follower node', () => {
  const nodes = {};
  let secretFile;
  let peers;

  async function startNode(id) {
    nodes[id] = await HearthServer.start({
      threads: 2,
      extraArgs: ['--cluster-peers', peers, '--node-id', id, '--cluster-secret-file', secretFile,
        '--cluster-plaintext'],
    });
  }

  before(async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-replication-'));
    secretFile = path.join(dir, 'secret');
    fs.writeFileSync(secretFile, 'a shared secret of the test cluster\n');
    const ports = {};
    for (const id of IDS) ports[id] = await freePort();
    peers = IDS.map((id) => `${id}=${LINK_HOSTS[id]}:${ports[id]}`).join(',');
    for (const id of IDS) await startNode(id);
    // a dials b and c; b dials c: each sees its two links up.
    for (const id of IDS) await logShows(nodes[id], /node link up[^\n]*\n[\s\S]*node link up/, `both links on ${id}`);
  }, { timeout: 40_000 });

  after(async () => {
    await Promise.allSettled(Object.values(nodes).map((n) => n.kill('SIGKILL')));
  }, { timeout: 20_000 });

  it('a write waits for its follower: held while the follower is paused, acknowledged once it has it', T, async () => {
    const ns = nsPlaced('b', 'c');
    const writer = createClient(nodes.b, ns);
    try {
      await set(writer.ref('first'), 1);
      // On a busy machine the follower may take longer than the owner's 2 s to acknowledge
      // the database's first record (its full copy): the owner then acknowledges alone, by
      // design, until the follower has caught up. The test starts from a caught-up follower.
      const caughtUp = Date.now() + 20_000;
      while (!/hearth_replication_degraded\{follower="c"\} 0\b/.test(await metrics(nodes.b))
        || /hearth_replication_lag_records\{follower="c"\} [1-9]/.test(await metrics(nodes.b))) {
        if (Date.now() > caughtUp) throw new Error(`the follower never caught up:\n${nodes.b.logTail(40)}`);
        await new Promise((r) => setTimeout(r, 25));
      }
      nodes.c.proc.kill('SIGSTOP');
      // When each was acknowledged, after how long: the owner may stop waiting for a silent
      // follower only after 2 s (ACK_TIMEOUT_MS), however busy the machine is.
      const sent = Date.now();
      let acked = false;
      const write = set(writer.ref('held'), 2).then(() => (acked = Date.now() - sent));
      // A REST write waits the same way.
      let answered = false;
      const put = fetch(`http://${nodes.b.host}/rest.json?ns=${ns}&auth=owner`, { method: 'PUT', body: '7' })
        .then((res) => { answered = Date.now() - sent; return res; });
      try {
        // Shipped and not acknowledged: the lag shows it (a barrier), and the write waits.
        const deadline = Date.now() + 5_000;
        while (!/hearth_replication_lag_records\{follower="c"\} [1-9]/.test(await metrics(nodes.b))) {
          if (Date.now() > deadline) throw new Error('no lag toward c in /metrics');
          await new Promise((r) => setTimeout(r, 25));
        }
        // Well inside the 2 s the owner waits for a silent follower.
        await new Promise((r) => setTimeout(r, 500));
        // A busy machine may delay this check past the 2 s; an answer before them is a
        // write acknowledged without the follower.
        // The owner's log says why, if it let one go (a link replaced or lost under load is
        // a reason of its own, which this test does not mean to exercise).
        const why = () => `; the owner's log:\n${nodes.b.logTail(40)}\nthe follower's:\n${nodes.c.logTail(20)}`;
        assert.ok(acked === false || acked >= 1_900, `acknowledged after ${acked} ms, before the follower had it${why()}`);
        assert.ok(answered === false || answered >= 1_900, `a REST write answered after ${answered} ms, before the follower had it${why()}`);
      } finally {
        nodes.c.proc.kill('SIGCONT');
      }
      await withTimeout(write, 10_000, 'the held write');
      assert.equal((await withTimeout(put, 10_000, 'the held REST write')).status, 200);
    } finally {
      await writer.dispose();
    }
  });

  it('with the follower stopped, writes are acknowledged on the owner alone, it says so, and it is caught up when back', T, async () => {
    const ns = nsPlaced('b', 'c');
    const writer = createClient(nodes.b, ns);
    try {
      await set(writer.ref('before'), 1);
      await nodes.c.kill('SIGKILL');
      const from = nodes.b.log().length;
      // Acknowledged once the owner stops waiting for the lost follower (bounded).
      await withTimeout(set(writer.ref('after'), 2), 10_000, 'the write without its follower');
      await logShows(nodes.b, /replication degraded/, 'the degraded line', { from });
      assert.match(await metrics(nodes.b), /hearth_replication_degraded\{follower="c"\} [1-9]/);
      await nodes.c.start();
      // Each shard of b follows its links on its own tick, and the lag is their sum: only once
      // every shard that degraded has resumed (and queued its catch-up copies, counted in the
      // lag before the line is logged) does a lag of zero mean the copy is acknowledged.
      const shards = (pattern) =>
        new Set([...nodes.b.log().slice(from).matchAll(pattern)].map((m) => m[1] ?? m[2]));
      const deadline = Date.now() + 10_000;
      for (;;) {
        const degraded = shards(/replication degraded[^\n]*shard=(\d+)|shard=(\d+)[^\n]*replication degraded/g);
        const resumed = shards(/replication to the follower resumed[^\n]*shard=(\d+)|shard=(\d+)[^\n]*replication to the follower resumed/g);
        if (degraded.size > 0 && [...degraded].every((s) => resumed.has(s))) break;
        if (Date.now() > deadline) throw new Error(`not every shard resumed\n${nodes.b.logTail(20)}`);
        await new Promise((r) => setTimeout(r, 25));
      }
      // The database, written while c was away, is copied to it without another write: the
      // copy is acknowledged (the lag back to zero) once it is on c's disk.
      while (!/hearth_replication_lag_records\{follower="c"\} 0\b/.test(await metrics(nodes.b))) {
        if (Date.now() > deadline) throw new Error('the catch-up copy was not acknowledged');
        await new Promise((r) => setTimeout(r, 25));
      }
      await nodes.c.kill('SIGKILL');
      const alone = await HearthServer.start({ threads: 2, dataDir: nodes.c.dataDir });
      try {
        const res = await fetch(`http://${alone.host}/.json?ns=${ns}&auth=owner`);
        assert.deepEqual(await res.json(), { before: 1, after: 2 });
      } finally {
        await alone.kill('SIGKILL');
      }
      await nodes.c.start();
      await set(writer.ref('again'), 3);
    } finally {
      await writer.dispose();
    }
  });

  it('every acknowledged write survives the loss of the owner, on the follower\'s disk', T, async () => {
    const ns = nsPlaced('a', 'b');
    const writer = createClient(nodes.a, ns);
    const acked = new Set();
    const total = 1000;
    let enough;
    const halfway = new Promise((resolve) => (enough = resolve));
    // Enough writes in flight that some are acknowledged and others not when the owner dies.
    for (let i = 0; i < total; i++) {
      set(writer.ref(`w/k${i}`), i).then(
        () => {
          acked.add(i);
          if (acked.size === 100) enough();
        },
        () => {},
      );
    }
    await withTimeout(halfway, 15_000, '100 acknowledgements');
    await nodes.a.kill('SIGKILL');
    const ackedAtKill = [...acked];
    await writer.dispose();
    await nodes.b.kill('SIGKILL');
    // The follower's data directory, as a server of its own with no cluster at all.
    const alone = await HearthServer.start({ threads: 2, dataDir: nodes.b.dataDir });
    try {
      const res = await fetch(`http://${alone.host}/w.json?ns=${ns}&auth=owner`);
      const stored = (await res.json()) ?? {};
      const missing = ackedAtKill.filter((i) => stored[`k${i}`] !== i);
      assert.deepEqual(missing, [], `acknowledged writes missing on the follower (${ackedAtKill.length} acknowledged)`);
      assert.ok(ackedAtKill.length >= 100);
    } finally {
      await alone.kill('SIGKILL');
    }
  });

  it('a database\'s settings and ruleset history reach the follower\'s disk with its rules', T, async () => {
    // The test before leaves a and b killed: fresh nodes in their place.
    for (const id of ['a', 'b']) if (nodes[id].exit !== null) await startNode(id);
    for (const id of ['a', 'b']) await logShows(nodes[id], /node link up[^\n]*\n[\s\S]*node link up/, `both links on ${id}`);
    const ns = nsPlaced('a', 'b');
    const call = async (file, method, body) => {
      const res = await fetch(`http://${nodes.a.host}/.settings/${file}?ns=${ns}`, { method, body, headers: { authorization: 'Bearer owner' } });
      const text = await res.text();
      assert.equal(res.status, 200, `${method} ${file}: ${text}`);
      return JSON.parse(text);
    };
    const rules = (read) => JSON.stringify({ rules: { '.read': read, '.write': true } });
    await call('rules.json', 'PUT', rules(false));
    await call('rules.json', 'PUT', rules(true));
    await call('ruleset_labels.json', 'PUT', '{"stable":"1"}');
    await call('defaultWriteSizeLimit.json', 'PUT', '"medium"');
    const history = await call('rulesets.json', 'GET');
    await nodes.a.kill('SIGKILL');
    await nodes.b.kill('SIGKILL');
    const alone = await HearthServer.start({ threads: 2, dataDir: nodes.b.dataDir });
    try {
      const read = async (file) => (await fetch(`http://${alone.host}/.settings/${file}?ns=${ns}&auth=owner`)).json();
      assert.deepEqual(await read('rulesets.json'), history);
      assert.equal(await read('defaultWriteSizeLimit.json'), 'medium');
      assert.equal((await fetch(`http://${alone.host}/x.json?ns=${ns}`)).status, 401, 'the rolled-back rules are in effect');
    } finally {
      await alone.kill('SIGKILL');
    }
  });
  it('an audited database\'s trail reaches the follower: each acknowledged write traced once on its disk', T, async () => {
    for (const id of ['a', 'b']) if (nodes[id].exit !== null) await startNode(id);
    for (const id of ['a', 'b']) await logShows(nodes[id], /node link up[^\n]*\n[\s\S]*node link up/, `both links on ${id}`);
    const ns = nsPlaced('a', 'b');
    const on = await fetch(`http://${nodes.a.host}/.settings/audit.json?ns=${ns}`, { method: 'PUT', body: '{"enabled":true}', headers: { authorization: 'Bearer owner' } });
    assert.equal(on.status, 200, await on.text());
    const writer = createClient(nodes.a, ns);
    const acked = new Set();
    let enough;
    const halfway = new Promise((resolve) => (enough = resolve));
    for (let i = 0; i < 600; i++) {
      set(writer.ref(`w/k${i}`), i).then(
        () => {
          acked.add(`/w/k${i}`);
          if (acked.size === 100) enough();
        },
        () => {},
      );
    }
    await withTimeout(halfway, 15_000, '100 acknowledgements');
    await nodes.a.kill('SIGKILL');
    const ackedAtKill = [...acked];
    await writer.dispose();
    await nodes.b.kill('SIGKILL');
    const alone = await HearthServer.start({ threads: 2, dataDir: nodes.b.dataDir });
    try {
      const res = await fetch(`http://${alone.host}/.settings/auditTrail.json?ns=${ns}&limit=10000&auth=owner`);
      assert.equal(res.status, 200);
      const entries = (await res.text()).split('\n').filter(Boolean).map((line) => JSON.parse(line));
      const count = new Map();
      for (const e of entries) count.set(e.path, (count.get(e.path) ?? 0) + 1);
      const untraced = ackedAtKill.filter((at) => count.get(at) !== 1);
      assert.deepEqual(untraced, [], `${ackedAtKill.length} acknowledged, ${entries.length} traced`);
      assert.ok([...count.values()].every((n) => n === 1), 'none twice');
      assert.ok(entries.every((e) => e.transport === 'websocket' && e.rules[0] === 'open'));
    } finally {
      await alone.kill('SIGKILL');
    }
  });
});
