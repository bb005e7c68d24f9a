// When does a connection end? onDisconnect must run when the client stops answering
// WebSocket pings (a dead peer whose TCP connection never closes), and when the same client
// reconnects naming its previous session (`ls`) while the old socket still looks open.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import net from 'node:net';
import { useHearth, T, uniqueNs } from '../../lib/harness.mjs';
import { RawClient } from '../../lib/raw.mjs';

/** One masked text frame, as a client must send it (RFC 6455 §5.2). */
function maskedTextFrame(text) {
  const payload = Buffer.from(text, 'utf8');
  const mask = crypto.randomBytes(4);
  const length = payload.length < 126 ? Buffer.from([0x80 | payload.length]) : Buffer.from([0x80 | 126, payload.length >> 8, payload.length & 0xff]);
  const masked = Buffer.from(payload.map((byte, i) => byte ^ mask[i % 4]));
  return Buffer.concat([Buffer.from([0x81]), length, mask, masked]);
}

/**
 * A WebSocket client that completes the upgrade, sends frames, and then never reads again:
 * it answers no ping, like a peer that vanished without closing its TCP connection.
 */
async function silentClient(port, ns) {
  const socket = net.connect(port, '127.0.0.1');
  await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  const key = crypto.randomBytes(16).toString('base64');
  socket.write(
    `GET /.ws?v=5&ns=${ns} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\n` +
      `Connection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
  );
  const head = await new Promise((resolve, reject) => {
    let seen = '';
    const onData = (chunk) => {
      seen += chunk.toString('latin1');
      if (seen.includes('\r\n\r\n')) {
        socket.off('data', onData);
        resolve(seen);
      }
    };
    socket.on('data', onData).once('error', reject);
  });
  assert.match(head, /^HTTP\/1\.1 101 /);
  // Stop reading: pings pile up unanswered in the socket buffer.
  socket.pause();
  return socket;
}

describe('connection liveness', () => {
  const h = useHearth({ extraArgs: ['--ping-interval-secs', '1', '--idle-timeout-secs', '2'] });

  it('onDisconnect runs when pings go unanswered', T, async () => {
    const ns = uniqueNs();
    const watcher = await RawClient.connect(h.server.wsURL(ns));
    h.defer(() => watcher.terminate());
    await watcher.handshake();
    assert.equal((await watcher.request('q', { p: '/presence/ghost', h: '' })).s, 'ok');

    const silent = await silentClient(h.port, ns);
    h.defer(() => silent.destroy());
    silent.write(maskedTextFrame(JSON.stringify({ t: 'd', d: { r: 1, a: 'o', b: { p: '/presence/ghost', d: 'gone' } } })));

    const started = Date.now();
    await watcher.waitMessage((m) => m?.d?.a === 'd' && m.d.b?.p === '/presence/ghost' && m.d.b.d === 'gone', {
      ms: 10_000,
      label: 'the onDisconnect write of the silent client',
    });
    assert.ok(Date.now() - started >= 1_000, 'not before the idle timeout');
    assert.ok(!silent.destroyed, 'the client never closed its socket');
  });

  it('a reconnect naming the previous session (ls) ends it and runs its onDisconnect', T, async () => {
    const ns = uniqueNs();
    const old = await RawClient.connect(h.server.wsURL(ns));
    h.defer(() => old.terminate());
    const { s: session } = await old.handshake();
    assert.equal((await old.request('o', { p: '/presence/me', d: 'offline' })).s, 'ok');
    assert.equal((await old.request('p', { p: '/presence/me', d: 'online' })).s, 'ok');

    const fresh = await RawClient.connect(`${h.server.wsURL(ns)}&ls=${session}`);
    h.defer(() => fresh.terminate());
    await fresh.handshake();
    // The old session's queue ran before the new connection's first request: a read sees it.
    const read = await fresh.request('g', { p: '/presence/me', q: {} });
    assert.equal(read.s, 'ok');
    assert.equal(read.d, 'offline');
    const closed = await old.waitClose(5_000);
    assert.ok(closed, 'the old socket is closed by the server');
  });
});
