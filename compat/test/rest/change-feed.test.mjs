// The change feed (docs/change-feed.md): an event stream of a database's changes under a path,
// each event with its log position as its id, resumed with Last-Event-ID after a dropped
// connection and after the server was killed, refused with 410 once the position is no longer
// kept, and only for callers who may read the path.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { useHearth, T } from '../../lib/harness.mjs';
import { OWNER, SseStream, rest, restURL } from './rest-client.mjs';

/** The `id:` of each data event, in order (the client keeps the raw block). */
function ids(stream) {
  return stream.dataEvents.map((e) => /^id: (.*)$/m.exec(e.raw)?.[1]);
}

describe('change feed', () => {
  const h = useHearth({ extraArgs: ['--sse-keep-alive-secs', '1'] });
  const url = (ns, path, params) => restURL(h.server, ns, path, params);
  const open = (target, headers = {}) => {
    const s = new SseStream(target, { headers: { ...OWNER, ...headers } });
    h.defer(() => s.close());
    return s;
  };
  const put = (ns, path, body) => rest(url(ns, path), { method: 'PUT', body, headers: OWNER });
  const patch = (ns, path, body) => rest(url(ns, path), { method: 'PATCH', body, headers: OWNER });

  it('starts with the whole value and a position, then every change under the path in order', T, async () => {
    const ns = h.ns('feed');
    await put(ns, 'rooms', { r1: { name: 'a' } });
    const feed = open(url(ns, 'rooms', { changesSince: 'now' }));
    await feed.untilData(1);
    assert.equal(feed.status, 200);
    assert.deepEqual(feed.dataEvents[0].data, { path: '/', data: { r1: { name: 'a' } } });
    await put(ns, 'rooms/r2', { name: 'b' });
    await patch(ns, 'rooms', { 'r1/name': 'c', r3: { name: 'd' } });
    await put(ns, 'elsewhere', 1);
    await put(ns, '', { rooms: { r9: 1 }, other: 2 });
    await feed.untilData(4);
    assert.deepEqual(
      feed.dataEvents.map((e) => [e.event, e.data]),
      [
        ['put', { path: '/', data: { r1: { name: 'a' } } }],
        ['put', { path: '/r2', data: { name: 'b' } }],
        ['patch', { path: '/', data: { 'r1/name': 'c', r3: { name: 'd' } } }],
        ['put', { path: '/', data: { r9: 1 } }],
      ],
    );
    const positions = ids(feed).map(Number);
    assert.ok(positions.every((p) => Number.isInteger(p) && p > 0), `ids ${ids(feed)}`);
    // Each later event is a later record; the write elsewhere is a record the feed skipped.
    assert.ok(positions[1] > positions[0] && positions[2] > positions[1], `ids ${positions}`);
    assert.ok(positions[3] > positions[2] + 1, `ids ${positions}`);
  });

  it('a client that reconnects with Last-Event-ID gets exactly what it missed', T, async () => {
    const ns = h.ns('feed');
    const first = open(url(ns, 'log', { changesSince: 'now' }));
    await first.untilData(1);
    for (let i = 0; i < 3; i++) await put(ns, `log/m${i}`, i);
    await first.untilData(4);
    const seen = ids(first)[2]; // after m1
    first.close();
    for (let i = 3; i < 6; i++) await put(ns, `log/m${i}`, i);
    const again = open(url(ns, 'log', { changesSince: 'now' }), { 'last-event-id': seen });
    await again.untilData(4);
    assert.deepEqual(
      again.dataEvents.map((e) => e.data),
      [2, 3, 4, 5].map((i) => ({ path: `/m${i}`, data: i })),
    );
    // changesSince with a position does the same without the header.
    const byUrl = open(url(ns, 'log', { changesSince: seen }));
    await byUrl.untilData(4);
    assert.deepEqual(ids(byUrl), ids(again));
  });

  for (const signal of ['SIGKILL', 'SIGTERM']) {
    // A graceful stop snapshots every database: the log still holds the records the
    // snapshots cover, and recovery keeps them for feeds.
    it(`resumes across a ${signal} of the server: every acknowledged change, none twice`, T, async () => {
      const ns = h.ns('feed');
      const feed = open(url(ns, 'k', { changesSince: 'now' }));
      await feed.untilData(1);
      await put(ns, 'k/a', 1);
      await feed.untilData(2);
      const seen = ids(feed)[1];
      feed.close();
      for (const key of ['b', 'c', 'd']) await put(ns, `k/${key}`, key);
      await h.server.restart({ signal });
      const again = open(url(ns, 'k', { changesSince: seen }));
      await again.untilData(3);
      assert.deepEqual(
        again.dataEvents.map((e) => e.data),
        ['b', 'c', 'd'].map((key) => ({ path: `/${key}`, data: key })),
      );
      // Positions keep growing after the restart.
      await put(ns, 'k/e', 'e');
      await again.untilData(4);
      const positions = ids(again).map(Number);
      assert.ok(positions[3] > positions[2] && positions[0] > Number(seen), `ids ${positions}`);
    });
  }

  it('refuses positions it does not keep or never gave, and says how to start again', T, async () => {
    const ns = h.ns('feed');
    await put(ns, 'x', 1);
    const now = open(url(ns, 'x', { changesSince: 'now' }));
    await now.untilData(1);
    const last = Number(ids(now)[0]);
    const ahead = open(url(ns, 'x', { changesSince: String(last + 1000) }));
    await ahead.untilEnd();
    assert.equal(ahead.status, 400);
    // A position from another owner (an epoch this server never had).
    const other = open(url(ns, 'x', { changesSince: `7.${last}` }));
    await other.untilEnd();
    assert.equal(other.status, 410);
    const body = await rest(url(ns, 'x', { changesSince: `7.${last}` }), {
      headers: { ...OWNER, accept: 'text/event-stream' },
    });
    assert.equal(body.status, 410);
    assert.match(body.json.error, /changesSince=now/);
    const bad = await rest(url(ns, 'x', { changesSince: 'yesterday' }), {
      headers: { ...OWNER, accept: 'text/event-stream' },
    });
    assert.equal(bad.status, 400);
  });

  it('past what it keeps (10,000 records of a database), a position is refused with 410', { timeout: 60_000 }, async () => {
    const ns = h.ns('feed');
    const feed = open(url(ns, 'n', { changesSince: 'now' }));
    await feed.untilData(1);
    const start = ids(feed)[0];
    feed.close();
    const admin = h.admin(ns);
    await Promise.all(Array.from({ length: 10_050 }, (_, i) => admin.ref(`n/${i % 100}`).set(i)));
    const late = await rest(url(ns, 'n', { changesSince: start }), {
      headers: { ...OWNER, accept: 'text/event-stream' },
    });
    assert.equal(late.status, 410);
    assert.match(late.json.error, /no longer kept \(the oldest position a feed may resume from is \d+\)/);
    // The newest records are still there.
    const recent = open(url(ns, 'n', { changesSince: String(Number(start) + 100) }));
    await recent.untilData(9_950, 45_000);
    assert.deepEqual(recent.dataEvents.at(-1).data, { path: '/49', data: 10_049 });
  });

  it('needs read access to the path: rules decide for others, and a revoked read ends the feed', T, async () => {
    const ns = h.ns('feed');
    const rules = (read) => ({ rules: { public: { '.read': read }, secret: { '.read': false } } });
    let set = await rest(url(ns, '.settings/rules'), { method: 'PUT', body: rules(true), headers: OWNER });
    assert.equal(set.status, 200, set.text);
    const anonymous = (path) => {
      const s = new SseStream(url(ns, path, { changesSince: 'now' }));
      h.defer(() => s.close());
      return s;
    };
    const secret = anonymous('secret');
    await secret.untilEnd();
    assert.equal(secret.status, 401);
    const root = anonymous('');
    await root.untilEnd();
    assert.equal(root.status, 401);
    const pub = anonymous('public');
    await pub.untilData(1);
    await put(ns, 'public/a', 1);
    await pub.untilData(2);
    assert.deepEqual(pub.dataEvents[1].data, { path: '/a', data: 1 });
    set = await rest(url(ns, '.settings/rules'), { method: 'PUT', body: rules(false), headers: OWNER });
    assert.equal(set.status, 200, set.text);
    await put(ns, 'public/b', 2);
    await pub.until((s) => s.events.some((e) => e.event === 'cancel'), 10_000, 'cancel');
    assert.equal(pub.dataEvents.length, 2);
  });
});
