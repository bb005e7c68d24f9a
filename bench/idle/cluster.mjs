// Two Hearth nodes on etcd for bench/idle/idle.mjs's edge mode (IDLE_EDGE=1): node `a` owns
// the database, node `b` holds the connections and forwards their sessions to `a` over the
// node link, keeping what each needs to move (docs/cluster.md, Forwarding). Loopback only;
// `stop()` ends etcd and both nodes.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const ETCD = process.env.HEARTH_TEST_ETCD || '/usr/bin/etcd';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function freePort(host = '127.0.0.1') {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, host, () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function until(what, ok, ms = 20_000) {
  const deadline = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

async function status(url) {
  try {
    return (await fetch(url)).status;
  } catch {
    return 0;
  }
}

/** Starts etcd and nodes `a` and `b`; resolves with their ports, pids and a database `a` owns. */
export async function startPair(bin) {
  const dir = mkdtempSync(join(tmpdir(), 'hearth-idle-edge-'));
  const processes = [];
  const stop = async () => {
    for (const child of processes) child.kill('SIGKILL');
    await sleep(200);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const [client, peer] = [await freePort(), await freePort()];
    const etcdUrl = `http://127.0.0.1:${client}`;
    const peerUrl = `http://127.0.0.1:${peer}`;
    processes.push(spawn(ETCD, ['--data-dir', join(dir, 'etcd'), '--name', 'idle',
      '--listen-client-urls', etcdUrl, '--advertise-client-urls', etcdUrl,
      '--listen-peer-urls', peerUrl, '--initial-advertise-peer-urls', peerUrl,
      '--initial-cluster', `idle=${peerUrl}`], { stdio: 'ignore' }));
    await until('etcd', async () => (await status(`${etcdUrl}/health`)) === 200);
    const secret = join(dir, 'secret');
    writeFileSync(secret, 'the idle benchmark cluster\n');
    const nodes = {};
    for (const [i, id] of ['a', 'b'].entries()) {
      const host = `127.0.0.${2 + i}`;
      const port = await freePort();
      const child = spawn(bin, ['serve', '--dev', '--listen', `127.0.0.1:${port}`,
        '--data-dir', join(dir, id), '--cluster-etcd', etcdUrl, '--node-id', id,
        '--advertise', `${host}:${await freePort(host)}`, '--cluster-secret-file', secret,
        '--cluster-plaintext'],
      { stdio: ['ignore', 'ignore', 'ignore'] });
      processes.push(child);
      nodes[id] = { port, pid: child.pid };
    }
    for (const node of Object.values(nodes)) {
      await until('the nodes ready', async () => (await status(`http://127.0.0.1:${node.port}/readyz`)) === 200);
    }
    // A database that `a` owns: claimed by its first write, whichever node it goes through.
    let ns = null;
    for (let i = 0; i < 64 && !ns; i++) {
      const name = `idle${i}`;
      const put = await fetch(`http://127.0.0.1:${nodes.b.port}/probe.json?ns=${name}`, { method: 'PUT', body: 'true' });
      if (!put.ok) continue;
      const out = execFileSync(bin, ['cluster', 'status', '--etcd', etcdUrl, '--json']);
      const claim = JSON.parse(out.toString()).databases.find((d) => d.namespace === name);
      if (claim?.owner === 'a') ns = name;
    }
    if (!ns) throw new Error('no database placed on node a');
    return { owner: nodes.a, edge: nodes.b, ns, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
