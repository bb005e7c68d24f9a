// A database's quotas (docs/quotas.md): set and read over REST, and each kind enforced on the
// database's clients (the official SDK, raw connections, REST) with a message that names it,
// counted in /metrics; admins are never limited, and other databases are not touched.
//
// Rates are tested with bursts far past the quota, so that however slow the machine the
// refill in between cannot let them all through.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { set } from 'firebase/database';
import { useHearth, T, uniqueNs } from '../../lib/harness.mjs';
import { RawClient } from '../../lib/raw.mjs';
import { OWNER, baseURL, rest, restURL } from './rest-client.mjs';

describe('quotas', () => {
  const h = useHearth();
  const quotasURL = (ns) => `${baseURL(h.server)}/.settings/quotas.json?ns=${ns}`;
  const setQuotas = async (ns, quotas) => {
    const res = await rest(quotasURL(ns), { method: 'PUT', body: quotas, headers: OWNER });
    assert.equal(res.status, 200, res.text);
    return res.json;
  };
  const refusedCount = async (quota) => {
    const text = await (await fetch(`${baseURL(h.server)}/metrics`, { headers: OWNER })).text();
    return Number(new RegExp(`^hearth_quota_refused_total\\{quota="${quota}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? NaN);
  };

  it('are read and set as one object, and refused when they make no sense', T, async () => {
    const ns = uniqueNs('quotas');
    const none = { connections: null, writesPerSecond: null, writeBytesPerMinute: null, storedBytes: null };
    assert.deepEqual((await rest(quotasURL(ns), { headers: OWNER })).json, none);
    assert.deepEqual(await setQuotas(ns, { writesPerSecond: 5, storedBytes: 1000 }), { ...none, writesPerSecond: 5, storedBytes: 1000 });
    for (const bad of [{ connections: 0 }, { writesPerSecond: -1 }, { storedBytes: 'big' }, { colour: 1 }, [1], 5]) {
      const refused = await rest(quotasURL(ns), { method: 'PUT', body: bad, headers: OWNER });
      assert.equal(refused.status, 400, JSON.stringify(bad));
    }
    assert.equal((await rest(quotasURL(ns), { method: 'PUT', body: { connections: 1 } })).status, 401);
    // Back to none: null for each.
    assert.deepEqual(await setQuotas(ns, none), none);
  });

  it('writes a second: a burst past it is refused with 429 over REST and limit_exceeded over the SDK, not for admins', T, async () => {
    const ns = uniqueNs('quotas');
    await setQuotas(ns, { writesPerSecond: 1 });
    const before = await refusedCount('writes');
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => rest(restURL(h.server, ns, `w/${i}`), { method: 'PUT', body: i })));
    const statuses = answers.map((a) => a.status);
    assert.ok(statuses.includes(200) && statuses.includes(429), `${statuses}`);
    const refused = answers.find((a) => a.status === 429);
    assert.match(refused.json.error, /quota of 1 writes a second/);
    assert.ok((await refusedCount('writes')) > before);
    // The SDK's set() is rejected with the server's reason.
    const client = h.client(ns);
    const sets = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => set(client.ref(`s/${i}`), i)));
    const rejected = sets.find((s) => s.status === 'rejected');
    assert.ok(rejected, 'some of 20 sets at once were refused');
    assert.match(String(rejected.reason), /limit_exceeded|quota of 1 writes a second/i);
    // Admins are not limited, and another database is not touched.
    const admin = await Promise.all(Array.from({ length: 10 }, (_, i) => rest(restURL(h.server, ns, `a/${i}`), { method: 'PUT', body: i, headers: OWNER })));
    assert.deepEqual(admin.map((a) => a.status), Array(10).fill(200));
    const other = uniqueNs('quotas');
    const free = await Promise.all(Array.from({ length: 10 }, (_, i) => rest(restURL(h.server, other, `w/${i}`), { method: 'PUT', body: i })));
    assert.deepEqual(free.map((a) => a.status), Array(10).fill(200));
  });

  it('bytes a minute and stored bytes: refused past them, a deletion still accepted', T, async () => {
    const ns = uniqueNs('quotas');
    await setQuotas(ns, { writeBytesPerMinute: 1000 });
    const body = 'x'.repeat(600);
    assert.equal((await rest(restURL(h.server, ns, 'a'), { method: 'PUT', body })).status, 200);
    const past = await rest(restURL(h.server, ns, 'b'), { method: 'PUT', body });
    assert.equal(past.status, 429);
    assert.match(past.json.error, /quota of 1000 bytes written a minute/);

    const full = uniqueNs('quotas');
    await setQuotas(full, { storedBytes: 500 });
    assert.equal((await rest(restURL(h.server, full, 'a'), { method: 'PUT', body })).status, 200);
    const over = await rest(restURL(h.server, full, 'b'), { method: 'PUT', body: 1 });
    assert.equal(over.status, 507);
    assert.match(over.json.error, /only deletions are accepted/);
    // Over the realtime protocol too, and a deletion goes through.
    const c = await RawClient.connect(h.server.wsURL(full));
    h.defer(() => c.terminate());
    await c.handshake();
    const put = await c.request('p', { p: '/c', d: 1 });
    assert.equal(put.s, 'limit_exceeded');
    assert.match(put.d, /only deletions/);
    assert.equal((await c.request('p', { p: '/a', d: null })).s, 'ok');
    assert.equal((await rest(restURL(h.server, full, 'b'), { method: 'PUT', body: 1 })).status, 200, 'back under the quota');
  });

  it('connections: past the quota a session is told why and closed, an event stream answered 429', T, async () => {
    const ns = uniqueNs('quotas');
    await setQuotas(ns, { connections: 2 });
    const before = await refusedCount('connections');
    const open = async () => {
      const c = await RawClient.connect(h.server.wsURL(ns));
      h.defer(() => c.terminate());
      await c.handshake();
      return c;
    };
    const [a, b] = [await open(), await open()];
    assert.equal((await a.request('g', { p: '/x' })).s, 'ok');
    assert.equal((await b.request('g', { p: '/x' })).s, 'ok');
    const third = await open();
    const shut = await third.waitMessage((m) => m.t === 'c' && m.d?.t === 's');
    assert.match(shut.msg.d.d, /allows 2 connections at once/);
    await third.waitClose();
    const stream = await fetch(restURL(h.server, ns, 'x'), { headers: { accept: 'text/event-stream' } });
    assert.equal(stream.status, 429);
    await stream.body?.cancel();
    assert.ok((await refusedCount('connections')) >= before + 2);
    // One leaves: room for one more.
    a.terminate();
    await a.waitClose();
    let again;
    for (let i = 0; i < 100; i++) {
      again = await open();
      const first = await Promise.race([
        again.request('g', { p: '/x' }).then(() => 'ok'),
        again.waitMessage((m) => m.t === 'c' && m.d?.t === 's').then(() => 'refused'),
      ]);
      if (first === 'ok') break;
      again.terminate();
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal((await again.request('g', { p: '/x' })).s, 'ok');
  });
});
