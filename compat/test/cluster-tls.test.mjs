// Mutual TLS on the node-to-node link (docs/cluster-link.md, "Security"; decision 59): nodes
// whose certificates the cluster's CA issued, each naming its node id, forward sessions to
// each other and replicate over TLS 1.3; a node whose certificate another CA issued gets no
// link (the others refuse it, and nothing is forwarded to or from it); the link's bytes are
// not plain text; and a node with the link but neither TLS nor --cluster-plaintext does not
// start.
//
// Three nodes of a static placement serve clients on 127.0.0.1 and their links on
// 127.0.0.2-4: n1 and n2 of the cluster's CA, n0 of another CA (it sorts first, so it is the
// one that dials, and the cluster's nodes are the ones that refuse it). n1 reaches n2's link
// through a relay of this test that records the bytes. Barriers are replies and log lines.

import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { get, set } from 'firebase/database';
import { createClient, T, uniqueNs } from '../lib/harness.mjs';
import { HearthServer, cleanEnv, freePort, hearthBinary } from '../lib/server.mjs';
import { logShows, ranked } from '../lib/cluster.mjs';
import { makeCa, makeNodeCert } from '../lib/certs.mjs';
import { withTimeout } from '../lib/util.mjs';

const IDS = ['n0', 'n1', 'n2'];
const LINK_HOSTS = { n0: '127.0.0.2', n1: '127.0.0.3', n2: '127.0.0.4' };

/** A fresh namespace owned by `owner` and followed by `follower`. */
function nsPlaced(owner, follower) {
  for (;;) {
    const ns = uniqueNs('tls');
    const [first, second] = ranked(IDS, ns);
    if (first === owner && (!follower || second === follower)) return ns;
  }
}

/** A TCP relay to `target` that keeps every byte it passes, both ways. */
async function relay(host, target) {
  const seen = [];
  const server = net.createServer((inbound) => {
    const outbound = net.connect(target.port, target.host);
    for (const [from, to] of [[inbound, outbound], [outbound, inbound]]) {
      from.on('data', (chunk) => {
        seen.push(chunk);
        to.write(chunk);
      });
      from.on('error', () => to.destroy());
      from.on('close', () => to.destroy());
    }
  });
  await new Promise((resolve) => server.listen(0, host, resolve));
  return { server, port: server.address().port, bytes: () => Buffer.concat(seen) };
}

