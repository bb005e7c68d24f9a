// REST and the realtime protocol share one database: a REST write reaches WebSocket listeners
// of the official SDKs, and SDK writes reach REST reads and event streams.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { set, update, push, get, query, orderByChild, limitToFirst } from 'firebase/database';
import { useHearth, T } from '../../lib/harness.mjs';
import { recordValues, recordAdminValues, keysOf } from '../../lib/util.mjs';
import { SseStream, rest, restURL } from './rest-client.mjs';

const PUSH_ALPHABET = '-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz';

/** The time (ms) in the first 8 characters of a push id (spec §13). */
function pushIdTime(id) {
  let t = 0;
  for (const c of id.slice(0, 8)) t = t * 64 + PUSH_ALPHABET.indexOf(c);
  return t;
}

describe('rest and websocket interop', () => {
  const h = useHearth();
  const url = (ns, path, params) => restURL(h.server, ns, path, params);

  it('a REST write is seen by a WebSocket listener', T, async () => {
    const ns = h.ns('interop');
    const client = h.client(ns);
    const rec = recordValues(client.ref('shared'));
    await rec.first();
    await rest(url(ns, 'shared'), { method: 'PUT', body: { from: 'rest', n: 1 } });
    await rec.untilVal({ from: 'rest', n: 1 });
    await rest(url(ns, 'shared'), { method: 'PATCH', body: { n: 2, 'deep/x': true } });
    await rec.untilVal({ from: 'rest', n: 2, deep: { x: true } });
    await rest(url(ns, 'shared'), { method: 'DELETE' });
    await rec.untilVal(null);
    rec.off();
  });

  it('a REST write updates a filtered WebSocket listen', T, async () => {
    const ns = h.ns('interop');
    const client = h.client(ns);
    await rest(url(ns, 'scores'), { method: 'PUT', body: { a: { s: 3 }, b: { s: 1 }, c: { s: 2 } } });
    const rec = recordValues(query(client.ref('scores'), orderByChild('s'), limitToFirst(2)));
    await rec.until((snap) => JSON.stringify(keysOf(snap)) === '["b","c"]');
    await rest(url(ns, 'scores/d'), { method: 'PUT', body: { s: 0 } });
    await rec.until((snap) => JSON.stringify(keysOf(snap)) === '["d","b"]');
    rec.off();
  });

  it('SDK writes are seen by REST reads and event streams', T, async () => {
    const ns = h.ns('interop');
    const client = h.client(ns);
    const stream = new SseStream(url(ns, 'feed'));
    h.defer(() => stream.close());
    await stream.untilData(1);
    await set(client.ref('feed'), { a: 1 });
    await stream.untilData(2);
    assert.deepEqual(stream.dataEvents[1].data, { path: '/', data: { a: 1 } });
    await update(client.ref('feed'), { b: 2, c: 3 });
    await stream.untilData(3);
    assert.deepEqual(stream.dataEvents[2], { ...stream.dataEvents[2], event: 'patch', data: { path: '/', data: { b: 2, c: 3 } } });
    const key = push(client.ref('feed/list'), 'item').key;
    await stream.untilData(4);
    assert.deepEqual(stream.dataEvents[3].data, { path: `/list/${key}`, data: 'item' });
    assert.deepEqual((await rest(url(ns, 'feed'))).json, { a: 1, b: 2, c: 3, list: { [key]: 'item' } });
  });

  it('the admin SDK and REST agree on data, priorities and push ids', T, async () => {
    const ns = h.ns('interop');
    const admin = h.admin(ns);
    await admin.ref('items/x').setWithPriority({ v: 1 }, 10);
    const exported = await rest(url(ns, 'items', { format: 'export' }));
    assert.deepEqual(exported.json, { x: { v: 1, '.priority': 10 } });
    const posted = await rest(url(ns, 'items'), { method: 'POST', body: { v: 2 } });
    const rec = recordAdminValues(admin.ref('items'));
    await rec.until((snap) => snap.hasChild(posted.json.name));
    // Server push ids carry the same time prefix as SDK ones (within clock estimation error),
    // so children pushed over REST and over the SDK interleave by time.
    const later = admin.ref('items').push().key;
    const drift = Math.abs(pushIdTime(later) - pushIdTime(posted.json.name));
    assert.ok(drift < 1000, `${posted.json.name} vs ${later}: ${drift} ms apart`);
    rec.off();
    const viaSdk = await get(h.client(ns).ref('items'));
    assert.deepEqual(viaSdk.val(), { x: { v: 1 }, [posted.json.name]: { v: 2 } });
  });
});
