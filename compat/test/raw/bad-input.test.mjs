// Hostile / malformed input. Each case asserts the exact outcome: the error reply (status and
// reason) when the message named its request, else the close code and reason of that one
// connection; then that the server still serves a well-behaved client: handshake + set + get
// on a fresh connection.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { useHearth, T, uniqueNs } from '../../lib/harness.mjs';
import { RawClient } from '../../lib/raw.mjs';
import { rid } from '../../lib/util.mjs';

describe('raw bad input', () => {
  const h = useHearth();

  async function raw(ns = uniqueNs(), opts) {
    const c = await RawClient.connect(h.server.wsURL(ns), opts);
    h.defer(() => c.terminate());
    await c.handshake();
    return c;
  }

  /** The server process is alive and a fresh, well-behaved client can handshake, set and get. */
  async function assertHealthy() {
    assert.ok(h.server.running, 'server process is still running');
    const c = await raw();
    const v = { ok: rid(6) };
    const put = await c.request('p', { p: '/health', d: v });
    assert.equal(put.s, 'ok', `health put: ${JSON.stringify(put)}`);
    const got = await c.request('g', { p: '/health', q: {} });
    assert.deepEqual(got, { s: 'ok', d: v });
    c.close();
  }

  /** The connection is closed by the server with exactly this code and reason. */
  async function assertClosed(c, code, reason, ms = 5_000) {
    const closed = await c.waitClose(ms);
    if (reason instanceof RegExp) {
      assert.equal(closed.code, code, `close ${JSON.stringify(closed)}`);
      assert.match(closed.reason, reason);
    } else {
      assert.deepEqual(closed, { code, reason });
    }
  }

  /** The connection still answers: a get on it is served (a round trip after what it sent). */
  async function assertServes(c) {
    assert.deepEqual(await c.request('g', { p: '/still-open', q: {} }), { s: 'ok', d: null });
    assert.equal(c.closed, null, 'the connection is still open');
  }

  // Messages that name no request cannot be answered, so the connection is closed with a
  // policy violation (1008) naming the fault; other clients are untouched.
  const MALFORMED = /^malformed JSON: .+ at line 1 column \d+$/;

  it('malformed JSON closes that connection with 1008 and the parse error', T, async () => {
    for (const frame of ['{"t":"d","d":{"r":1,"a":"p",', 'not json at all', '{{{{']) {
      const c = await raw();
      c.sendRaw(frame);
      await assertClosed(c, 1008, MALFORMED);
      assert.equal(c.messages.length, 1, `only the handshake was sent for ${frame}`);
    }
    await assertHealthy();
  });

  it('non-object frames ([1,2], "x", null, true) and envelopes without t/d close with 1008', T, async () => {
    const cases = [
      ['[1,2]', 'a message must be a JSON object'],
      ['"x"', 'a message must be a JSON object'],
      ['null', 'a message must be a JSON object'],
      ['true', 'a message must be a JSON object'],
      ['{"t":"d"}', 'a data message needs an object `d`'],
      ['{"t":"d","d":5}', 'a data message needs an object `d`'],
      ['{"t":"zz","d":{}}', 'a message needs `t` of "c" or "d"'],
      ['{"t":"c"}', 'a control message needs `d.t`'],
    ];
    for (const [frame, reason] of cases) {
      const c = await raw();
      c.sendRaw(frame);
      await assertClosed(c, 1008, reason);
    }
    await assertHealthy();
  });

  it('an unknown control message is ignored', T, async () => {
    const c = await raw();
    c.sendRaw('{"t":"c","d":{"t":"zz"}}');
    await assertServes(c);
    assert.equal(c.messages.length, 2, 'handshake and the get reply, nothing for the control message');
  });

  it('unknown action gets unknown_action for its r and the connection stays open', T, async () => {
    const c = await raw();
    const r = c.sendRequest('zz', {});
    assert.deepEqual((await c.response(r)).body, { s: 'unknown_action', d: 'unknown action "zz"' });
    await assertServes(c);
    await assertHealthy();
  });

  it('a request without a numeric r closes with 1008; one without body or path gets invalid_data', T, async () => {
    for (const r of [undefined, 'abc']) {
      const c = await raw();
      c.send({ t: 'd', d: { r, a: 'p', b: { p: '/no-r', d: 1 } } });
      await assertClosed(c, 1008, 'a request needs a numeric `r`');
    }
    const c = await raw();
    c.send({ t: 'd', d: { r: 5, a: 'p' } }); // missing body
    c.send({ t: 'd', d: { r: 6, a: 'p', b: { d: 1 } } }); // missing path
    const noPath = { s: 'invalid_data', d: 'the request needs a string path `p`' };
    assert.deepEqual((await c.response(5)).body, noPath);
    assert.deepEqual((await c.response(6)).body, noPath);
    await assertServes(c);
    assert.deepEqual(await c.request('g', { p: '/no-r', q: {} }), { s: 'ok', d: null }, 'nothing was written');
    await assertHealthy();
  });

  it('oversize message announced via a chunk count of 999999 closes with 1009', T, async () => {
    const c = await raw();
    c.sendRaw('999999');
    c.sendRaw('x'.repeat(16384));
    await assertClosed(c, 1009, 'a message may be split into at most 9999 frames, not 999999', 10_000);
    await assertHealthy();
  });

  it('a single 20 MB string is refused with invalid_data; the connection stays open', { timeout: 40_000 }, async () => {
    const c = await raw();
    const r = c.sendRequest('p', { p: '/huge', d: 'z'.repeat(20 * 1024 * 1024) });
    assert.deepEqual((await c.response(r, 20_000)).body, {
      s: 'invalid_data',
      d: 'a string of 20971520 bytes is longer than the limit of 10485760 bytes',
    });
    await assertServes(c);
    assert.deepEqual(await c.request('g', { p: '/huge', q: {} }), { s: 'ok', d: null }, 'nothing was written');
    await assertHealthy();
  });

  it('depth 33 is refused (data nesting and path length); depth 32 is accepted', T, async () => {
    const c = await raw();
    const nest = (n) => {
      let v = 1;
      for (let i = n; i >= 1; i--) v = { [`l${i}`]: v };
      return v;
    };
    const tooDeep = { s: 'invalid_data', d: 'the write reaches depth 33, deeper than the limit of 32' };
    assert.deepEqual(await c.request('p', { p: '/', d: nest(33) }), tooDeep, 'data nested 33 deep');
    const p33 = '/' + Array.from({ length: 33 }, (_, i) => `s${i}`).join('/');
    assert.deepEqual(
      await c.request('p', { p: p33, d: 1 }),
      { s: 'invalid_data', d: 'invalid path: the path reaches depth 33, deeper than the limit of 32 segments' },
      '33-segment path',
    );
    assert.deepEqual(await c.request('p', { p: '/d1/d2', d: nest(31) }), tooDeep, '2 + 31 levels');
    assert.deepEqual(await c.request('g', { p: '/', q: {} }), { s: 'ok', d: null }, 'nothing was written');
    assert.deepEqual(await c.request('p', { p: '/d1', d: nest(31) }), { s: 'ok', d: '' }, '1 + 31 levels accepted');
    assert.deepEqual(await c.request('g', { p: '/d1', q: {} }), { s: 'ok', d: nest(31) });
    await assertHealthy();
  });

  it('invalid keys in data and paths get invalid_data naming the key, and write nothing', T, async () => {
    const c = await raw();
    const rule = "keys must not contain '.', '$', '#', '[', ']', '/' or ASCII control characters";
    const bad = [
      [{ p: '/k', d: { 'a.b': 1 } }, `invalid key "a.b": ${rule}`],
      [{ p: '/k', d: { $x: 1 } }, `invalid key "$x": ${rule}`],
      [{ p: '/k', d: { 'a#b': 1 } }, `invalid key "a#b": ${rule}`],
      [{ p: '/k', d: { 'a[0]': 1 } }, `invalid key "a[0]": ${rule}`],
      [{ p: '/k', d: { 'a/b': 1 } }, `invalid key "a/b": ${rule}`],
      [{ p: '/k', d: { ok: { 'nested.bad': 1 } } }, `invalid key "nested.bad": ${rule}`],
      [{ p: '/k', d: { 'x\u0001': 1 } }, `invalid key "x\\u{1}": ${rule}`],
      [{ p: '/k', d: { ['k'.repeat(769)]: 1 } }, `invalid key "${'k'.repeat(100)}…": keys must be at most 768 bytes of UTF-8`],
      [{ p: '/a.b', d: 1 }, `invalid path: invalid key "a.b": ${rule}`],
      [{ p: '/$x', d: 1 }, `invalid path: invalid key "$x": ${rule}`],
    ];
    for (const [body, reason] of bad) {
      const res = await c.request('p', body);
      assert.deepEqual(res, { s: 'invalid_data', d: reason }, `put ${JSON.stringify(body).slice(0, 80)}`);
    }
    const merge = await c.request('m', { p: '/k', d: { 'good': 1, 'bad.key': 2 } });
    assert.deepEqual(merge, { s: 'invalid_data', d: `invalid update path "bad.key": invalid key "bad.key": ${rule}` }, 'merge with an invalid key');
    assert.deepEqual(await c.request('g', { p: '/', q: {} }), { s: 'ok', d: null }, 'nothing was written');
    await assertHealthy();
  });

  it('too many listens on one connection: 10,000 succeed and the 10,001st gets limit_exceeded', { timeout: 90_000 }, async () => {
    const c = await raw();
    const LIMIT = 10_000; // MAX_LISTENS_PER_SESSION in crates/sync/src/limits.rs
    const rs = [];
    for (let i = 0; i <= LIMIT; i++) {
      rs.push(c.sendRequest('q', { p: `/many/l${i}`, h: '' }));
      if (i % 500 === 499) await new Promise((r) => setImmediate(r));
    }
    const last = await c.response(rs[LIMIT], 60_000);
    assert.deepEqual(last.body, { s: 'limit_exceeded', d: `a connection may hold at most ${LIMIT} listens` });
    // Replies come in request order, so every other listen has been answered by now.
    const statuses = new Map();
    for (const m of c.messages) if (m.t === 'd' && m.d && typeof m.d.r === 'number' && m.d.b) statuses.set(m.d.r, m.d.b.s);
    const oks = rs.slice(0, LIMIT).filter((r) => statuses.get(r) === 'ok').length;
    assert.equal(oks, LIMIT, 'every listen up to the limit succeeds');
    // The connection stays open: listening again on a held path replaces it, and ending one
    // listen makes room for exactly one more.
    assert.deepEqual(await c.request('q', { p: '/many/l0', h: '' }), { s: 'ok', d: {} });
    assert.deepEqual(await c.request('n', { p: '/many/l1' }), { s: 'ok', d: '' });
    assert.deepEqual(await c.request('q', { p: '/many/new', h: '' }), { s: 'ok', d: {} });
    assert.deepEqual(await c.request('q', { p: '/many/new2', h: '' }), {
      s: 'limit_exceeded',
      d: `a connection may hold at most ${LIMIT} listens`,
    });
    await assertHealthy();
  });

  it('a binary frame closes that connection with 1003 and does not affect other clients', T, async () => {
    const c = await raw();
    c.ws.send(Buffer.from([0, 1, 2, 3, 255]));
    await assertClosed(c, 1003, 'binary frames are not part of the protocol');
    assert.equal(c.messages.length, 1, 'only the handshake was sent');
    await assertHealthy();
  });

  it('a malformed namespace gets a shutdown message naming it, then a close', T, async () => {
    // Spec §3.1: `s` tells the client never to reconnect, which is right for a name that
    // cannot become valid. No handshake precedes it.
    const weird = new RawClient(`ws://127.0.0.1:${h.port}/.ws?v=5&ns=${encodeURIComponent('bad ns/../x')}`);
    h.defer(() => weird.terminate());
    assert.deepEqual(await weird.waitClose(5_000), { code: 1005, reason: '' });
    assert.deepEqual(weird.messages, [
      {
        t: 'c',
        d: {
          t: 's',
          d: 'namespace names are 1 to 128 characters of a-z, A-Z, 0-9, \'-\' and \'_\'; got "bad ns/../x"',
        },
      },
    ]);
    await assertHealthy();
  });
});
