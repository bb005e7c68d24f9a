// A client that stops reading while the data it listens to keeps changing: the server must
// hold what the kernel cannot take, write it once the client reads again, and lose or reorder
// nothing. This is the path where pushes wait in a connection's outbox for the socket.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { useHearth, uniqueNs } from '../../lib/harness.mjs';
import { RawClient } from '../../lib/raw.mjs';

/** Writes, and the size of each: 18 MB in all, more than the kernel's buffers on loopback. */
const WRITES = 1500;
const VALUE_CHARS = 12_000;

describe('a slow reader', () => {
  const h = useHearth();

  it('gets every push, in order, once it reads again', { timeout: 60_000 }, async () => {
    const ns = uniqueNs();
    const reader = await RawClient.connect(h.server.wsURL(ns));
    h.defer(() => reader.terminate());
    await reader.handshake();
    assert.equal((await reader.request('q', { p: '/flood', h: '' })).s, 'ok');
    const before = reader.pushes().length;
    // Stop reading from the TCP socket: the kernel's buffers fill, then the server's outbox.
    reader.ws._socket.pause();

    const writer = await RawClient.connect(h.server.wsURL(ns));
    h.defer(() => writer.terminate());
    await writer.handshake();
    const requests = [];
    for (let i = 0; i < WRITES; i++) {
      const value = `${i}:`.padEnd(VALUE_CHARS, 'x');
      requests.push(writer.sendRequest('p', { p: `/flood/${i}`, d: value }));
    }
    for (const r of requests) {
      assert.equal((await writer.response(r, 30_000)).body.s, 'ok');
    }
    assert.ok(
      reader.pushes(before).length < WRITES,
      'the reader was really blocked (otherwise this test proves nothing)',
    );
    assert.equal(reader.closed, null, 'a slow reader under the outbound limit stays connected');

    reader.ws._socket.resume();
    await reader.waitMessage((m) => m?.d?.b?.p === `flood/${WRITES - 1}` || m?.d?.b?.p === `/flood/${WRITES - 1}`, {
      ms: 30_000,
      label: 'the last push',
    });
    const seen = reader
      .pushes(before)
      .map((m) => m.d.b)
      .filter((b) => /^\/?flood\/\d+$/.test(b.p))
      .map((b) => {
        const index = Number(b.p.split('/').pop());
        assert.equal(b.d.length, VALUE_CHARS, `push ${index} is whole`);
        assert.ok(b.d.startsWith(`${index}:`), `push ${index} carries its own value`);
        return index;
      });
    assert.deepEqual(
      seen,
      Array.from({ length: WRITES }, (_, i) => i),
      'every write arrives once, in the order it was made',
    );
    assert.deepEqual(reader.parseErrors, []);
  });
});