describe('mutual TLS on the node-to-node link', () => {
  const nodes = {};
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-cluster-tls-'));
  const secretFile = path.join(dir, 'secret');
  let ca;
  let tap;
  let peers;

  function tlsArgs(cert, key, caFile) {
    return ['--cluster-tls-cert', cert, '--cluster-tls-key', key, '--cluster-ca', caFile];
  }

  before(async () => {
    fs.writeFileSync(secretFile, 'a shared secret of the test cluster\n');
    ca = makeCa(path.join(dir, 'ca'));
    const other = makeCa(path.join(dir, 'other'));
    const certs = { n1: makeNodeCert(ca, 'n1'), n2: makeNodeCert(ca, 'n2'), n0: makeNodeCert(other, 'n0') };
    // The impostor trusts both CAs: it accepts the cluster's certificates, so that the
    // refusal seen is the cluster's nodes refusing its own.
    const both = path.join(dir, 'both-cas.pem');
    fs.writeFileSync(both, fs.readFileSync(ca.cert, 'utf8') + fs.readFileSync(other.cert, 'utf8'));
    const ports = {};
    for (const id of IDS) ports[id] = await freePort(LINK_HOSTS[id]);
    const entry = (id, port = ports[id]) => `${id}=${LINK_HOSTS[id]}:${port}`;
    peers = IDS.map((id) => entry(id)).join(',');
    // n1 dials n2 (its id sorts first) through the relay: the same ids, so the same owners.
    tap = await relay(LINK_HOSTS.n1, { host: LINK_HOSTS.n2, port: ports.n2 });
    const viaTap = [entry('n0'), entry('n1'), `n2=${LINK_HOSTS.n1}:${tap.port}`].join(',');
    const start = (id, list, tls) => HearthServer.start({
      threads: 2,
      extraArgs: ['--cluster-peers', list, '--node-id', id, '--cluster-secret-file', secretFile, ...tls],
    });
    nodes.n2 = await start('n2', peers, tlsArgs(certs.n2.cert, certs.n2.key, ca.cert));
    nodes.n1 = await start('n1', viaTap, tlsArgs(certs.n1.cert, certs.n1.key, ca.cert));
    nodes.n0 = await start('n0', peers, tlsArgs(certs.n0.cert, certs.n0.key, both));
    await logShows(nodes.n1, /node link up/, 'the link on n1');
    await logShows(nodes.n2, /node link up/, 'the link on n2');
  }, { timeout: 60_000 });

  after(async () => {
    await Promise.allSettled(Object.values(nodes).map((n) => n.kill('SIGKILL')));
    tap?.server.close();
  }, { timeout: 20_000 });

  it("the CA's nodes forward a client's writes to the owner, over TLS only", T, async () => {
    const ns = nsPlaced('n1');
    const marker = `plain-${randomBytes(12).toString('hex')}`;
    // n2 forwards its client to n1, through the relay.
    const writer = createClient(nodes.n2, ns);
    const reader = createClient(nodes.n1, ns);
    try {
      await set(writer.ref('value'), marker);
      assert.equal((await get(reader.ref('value'))).val(), marker);
    } finally {
      await Promise.all([writer.dispose(), reader.dispose()]);
    }
    const bytes = tap.bytes();
    assert.ok(bytes.length > 0, 'the relay carried the link');
    // A TLS handshake record first, and the value nowhere in the clear.
    assert.equal(bytes[0], 0x16, 'the link starts with a TLS handshake');
    assert.equal(bytes.indexOf('HEARTHL2'), -1, 'the handshake magic in the clear');
    assert.equal(bytes.indexOf(marker), -1, "the client's value in the clear");
  });

  it('a node whose certificate another CA issued gets no link, and nothing is forwarded to or from it', T, async () => {
    // Both test CAs have the same name: rustls finds the issuer by name and refuses the
    // signature (BadSignature); CAs of different names give UnknownIssuer.
    for (const id of ['n1', 'n2']) {
      await logShows(nodes[id], /node link refused[^\n]*invalid peer certificate/, `${id} refusing n0`);
    }
    // n1 and n2 each have their one link (to each other), n0 none.
    assert.doesNotMatch(nodes.n0.log(), /node link up/);
    for (const id of ['n1', 'n2']) assert.equal(nodes[id].log().match(/node link up/g).length, 1);
    // n0's client writing a database n1 owns, and n1's client writing one n0 owns: the link
    // to the owner is down, so neither is served.
    const put = (node, ns) => fetch(`http://${node.host}/v.json?ns=${ns}&auth=owner`, { method: 'PUT', body: '1' });
    const ownedByN1 = nsPlaced('n1');
    assert.equal((await put(nodes.n0, ownedByN1)).status, 503);
    assert.equal((await put(nodes.n1, nsPlaced('n0'))).status, 503);
    const read = await fetch(`http://${nodes.n1.host}/v.json?ns=${ownedByN1}&auth=owner`);
    assert.equal(await read.json(), null);
  });

  it('the link port speaks TLS only: a plain peer sending the handshake magic gets an alert', T, async () => {
    const [, address] = peers.split(',').find((p) => p.startsWith('n1=')).split('=');
    const [host, port] = address.split(':');
    const from = nodes.n1.log().length;
    const answer = await withTimeout(new Promise((resolve, reject) => {
      const chunks = [];
      const socket = net.connect(Number(port), host, () => {
        socket.write(Buffer.concat([Buffer.from('HEARTHL2'), randomBytes(32), Buffer.from([2]), Buffer.from('n2'), Buffer.from([2]), Buffer.from('n1')]));
      });
      socket.on('data', (chunk) => chunks.push(chunk));
      socket.on('error', () => resolve(Buffer.concat(chunks)));
      socket.on('close', () => resolve(Buffer.concat(chunks)));
      socket.on('timeout', () => reject(new Error('no answer')));
    }), 10_000, 'the plain connection closed');
    // A TLS alert record (0x15), never the 64 bytes of a nonce and a proof.
    assert.ok(answer.length === 0 || answer[0] === 0x15, `answered ${answer.toString('hex')}`);
    await logShows(nodes.n1, /node link refused[^\n]*TLS handshake failed/, 'the refusal', { from });
  });

  it('replicates to the follower over TLS: acknowledged writes are on its disk', T, async () => {
    const ns = nsPlaced('n1', 'n2');
    const writer = createClient(nodes.n2, ns);
    try {
      for (let i = 0; i < 5; i++) await set(writer.ref(`w/k${i}`), i);
    } finally {
      await writer.dispose();
    }
    await nodes.n1.kill('SIGKILL');
    await nodes.n2.kill('SIGKILL');
    const alone = await HearthServer.start({ threads: 2, dataDir: nodes.n2.dataDir });
    try {
      const res = await fetch(`http://${alone.host}/w.json?ns=${ns}&auth=owner`);
      assert.deepEqual(await res.json(), { k0: 0, k1: 1, k2: 2, k3: 3, k4: 4 });
    } finally {
      await alone.kill('SIGKILL');
    }
  });
});

