// REST streaming with server-sent events (spec §15.6): the initial put, put and patch events,
// queries, keep-alives, many concurrent streams, and streams on kept-alive connections of
// another shard's namespace.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { useHearth, T } from '../../lib/harness.mjs';
import { withTimeout } from '../../lib/util.mjs';
import { RawHttp, SseStream, nsOnShard, rawRequest, rest, restURL } from './rest-client.mjs';

// The harness starts the server with --threads 2; a short keep-alive period lets a test see
// keep-alive events without waiting 30 s.
const KEEP_ALIVE_SECS = 1;

describe('rest streaming (SSE)', () => {
  const h = useHearth({ extraArgs: ['--sse-keep-alive-secs', String(KEEP_ALIVE_SECS)] });
  const url = (ns, path, params) => restURL(h.server, ns, path, params);
  const open = (...args) => {
    const s = new SseStream(...args);
    h.defer(() => s.close());
    return s;
  };

  it('starts with a put of the whole value, then puts and patches as data changes', T, async () => {
    const ns = h.ns('sse');
    await rest(url(ns, 'room'), { method: 'PUT', body: { a: 1, b: { c: 2 } } });
    const s = open(url(ns, 'room'));
    await s.untilData(1);
    assert.equal(s.status, 200);
    assert.match(s.headers['content-type'], /^text\/event-stream/);
    // Behind a proxy: nginx must pass each event on at once, and no cache may keep the stream.
    assert.equal(s.headers['x-accel-buffering'], 'no');
    assert.equal(s.headers['cache-control'], 'no-cache');
    assert.deepEqual(s.dataEvents[0], { event: 'put', data: { path: '/', data: { a: 1, b: { c: 2 } } }, raw: s.dataEvents[0].raw });
    await rest(url(ns, 'room/b/c'), { method: 'PUT', body: 3 });
    await rest(url(ns, 'room'), { method: 'PATCH', body: { a: null, 'd/e': 'f' } });
    await rest(url(ns, 'elsewhere'), { method: 'PUT', body: 'not seen' });
    await rest(url(ns, 'room/x'), { method: 'POST', body: { pushed: true } });
    await rest(url(ns, 'room'), { method: 'DELETE' });
    await s.untilData(5);
    const events = s.dataEvents.map((e) => [e.event, e.data.path]);
    assert.deepEqual(events, [
      ['put', '/'],
      ['put', '/b/c'],
      ['patch', '/'],
      ['put', events[3][1]],
      ['put', '/'],
    ]);
    assert.equal(s.dataEvents[1].data.data, 3);
    assert.deepEqual(s.dataEvents[2].data.data, { a: null, 'd/e': 'f' });
    assert.match(events[3][1], /^\/x\/[-0-9A-Za-z_]{20}$/);
    assert.deepEqual(s.dataEvents[3].data.data, { pushed: true });
    assert.equal(s.dataEvents[4].data.data, null);
    // Each event is one `event:` line and one `data:` line.
    for (const e of s.dataEvents) assert.equal(e.raw.split('\n').length, 2, e.raw);
  });

  it('a stream of an empty location starts with put null; writes above are clipped', T, async () => {
    const ns = h.ns('sse');
    const s = open(url(ns, 'a/b'));
    await s.untilData(1);
    assert.deepEqual(s.dataEvents[0].data, { path: '/', data: null });
    await rest(url(ns, 'a'), { method: 'PUT', body: { b: { c: 1 }, other: 2 } });
    await s.untilData(2);
    assert.deepEqual(s.dataEvents[1].data, { path: '/', data: { c: 1 } });
  });

  it('keep-alive events arrive periodically and carry null', T, async () => {
    const ns = h.ns('sse');
    const s = open(url(ns, 'k'));
    await s.until((x) => x.events.filter((e) => e.event === 'keep-alive').length >= 2, 5_000, 'two keep-alives');
    const keepAlive = s.events.find((e) => e.event === 'keep-alive');
    assert.equal(keepAlive.data, null);
  });

  it('format=export streams priorities; queries stream their window', T, async () => {
    const ns = h.ns('sse');
    await rest(url(ns, 'q'), { method: 'PUT', body: { a: { '.value': 1, '.priority': 5 }, b: 2, c: 3 } });
    const exported = open(url(ns, 'q', { format: 'export' }));
    await exported.untilData(1);
    assert.deepEqual(exported.dataEvents[0].data.data, { a: { '.value': 1, '.priority': 5 }, b: 2, c: 3 });
    const windowed = open(url(ns, 'q', { orderBy: '"$key"', limitToFirst: '2' }));
    await windowed.untilData(1);
    assert.deepEqual(windowed.dataEvents[0].data.data, { a: 1, b: 2 });
    await rest(url(ns, 'q/a'), { method: 'DELETE' });
    await windowed.untilData(2);
    // The child that enters the window arrives with the one that leaves it.
    const after = windowed.dataEvents[1].data;
    assert.equal(after.path, '/');
    assert.deepEqual(after.data, { a: null, c: 3 });
  });

  it('a stream is refused with an error for bad parameters', T, async () => {
    const ns = h.ns('sse');
    const bad = open(url(ns, 'x', { orderBy: 'nope' }));
    await bad.opened.promise;
    assert.equal(bad.status, 400);
    const shallow = open(url(ns, 'x', { shallow: 'true' }));
    await shallow.opened.promise;
    assert.equal(shallow.status, 400);
  });

  it('200 concurrent streams all receive one write', { timeout: 60_000 }, async () => {
    const ns = h.ns('fan');
    const COUNT = 200;
    const streams = Array.from({ length: COUNT }, () => open(url(ns, 'broadcast')));
    await withTimeout(Promise.all(streams.map((s) => s.untilData(1, 30_000))), 40_000, 'initial puts');
    const message = { text: 'hello streams', n: COUNT };
    const t0 = Date.now();
    await rest(url(ns, 'broadcast/msg'), { method: 'PUT', body: message });
    await withTimeout(Promise.all(streams.map((s) => s.untilData(2, 30_000))), 40_000, 'the write on every stream');
    const elapsed = Date.now() - t0;
    for (const s of streams) {
      assert.deepEqual(s.dataEvents[1].data, { path: '/msg', data: message });
    }
    assert.ok(elapsed < 15_000, `fan-out took ${elapsed} ms`);
    for (const s of streams) s.close();
    // The server is still healthy after 200 streams went away.
    assert.deepEqual((await rest(url(ns, 'broadcast/msg'))).json, message);
  });

  it('a closed stream ends its session; the server keeps serving', T, async () => {
    const ns = h.ns('sse');
    for (let i = 0; i < 20; i++) {
      const s = new SseStream(url(ns, 'churn'));
      await s.untilData(1);
      s.close();
    }
    const live = open(url(ns, 'churn'));
    await live.untilData(1);
    await rest(url(ns, 'churn'), { method: 'PUT', body: 'after churn' });
    await live.untilData(2);
    assert.equal(live.dataEvents[1].data.data, 'after churn');
  });

  it('on a kept-alive connection, requests and streams for another shard are served where the connection is', T, async () => {
    const home = nsOnShard('home', 0);
    const away = nsOnShard('away', 1);
    const c = await RawHttp.connect(h.server.port);
    h.defer(() => c.close());
    await c.write(rawRequest('PUT', `/v.json?ns=${home}`, {}, '"home"'));
    assert.equal((await c.response()).body, '"home"');
    // Requests for `away` on the same connection are answered by its shard.
    await c.write(rawRequest('PUT', `/v.json?ns=${away}`, {}, '"away"'));
    assert.equal((await c.response()).body, '"away"');
    await c.write(rawRequest('GET', `/v.json?ns=${away}`));
    assert.equal((await c.response()).body, '"away"');
    await c.write(rawRequest('GET', `/v.json?ns=${home}`));
    assert.equal((await c.response()).body, '"home"');
    // A stream for `away` is served on the same connection; its events come from its shard.
    await c.write(rawRequest('GET', `/v.json?ns=${away}`, { Accept: 'text/event-stream' }));
    // The body is chunked: the events, without the chunk framing.
    const events = () => {
      const raw = c.buffer;
      let at = raw.indexOf('\r\n\r\n') + 4;
      let out = '';
      for (;;) {
        const eol = raw.indexOf('\r\n', at);
        if (at < 4 || eol < 0) return out;
        const size = parseInt(raw.subarray(at, eol).toString('latin1'), 16);
        if (!(size > 0) || raw.length < eol + 2 + size) return out;
        out += raw.subarray(eol + 2, eol + 2 + size).toString('utf8');
        at = eol + 2 + size + 2;
      }
    };
    const seen = (text) =>
      withTimeout(
        (async () => {
          while (!events().includes(text)) {
            if (c.closed) throw new Error(`closed before ${text}`);
            await new Promise((resolve) => setTimeout(resolve, 10));
          }
        })(),
        5_000,
        text,
      );
    await seen('event: put\ndata: {"path":"/","data":"away"}\n\n');
    const head = c.buffer.toString('latin1');
    assert.match(head, /^HTTP\/1\.1 200/);
    assert.match(head, /content-type: text\/event-stream/i);
    assert.match(head, /x-accel-buffering: no\r\n/i);
    await rest(url(away, 'v'), { method: 'PUT', body: 'moved' });
    await seen('event: put\ndata: {"path":"/","data":"moved"}\n\n');
    assert.equal(c.closed, false);
  });

  it('fetch opens a stream for another shard on a pooled connection', T, async () => {
    const home = nsOnShard('pool', 0);
    const away = nsOnShard('pool', 1);
    await rest(url(away, 'f'), { method: 'PUT', body: 'followed' });
    // fetch pools connections per origin, so this likely reuses the connection of `home`.
    await rest(url(home, 'f'));
    const controller = new AbortController();
    const res = await fetch(url(away, 'f'), { headers: { accept: 'text/event-stream' }, signal: controller.signal });
    assert.equal(res.status, 200);
    const reader = res.body.getReader();
    let text = '';
    while (!text.includes('\n\n')) {
      const { value, done } = await reader.read();
      if (done) break;
      text += Buffer.from(value).toString('utf8');
    }
    controller.abort();
    assert.match(text, /^event: put\ndata: \{"path":"\/","data":"followed"\}\n\n/);
  });
});
