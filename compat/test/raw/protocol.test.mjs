// Raw WebSocket conformance: exact frame shapes and ordering from
// shared/spec/firebase-wire-protocol.md (§2–§7, §10).

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { useHearth, T, uniqueNs } from '../../lib/harness.mjs';
import { RawClient, PushModel } from '../../lib/raw.mjs';

/** Unsigned emulator-style mock token (spec §14.2). */
function mockToken(sub) {
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const header = { alg: 'none', type: 'JWT' };
  const payload = {
    iss: 'https://securetoken.google.com/demo-hearth',
    aud: 'demo-hearth',
    iat: 0,
    exp: 3600,
    auth_time: 0,
    sub,
    user_id: sub,
    firebase: { sign_in_provider: 'custom', identities: {} },
  };
  return `${b64(header)}.${b64(payload)}.`;
}

describe('raw protocol', () => {
  const h = useHearth();

  async function raw(ns, opts) {
    const c = await RawClient.connect(h.server.wsURL(ns), opts);
    h.defer(() => c.terminate());
    await c.handshake();
    return c;
  }

  it('handshake is the first frame: {"t":"c","d":{"t":"h","d":{ts,v:"5",h,s}}} with h = Host', T, async () => {
    const ns = uniqueNs();
    const before = Date.now();
    const c = await RawClient.connect(h.server.wsURL(ns));
    h.defer(() => c.terminate());
    const hs = await c.handshake();
    const first = JSON.parse(c.frames[0]);
    assert.deepEqual(Object.keys(first).sort(), ['d', 't']);
    assert.equal(first.t, 'c');
    assert.equal(first.d.t, 'h');
    assert.deepEqual(Object.keys(hs).sort(), ['h', 's', 'ts', 'v']);
    assert.equal(hs.v, '5');
    assert.equal(typeof hs.ts, 'number');
    assert.ok(Math.abs(hs.ts - before) < 5_000, `ts ${hs.ts} vs local ${before}`);
    assert.equal(hs.h, `127.0.0.1:${h.port}`, 'h echoes the Host header');
    assert.equal(typeof hs.s, 'string');
    assert.ok(hs.s.length > 0);
    assert.match(hs.s, /^[A-Za-z0-9._~-]+$/, 'session id is URL-safe');

    // A different Host header is echoed verbatim; session ids are unique.
    const c2 = await RawClient.connect(h.server.wsURL(ns), { headers: { Host: 'db.example.test:8443' } });
    h.defer(() => c2.terminate());
    const hs2 = await c2.handshake();
    assert.equal(hs2.h, 'db.example.test:8443');
    assert.notEqual(hs2.s, hs.s);
  });

  it('ping "p" is answered by pong "o" (with a d key)', T, async () => {
    const c = await raw(uniqueNs());
    const from = c.messages.length;
    c.send({ t: 'c', d: { t: 'p', d: {} } });
    const { msg } = await c.waitMessage((m) => m.t === 'c' && m.d && m.d.t === 'o', { from, label: 'pong' });
    assert.ok('d' in msg.d, 'control message carries an inner d key');
  });

  it('stats, gauth owner, auth with an unsigned mock token and unauth are accepted', T, async () => {
    const c = await raw(uniqueNs());
    assert.equal((await c.request('s', { c: { 'sdk.node.12-19-0': 1 } })).s, 'ok');
    assert.equal((await c.request('gauth', { cred: 'owner' })).s, 'ok');
    assert.equal((await c.request('unauth', {})).s, 'ok');
    assert.equal((await c.request('auth', { cred: mockToken('alice') })).s, 'ok');
    // Still fully usable afterwards.
    assert.equal((await c.request('p', { p: '/after-auth', d: 1 })).s, 'ok');
  });

  it('write ack is exactly {"s":"ok","d":""}; listen ok carries an object d', T, async () => {
    const c = await raw(uniqueNs());
    const r = c.sendRequest('p', { p: '/w/a', d: { x: 1, y: 'str' } });
    const { msg } = await c.response(r);
    assert.deepEqual(msg, { t: 'd', d: { r, b: { s: 'ok', d: '' } } });
    const m = await c.request('m', { p: '/w', d: { 'a/x': 2, b: true } });
    assert.deepEqual(m, { s: 'ok', d: '' });
    const listen = await c.request('q', { p: '/w', h: '' });
    assert.equal(listen.s, 'ok');
    assert.ok(listen.d && typeof listen.d === 'object' && !Array.isArray(listen.d), `listen ok d: ${JSON.stringify(listen.d)}`);
  });

  it('listen data is sent before the listen ok (also for null data)', T, async () => {
    const c = await raw(uniqueNs());
    await c.request('p', { p: '/ld', d: { a: 1, b: { c: 2 } } });
    const from = c.messages.length;
    const r = c.sendRequest('q', { p: '/ld', h: '' });
    const ok = await c.response(r);
    const data = c.pushes(from).filter((m) => m.d.a === 'd' && m.d.b.p === '/ld');
    assert.equal(data.length, 1, 'one data push for the listen');
    const dataIndex = c.messages.indexOf(data[0]);
    assert.ok(dataIndex < ok.index, 'data push precedes ok');
    assert.deepEqual(data[0].d.b.d, { a: 1, b: { c: 2 } });
    assert.equal(data[0].d.b.t, undefined, 'default listen pushes carry no tag');

    const from2 = c.messages.length;
    const r2 = c.sendRequest('q', { p: '/empty', h: '' });
    const ok2 = await c.response(r2);
    const nulls = c.pushes(from2).filter((m) => m.d.b.p === '/empty');
    // Spec §7.4 recommends an explicit null push; at least nothing else may come first.
    for (const n of nulls) {
      assert.equal(n.d.b.d, null);
      assert.ok(c.messages.indexOf(n) < ok2.index);
    }
  });

  it("a write's own pushes are sent before its ok; export form carries priorities", T, async () => {
    const c = await raw(uniqueNs());
    await c.request('q', { p: '/own', h: '' });
    const from = c.messages.length;
    const r = c.sendRequest('p', { p: '/own/k', d: { '.value': 'v', '.priority': 5 } });
    const ok = await c.response(r);
    const pushes = c.pushes(from);
    assert.deepEqual(pushes, [{ t: 'd', d: { a: 'd', b: { p: '/own/k', d: { '.value': 'v', '.priority': 5 } } } }]);
    assert.ok(c.messages.indexOf(pushes[0]) < ok.index, 'push precedes write ack');
    const model = new PushModel(c);
    assert.deepEqual(model.get('/own/k'), { '.value': 'v', '.priority': 5 });
  });

  it('another connection receives pushes for its listen (d and m actions)', T, async () => {
    const ns = uniqueNs();
    const a = await raw(ns);
    const b = await raw(ns);
    await b.request('q', { p: '/shared', h: '' });
    const from = b.messages.length;
    await a.request('p', { p: '/shared/x', d: 1 });
    const { msg } = await b.waitMessage((m) => m.t === 'd' && (m.d.a === 'd' || m.d.a === 'm') && m.d.r === undefined, { from, label: 'push' });
    // A default listen gets the written path and value, not the whole listened node again.
    assert.deepEqual(msg, { t: 'd', d: { a: 'd', b: { p: '/shared/x', d: 1 } } });
    // A push for a write outside the listen must not arrive: write elsewhere, then inside.
    const model = new PushModel(b);
    const from2 = b.messages.length;
    await a.request('p', { p: '/elsewhere', d: 1 });
    await a.request('p', { p: '/shared/y', d: 2 });
    await b.waitMessage(() => model.get('/shared/y') === 2, { from: from2, label: 'push y' });
    for (const m of b.pushes(from2)) assert.ok(m.d.b.p.startsWith('/shared'), `unexpected push ${JSON.stringify(m)}`);
    assert.deepEqual(model.get('/shared'), { x: 1, y: 2 });
  });

  it('tagged query listens: pushes carry the tag and respect the window', T, async () => {
    const ns = uniqueNs();
    const a = await raw(ns);
    const b = await raw(ns);
    await a.request('p', { p: '/tq', d: { a: { s: 1 }, b: { s: 2 }, c: { s: 3 } } });
    const from = b.messages.length;
    const r = b.sendRequest('q', { p: '/tq', q: { l: 2, vf: 'r', i: 's' }, t: 7, h: '' });
    const ok = await b.response(r);
    assert.equal(ok.body.s, 'ok');
    // No rules (--dev), so no `.indexOn` for `s`: Firebase's warning, exactly as it sends it.
    assert.deepEqual(ok.body.d, { w: ['no_index'] });
    // The initial data is the window only, tagged, before the ok.
    assert.deepEqual(b.pushes(from), [{ t: 'd', d: { a: 'd', b: { p: '/tq', d: { b: { s: 2 }, c: { s: 3 } }, t: 7 } } }]);
    assert.ok(b.messages.indexOf(b.pushes(from)[0]) < ok.index, 'query data precedes the listen ok');
    const from2 = b.messages.length;
    await a.request('p', { p: '/tq/a/s', d: 10 });
    const { msg } = await b.waitMessage((m) => m.t === 'd' && m.d.r === undefined && m.d.b.t === 7, { from: from2, label: 'tagged update' });
    // a enters the window at the top and b leaves it, in one tagged merge.
    assert.deepEqual(msg, { t: 'd', d: { a: 'm', b: { p: '/tq', d: { b: null, a: { s: 10 } }, t: 7 } } });
  });

  it('one-shot get "g" returns the value (plain and with a query)', T, async () => {
    const c = await raw(uniqueNs());
    await c.request('p', { p: '/g', d: { a: 3, b: 1, c: 2 } });
    assert.deepEqual(await c.request('g', { p: '/g', q: {} }), { s: 'ok', d: { a: 3, b: 1, c: 2 } });
    const q = await c.request('g', { p: '/g', q: { l: 2, vf: 'l', i: '.value' } });
    assert.equal(q.s, 'ok');
    assert.deepEqual(q.d, { b: 1, c: 2 });
    assert.deepEqual(await c.request('g', { p: '/missing', q: {} }), { s: 'ok', d: null });
  });

  it('compare-and-set put: matching hash writes, stale hash is rejected with datastale', T, async () => {
    const c = await raw(uniqueNs());
    // Hash vectors from spec §10.4.
    await c.request('p', { p: '/h/num1', d: 1 });
    const ok = await c.request('p', { p: '/h/num1', d: 'X', h: 'YPVfR2bXt/lcDjiQZ8pOkAd3qkQ=' });
    assert.equal(ok.s, 'ok');
    const stale = await c.request('p', { p: '/h/num1', d: 'Y', h: 'YPVfR2bXt/lcDjiQZ8pOkAd3qkQ=' });
    assert.equal(stale.s, 'datastale');
    assert.deepEqual(await c.request('g', { p: '/h/num1', q: {} }), { s: 'ok', d: 'X' });
    await c.request('p', { p: '/h/obj', d: { b: 2, a: 1 } });
    assert.equal((await c.request('p', { p: '/h/obj', d: 0, h: 'AUZnXhNqrfbznYVxcCvNpzpjvTU=' })).s, 'ok');
    await c.request('p', { p: '/h/pri', d: { x: { '.value': 'A', '.priority': 10 }, y: { '.value': 'B', '.priority': 'aa' }, z: 'C' } });
    assert.equal((await c.request('p', { p: '/h/pri', d: 0, h: 'HEczgxEDQZl5FeQDqp7Lm1MfVR0=' })).s, 'ok');
    await c.request('p', { p: '/h/u16', d: { '｡': 1, '😀': 2 } });
    assert.equal((await c.request('p', { p: '/h/u16', d: 0, h: '2fN5oqKMOu/lsitR3bnFuIvCIVU=' })).s, 'ok');
    await c.request('p', { p: '/h/quirk', d: 9007199254740991 });
    assert.equal((await c.request('p', { p: '/h/quirk', d: 0, h: 'm4qsp/5BbIWTdjthNlnOX+WCTB0=' })).s, 'ok');
    // h = "" matches only an empty node.
    assert.equal((await c.request('p', { p: '/h/none', d: 1, h: '' })).s, 'ok');
    assert.equal((await c.request('p', { p: '/h/none', d: 2, h: '' })).s, 'datastale');
  });

  it('server splits a 40,000-char push into a count frame and <=16384-char chunks', T, async () => {
    // Spec §2.2: the server MAY split; the JS client's limit per chunk is 16384 chars.
    const ns = uniqueNs();
    const a = await raw(ns);
    const b = await raw(ns);
    await b.request('q', { p: '/big', h: '' });
    const big = 'x'.repeat(40_000);
    const framesBefore = b.frames.length;
    const from = b.messages.length;
    await a.request('p', { p: '/big', d: big });
    await b.waitMessage((m) => m.t === 'd' && m.d.r === undefined && m.d.b.d === big, { from, label: 'big push' });
    const frames = b.frames.slice(framesBefore).filter((f) => typeof f === 'string');
    const countAt = frames.findIndex((f) => /^\d{1,6}$/.test(f));
    assert.ok(countAt >= 0, `no count frame; frame lengths: ${frames.map((f) => f.length)}`);
    const n = Number(frames[countAt]);
    assert.ok(n >= 3, `40,000+ chars need >= 3 chunks, got ${n}`);
    const chunks = frames.slice(countAt + 1, countAt + 1 + n);
    assert.equal(chunks.length, n);
    for (const ch of chunks) assert.ok(ch.length <= 16384, `chunk of ${ch.length} chars`);
    const msg = JSON.parse(chunks.join(''));
    assert.equal(msg.d.b.d, big);
    for (const f of frames) assert.ok(f.length <= 16384, `an unsplit frame of ${f.length} chars`);
  });

  it('client-side splitting ("3" then three chunks) is reassembled by the server', T, async () => {
    const c = await raw(uniqueNs());
    const value = 'y'.repeat(40_000);
    const r = c.nextR();
    const n = c.sendSplit({ t: 'd', d: { r, a: 'p', b: { p: '/split', d: value } } });
    assert.equal(n, 3);
    const res = await c.response(r);
    assert.equal(res.body.s, 'ok');
    const got = await c.request('g', { p: '/split', q: {} });
    assert.equal(got.d, value);
    // Tiny chunks work too (count frame "5", 5 pieces).
    const r2 = c.nextR();
    const msg = { t: 'd', d: { r: r2, a: 'p', b: { p: '/split2', d: 'hello world' } } };
    const text = JSON.stringify(msg);
    const size = Math.ceil(text.length / 5);
    assert.equal(c.sendSplit(msg, size), 5);
    assert.equal((await c.response(r2)).body.s, 'ok');
    assert.equal((await c.request('g', { p: '/split2', q: {} })).d, 'hello world');
  });

  it('the keep-alive frame "0" is ignored and the connection keeps working', T, async () => {
    const c = await raw(uniqueNs());
    c.sendRaw('0');
    c.sendRaw('0');
    assert.equal((await c.request('p', { p: '/ka', d: 1 })).s, 'ok');
    assert.equal((await c.request('g', { p: '/ka', q: {} })).d, 1);
  });

  it('onDisconnect o/om/oc over raw frames run when the socket closes', T, async () => {
    const ns = uniqueNs();
    const a = await raw(ns);
    const b = await raw(ns);
    await a.request('p', { p: '/pres', d: { u1: 'on', u2: 'on', u3: 'on' } });
    assert.equal((await a.request('o', { p: '/pres/u1', d: 'off' })).s, 'ok');
    assert.equal((await a.request('om', { p: '/pres', d: { u2: 'gone', 'u4/at': { '.sv': 'timestamp' } } })).s, 'ok');
    assert.equal((await a.request('o', { p: '/pres/u3', d: null })).s, 'ok');
    assert.equal((await a.request('o', { p: '/pres/u5', d: 'never' })).s, 'ok');
    assert.equal((await a.request('oc', { p: '/pres/u5', d: null })).s, 'ok');
    await b.request('q', { p: '/pres', h: '' });
    const model = new PushModel(b);
    assert.deepEqual(model.get('/pres'), { u1: 'on', u2: 'on', u3: 'on' });
    a.close();
    // Queued operations may be applied one by one; wait for the effect of the last one (u3 removed).
    await b.waitMessage(
      () => model.get('/pres/u1') === 'off' && model.get('/pres/u4') !== null && model.get('/pres/u3') === null,
      { label: 'onDisconnect effects' },
    );
    const v = model.get('/pres');
    assert.equal(v.u1, 'off');
    assert.equal(v.u2, 'gone');
    assert.equal(v.u3, undefined);
    assert.equal(v.u5, undefined);
    assert.equal(typeof v.u4.at, 'number');
  });
});
