// Request size limits (spec §15.5, §17): a body larger than the limit is refused with 413
// before it is read (declared Content-Length) or as soon as it passes the limit (chunked), and
// the server stays healthy.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { useHearth, T } from '../../lib/harness.mjs';
import { RawHttp, rawRequest, rest, restURL } from './rest-client.mjs';

// Must match MAX_REST_BODY_BYTES in crates/ground/src/rest/mod.rs.
const MAX_REST_BODY_BYTES = 256 * 1024 * 1024;
const TINY = 1024 * 1024;

describe('rest limits', () => {
  const h = useHearth();
  const url = (ns, path, params) => restURL(h.server, ns, path, params);

  async function raw() {
    const c = await RawHttp.connect(h.server.port);
    h.defer(() => c.close());
    return c;
  }

  it('a declared Content-Length over the limit is refused at once, without the body', T, async () => {
    const ns = h.ns('limits');
    const c = await raw();
    // Only the head is sent: an answer proves the server did not wait for 300 MB.
    await c.write(rawRequest('PUT', `/big.json?ns=${ns}`, { 'Content-Length': String(MAX_REST_BODY_BYTES + 1) }));
    const res = await c.response();
    assert.equal(res.status, 413);
    assert.match(JSON.parse(res.body).error, /larger than the limit/);
    const tiny = await raw();
    await tiny.write(rawRequest('PUT', `/big.json?ns=${ns}&writeSizeLimit=tiny`, { 'Content-Length': String(TINY + 1) }));
    assert.equal((await tiny.response()).status, 413);
  });

  it('a chunked body is counted while it streams and cut off past the limit', T, async () => {
    const ns = h.ns('limits');
    const c = await raw();
    await c.write(rawRequest('PUT', `/chunked.json?ns=${ns}&writeSizeLimit=tiny`, { 'Transfer-Encoding': 'chunked' }));
    const chunk = 'x'.repeat(64 * 1024);
    await c.write(`${(chunk.length + 1).toString(16)}\r\n"${chunk}\r\n`);
    let sent = chunk.length + 1;
    const response = c.response(10_000);
    // Keep sending until the server answers; it must do so soon after the first MiB.
    let answered = null;
    response.then((r) => (answered = r), () => {});
    while (!answered && sent < 8 * TINY) {
      if (!(await c.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`))) break;
      sent += chunk.length;
      await new Promise((r) => setImmediate(r));
    }
    const res = await response;
    assert.equal(res.status, 413);
    assert.ok(sent < 8 * TINY, `the server read ${sent} bytes before refusing`);
    assert.equal((await rest(url(ns, 'chunked'))).text, 'null');
  });

  it('a chunked body under the limit is accepted', T, async () => {
    const ns = h.ns('limits');
    const c = await raw();
    await c.write(rawRequest('PUT', `/ok.json?ns=${ns}`, { 'Transfer-Encoding': 'chunked' }));
    await c.write('5\r\n{"a":\r\n');
    await c.write('2\r\n1}\r\n0\r\n\r\n');
    const res = await c.response();
    assert.equal(res.status, 200);
    assert.equal(res.body, '{"a":1}');
  });

  it('the server stays healthy after refused and broken requests', T, async () => {
    const ns = h.ns('limits');
    const cut = await raw();
    await cut.write(rawRequest('PUT', `/cut.json?ns=${ns}`, { 'Content-Length': '100' }) + '{"partial":');
    cut.close();
    const garbage = await raw();
    await garbage.write('NOT HTTP AT ALL\r\n\r\n');
    const refused = await garbage.response();
    assert.equal(refused.status, 400);
    assert.deepEqual(JSON.parse(refused.body), { error: 'malformed request head: invalid HTTP version' });
    await garbage.untilClosed();
    const put = await rest(url(ns, 'health'), { method: 'PUT', body: { ok: true } });
    assert.equal(put.status, 200);
    assert.equal((await rest(url(ns, 'cut'))).text, 'null');
  });

  it('a request head over the limit is answered 431', T, async () => {
    const c = await raw();
    await c.write(rawRequest('GET', `/x.json?ns=${h.ns('limits')}`, { 'X-Padding': 'p'.repeat(20 * 1024) }));
    const res = await c.response();
    assert.equal(res.status, 431);
    assert.match(JSON.parse(res.body).error, /head/);
  });

  it('several requests on one kept-alive connection are answered in order', T, async () => {
    const ns = h.ns('limits');
    const c = await raw();
    // Pipelined: all three are written before any answer is read.
    await c.write(
      rawRequest('PUT', `/k.json?ns=${ns}`, {}, '1') +
        rawRequest('PUT', `/k.json?ns=${ns}`, {}, '2') +
        rawRequest('GET', `/k.json?ns=${ns}`),
    );
    assert.equal((await c.response()).body, '1');
    assert.equal((await c.response()).body, '2');
    assert.equal((await c.response()).body, '2');
  });
});
