// Hostile / malformed input. Each case checks only what the spec demands (a non-ok
// status, or closing that one connection) and then that the server still serves a
// well-behaved client: handshake + set + get on a fresh connection.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { useHearth, T, uniqueNs } from '../../lib/harness.mjs';
import { RawClient } from '../../lib/raw.mjs';
import { rid, withTimeout, deferred } from '../../lib/util.mjs';

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

  /** Resolves 'closed' if the socket closes, or the first message matching pred, within ms. */
  async function closedOr(c, pred, ms, from = c.messages.length) {
    const d = deferred();
    c.waitClose(ms).then(() => d.resolve('closed'), () => {});
    c.waitMessage(pred, { from, ms, label: 'reply' }).then((r) => d.resolve(r.msg), () => {});
    return withTimeout(d.promise, ms + 100, 'close or error reply');
  }

  const nonOkFor = (r) => (m) => m && m.t === 'd' && m.d && m.d.r === r && m.d.b && m.d.b.s !== 'ok';
  const anyError = (m) =>
    m && ((m.t === 'c' && m.d && (m.d.t === 'e' || m.d.t === 's')) || (m.t === 'd' && m.d && m.d.b && typeof m.d.b.s === 'string' && m.d.b.s !== 'ok'));

  it('malformed JSON does not take the server down', T, async () => {
    const c = await raw();
    c.sendRaw('{"t":"d","d":{"r":1,"a":"p",');
    c.sendRaw('not json at all');
    c.sendRaw('{{{{');
    await assertHealthy();
  });

  it('non-object frames ([1,2], "x", null, true) are rejected harmlessly', T, async () => {
    for (const frame of ['[1,2]', '"x"', 'null', 'true', '{"t":"d"}', '{"t":"d","d":5}', '{"t":"zz","d":{}}', '{"t":"c","d":{"t":"zz"}}']) {
      const c = await raw();
      c.sendRaw(frame);
      await assertHealthy();
      c.terminate();
    }
  });

  it('unknown action gets a non-ok status reply for its r', T, async () => {
    const c = await raw();
    c.send({ t: 'd', d: { r: 1, a: 'zz', b: {} } });
    const res = await closedOr(c, (m) => m && m.t === 'd' && m.d && m.d.r === 1, 5_000);
    assert.notEqual(res, 'closed', 'expected a reply, not a close');
    assert.notEqual(res.d.b.s, 'ok');
    await assertHealthy();
  });

  it('request without r (and with a non-numeric r) is not fatal', T, async () => {
    const c = await raw();
    c.send({ t: 'd', d: { a: 'p', b: { p: '/no-r', d: 1 } } });
    c.send({ t: 'd', d: { r: 'abc', a: 'p', b: { p: '/str-r', d: 1 } } });
    c.send({ t: 'd', d: { r: 5, a: 'p' } }); // missing body
    c.send({ t: 'd', d: { r: 6, a: 'p', b: { d: 1 } } }); // missing path
    await assertHealthy();
  });

  it('oversize message announced via a chunk count of 999999 is refused', T, async () => {
    const c = await raw();
    c.sendRaw('999999');
    c.sendRaw('x'.repeat(16384));
    const res = await closedOr(c, anyError, 10_000, 0);
    assert.ok(res === 'closed' || anyError(res), `unexpected: ${JSON.stringify(res)}`);
    await assertHealthy();
  });

  it('a single 20 MB frame is refused (error reply or close)', { timeout: 40_000 }, async () => {
    const c = await raw();
    const r = 1;
    c.send({ t: 'd', d: { r, a: 'p', b: { p: '/huge', d: 'z'.repeat(20 * 1024 * 1024) } } });
    const res = await closedOr(c, (m) => m && m.t === 'd' && m.d && m.d.r === r, 20_000);
    assert.ok(res === 'closed' || res.d.b.s !== 'ok', `20 MB write was accepted: ${JSON.stringify(res).slice(0, 200)}`);
    await assertHealthy();
  });

  it('depth 33 is rejected (data nesting and path length); depth 30 is fine', T, async () => {
    const c = await raw();
    const nest = (n) => {
      let v = 1;
      for (let i = n; i >= 1; i--) v = { [`l${i}`]: v };
      return v;
    };
    assert.notEqual((await c.request('p', { p: '/', d: nest(33) })).s, 'ok', 'data nested 33 deep');
    const p33 = '/' + Array.from({ length: 33 }, (_, i) => `s${i}`).join('/');
    assert.notEqual((await c.request('p', { p: p33, d: 1 })).s, 'ok', '33-segment path');
    assert.notEqual((await c.request('p', { p: '/d1/d2', d: nest(31) })).s, 'ok', '2 + 31 levels');
    assert.equal((await c.request('p', { p: '/ok', d: nest(29) })).s, 'ok', 'depth 30 accepted');
    assert.equal((await c.request('g', { p: '/ok', q: {} })).s, 'ok');
    await assertHealthy();
  });

  it('invalid keys in data and paths get a non-ok status and write nothing', T, async () => {
    const c = await raw();
    const bad = [
      { p: '/k', d: { 'a.b': 1 } },
      { p: '/k', d: { $x: 1 } },
      { p: '/k', d: { 'a#b': 1 } },
      { p: '/k', d: { 'a[0]': 1 } },
      { p: '/k', d: { 'a/b': 1 } },
      { p: '/k', d: { ok: { 'nested.bad': 1 } } },
      { p: '/k', d: { 'x\u0001': 1 } },
      { p: '/k', d: { ['k'.repeat(769)]: 1 } },
      { p: '/a.b', d: 1 },
      { p: '/$x', d: 1 },
    ];
    for (const body of bad) {
      const res = await c.request('p', body);
      assert.notEqual(res.s, 'ok', `put ${JSON.stringify(body).slice(0, 80)} => ${JSON.stringify(res)}`);
    }
    const merge = await c.request('m', { p: '/k', d: { 'good': 1, 'bad.key': 2 } });
    assert.notEqual(merge.s, 'ok', 'merge with an invalid key');
    assert.deepEqual(await c.request('g', { p: '/k', q: {} }), { s: 'ok', d: null }, 'nothing was written');
    await assertHealthy();
  });

  it('too many listens on one connection: excess listens fail or the connection is closed', { timeout: 90_000 }, async () => {
    const c = await raw();
    const N = 10_001;
    let oks = 0;
    let nonOk = 0;
    const firstR = c._nextR;
    const all = deferred();
    c.listeners.push((m) => {
      if (m.t === 'd' && m.d && typeof m.d.r === 'number' && m.d.r >= firstR && m.d.b) {
        if (m.d.b.s === 'ok') oks++;
        else nonOk++;
        if (oks + nonOk === N) all.resolve();
      }
    });
    c.waitClose(85_000).then(() => all.resolve(), () => {});
    for (let i = 0; i < N; i++) {
      c.sendRequest('q', { p: `/many/l${i}`, h: '' });
      if (i % 500 === 499) await new Promise((r) => setImmediate(r));
    }
    await withTimeout(all.promise, 85_000, 'replies to all listens or close');
    assert.ok(c.closed || nonOk > 0, `all ${oks} listens were accepted, none refused and no close`);
    if (c.closed) assert.ok(c.closed.code !== 1006 || oks > 0, `closed: ${JSON.stringify(c.closed)}`);
    await assertHealthy();
  });

  it('a binary frame is refused without affecting other clients', T, async () => {
    const c = await raw();
    c.ws.send(Buffer.from([0, 1, 2, 3, 255]));
    await assertHealthy();
  });

  it('a connection with a malformed namespace does not disturb other clients', T, async () => {
    // Spec §1.1 does not define valid names; the server may refuse the upgrade, close, send a
    // shutdown control message ("s"), or serve it. It must settle quickly and keep serving others.
    const weird = new RawClient(`ws://127.0.0.1:${h.port}/.ws?v=5&ns=${encodeURIComponent('bad ns/../x')}`);
    h.defer(() => weird.terminate());
    await Promise.race([
      weird.waitClose(5_000),
      weird.waitMessage(() => true, { ms: 5_000 }).catch(() => weird.waitClose(100)),
    ]);
    await assertHealthy();
  });
});
