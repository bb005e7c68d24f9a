// Conditional REST requests (spec §15.4): X-Firebase-ETag, if-match (412 with the current
// value and its ETag) and if-none-match (304).

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { useHearth, T } from '../../lib/harness.mjs';
import { rest, restURL } from './rest-client.mjs';

describe('rest etags', () => {
  const h = useHearth();
  const url = (ns, path, params) => restURL(h.server, ns, path, params);
  const ETAG = { 'x-firebase-etag': 'true' };

  it('X-Firebase-ETag: true returns the node hash, null_etag for null', T, async () => {
    const ns = h.ns('etag');
    const empty = await rest(url(ns, 'e'), { headers: ETAG });
    assert.equal(empty.headers.get('etag'), 'null_etag');
    await rest(url(ns, 'e'), { method: 'PUT', body: { v: 1 } });
    const full = await rest(url(ns, 'e'), { headers: ETAG });
    // The hash of {"v":1} (spec §7.7), as the JS client computes it.
    assert.equal(full.headers.get('etag'), 'LjeXjzTaaVqwN8qlkUuwnS01bqc=');
    assert.equal((await rest(url(ns, 'e'))).headers.get('etag'), null, 'no ETag unless asked');
    const written = await rest(url(ns, 'e'), { method: 'PUT', body: { v: 1 }, headers: ETAG });
    assert.equal(written.headers.get('etag'), 'LjeXjzTaaVqwN8qlkUuwnS01bqc=');
  });

  it('if-match writes only over the expected value, else 412 with value and ETag', T, async () => {
    const ns = h.ns('etag');
    const created = await rest(url(ns, 'c'), { method: 'PUT', body: 1, headers: { 'if-match': 'null_etag' } });
    assert.equal(created.status, 200);
    const etag1 = created.headers.get('etag');
    assert.ok(etag1 && etag1 !== 'null_etag');
    const stale = await rest(url(ns, 'c'), { method: 'PUT', body: 2, headers: { 'if-match': 'null_etag' } });
    assert.equal(stale.status, 412);
    assert.equal(stale.text, '1');
    assert.equal(stale.headers.get('etag'), etag1);
    const ok = await rest(url(ns, 'c'), { method: 'PUT', body: 2, headers: { 'if-match': etag1 } });
    assert.equal(ok.status, 200);
    assert.equal((await rest(url(ns, 'c'))).json, 2);
    // DELETE, PATCH and POST honour if-match too.
    const etag2 = ok.headers.get('etag');
    assert.equal((await rest(url(ns, 'c'), { method: 'DELETE', headers: { 'if-match': etag1 } })).status, 412);
    assert.equal((await rest(url(ns, 'c'), { method: 'DELETE', headers: { 'if-match': etag2 } })).status, 200);
    assert.equal((await rest(url(ns, 'm'), { method: 'PATCH', body: { a: 1 }, headers: { 'if-match': etag2 } })).status, 412);
    assert.equal((await rest(url(ns, 'm'), { method: 'POST', body: { a: 1 }, headers: { 'if-match': 'null_etag' } })).status, 200);
    // A quoted ETag is the same ETag.
    const current = (await rest(url(ns, 'm'), { headers: ETAG })).headers.get('etag');
    assert.equal((await rest(url(ns, 'm'), { method: 'PATCH', body: { b: 2 }, headers: { 'if-match': `"${current}"` } })).status, 200);
  });

  it('if-none-match answers 304 while unchanged', T, async () => {
    const ns = h.ns('etag');
    await rest(url(ns, 'n'), { method: 'PUT', body: { a: [1, 2] } });
    const first = await rest(url(ns, 'n'), { headers: ETAG });
    const etag = first.headers.get('etag');
    const same = await rest(url(ns, 'n'), { headers: { 'if-none-match': etag } });
    assert.equal(same.status, 304);
    assert.equal(same.text, '');
    await rest(url(ns, 'n/a/2'), { method: 'PUT', body: 3 });
    const changed = await rest(url(ns, 'n'), { headers: { 'if-none-match': etag } });
    assert.equal(changed.status, 200);
    assert.deepEqual(changed.json, { a: [1, 2, 3] });
    assert.notEqual(changed.headers.get('etag'), etag);
  });

  it('compare-and-set from many concurrent REST clients counts every increment', T, async () => {
    const ns = h.ns('etag');
    const WORKERS = 8;
    const EACH = 10;
    async function increment() {
      for (;;) {
        const got = await rest(url(ns, 'counter'), { headers: ETAG });
        const etag = got.headers.get('etag');
        const next = (got.json ?? 0) + 1;
        const put = await rest(url(ns, 'counter'), { method: 'PUT', body: next, headers: { 'if-match': etag } });
        if (put.status === 200) return;
        assert.equal(put.status, 412);
      }
    }
    await Promise.all(
      Array.from({ length: WORKERS }, async () => {
        for (let i = 0; i < EACH; i++) await increment();
      }),
    );
    assert.equal((await rest(url(ns, 'counter'))).json, WORKERS * EACH);
  });
});