describe('the link refuses to start unprotected or half-configured', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-cluster-tls-start-'));
  const secretFile = path.join(dir, 'secret');
  fs.writeFileSync(secretFile, 'a shared secret of the test cluster\n');

  /** `hearth serve` as node a of a static pair with `extra`: its exit status and output. */
  async function serve(extra) {
    const [port, link] = [await freePort(), await freePort()];
    const result = spawnSync(hearthBinary(), ['serve', '--dev', '--listen', `127.0.0.1:${port}`,
      '--data-dir', path.join(dir, `data-${port}`), '--cluster-peers', `a=127.0.0.1:${link},b=127.0.0.1:1`,
      '--node-id', 'a', '--cluster-secret-file', secretFile, ...extra],
    { env: cleanEnv(), encoding: 'utf8', timeout: 20_000 });
    return { status: result.status, output: `${result.stdout}${result.stderr}` };
  }

  it('without TLS flags or --cluster-plaintext, it exits with an error naming them', T, async () => {
    const { status, output } = await serve([]);
    assert.notEqual(status, 0);
    for (const flag of ['--cluster-tls-cert', '--cluster-tls-key', '--cluster-ca', '--cluster-plaintext']) {
      assert.ok(output.includes(flag), `${flag} in: ${output}`);
    }
  });

  it('a partial, mismatched or combined TLS setting exits with an error naming the problem', T, async () => {
    const ca = makeCa(path.join(dir, 'ca'));
    const a = makeNodeCert(ca, 'a');
    const b = makeNodeCert(ca, 'b');
    let { status, output } = await serve(['--cluster-tls-cert', a.cert]);
    assert.notEqual(status, 0);
    assert.match(output, /--cluster-tls-key, --cluster-ca missing/);
    ({ status, output } = await serve(['--cluster-tls-cert', a.cert, '--cluster-tls-key', b.key, '--cluster-ca', ca.cert]));
    assert.notEqual(status, 0);
    assert.match(output, /key of another certificate/);
    ({ status, output } = await serve(['--cluster-tls-cert', b.cert, '--cluster-tls-key', b.key, '--cluster-ca', ca.cert]));
    assert.notEqual(status, 0);
    assert.match(output, /is not one of node `a`/);
    ({ status, output } = await serve(['--cluster-tls-cert', a.cert, '--cluster-tls-key', a.key, '--cluster-ca', path.join(dir, 'none.pem')]));
    assert.notEqual(status, 0);
    assert.match(output, /cannot read --cluster-ca/);
    ({ status, output } = await serve(['--cluster-plaintext', '--cluster-tls-cert', a.cert, '--cluster-tls-key', a.key, '--cluster-ca', ca.cert]));
    assert.notEqual(status, 0);
    assert.match(output, /--cluster-plaintext cannot be combined/);
  });
});
