// REST details of issue #20 and the answer cache, through fetch against the real binary (two
// shards, so that half the namespaces are read through another core):
// - the answer cache: repeated reads are the same bytes, served from the cache (its
//   /metrics counters), and a write at, below or above a location changes its answer;
// - the ETag of a query's answer is the hash of the query's result, not of the location;
// - a PATCH answers each written path as a GET of it reads (arrays, key order);
// - `timeout` applies to every form of read, on the owner's core and through another;
// - `print=pretty` indents every answer that carries data.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import parsePrometheus from 'parse-prometheus-text-format';
import { useHearth, T } from '../../lib/harness.mjs';
import { OWNER, nsOnShard, rest, restURL } from './rest-client.mjs';

const ETAG = { 'x-firebase-etag': 'true' };

/** Firebase's pretty form: two-space indents and `"key" : value`. */
function pretty(value) {
  return JSON.stringify(value, null, 2).replace(/^(\s*"(?:[^"\\]|\\.)*"): /gm, '$1 : ');
}

/** A list of `n` children, each a few hundred bytes: an answer the cache keeps. */
function list(n, tag = 'x') {
  const out = {};
  for (let i = 0; i < n; i++) {
    out[`item${String(i).padStart(3, '0')}`] = { title: `${tag} ${i} ${'t'.repeat(200)}`, score: i };
  }
  return out;
}

describe('rest details', () => {
  const h = useHearth();
  const url = (ns, path, params) => restURL(h.server, ns, path, params);

  async function cacheCounts() {
    const res = await fetch(`http://127.0.0.1:${h.port}/metrics`, { headers: OWNER });
    const families = new Map(parsePrometheus(await res.text()).map((f) => [f.name, f]));
    const count = (name) => Number(families.get(name)?.metrics[0]?.value ?? 0);
    return { hits: count('hearth_rest_cache_hits_total'), misses: count('hearth_rest_cache_misses_total') };
  }

  for (const shard of [0, 1]) {
    it(`cached answers are the uncached bytes and follow writes (database on shard ${shard})`, T, async () => {
      const ns = nsOnShard('cache', shard);
      await rest(url(ns, 'feed'), { method: 'PUT', body: list(80) });
      await rest(url(ns, 'other'), { method: 'PUT', body: list(20, 'o') });
      const forms = [{}, { format: 'export' }, { print: 'pretty' }, { shallow: 'true' },
        { orderBy: '"score"', limitToLast: '15' }];
      for (const params of forms) {
        const before = await cacheCounts();
        const first = await rest(url(ns, 'feed', params), { headers: ETAG });
        const second = await rest(url(ns, 'feed', params), { headers: ETAG });
        const after = await cacheCounts();
        assert.equal(first.status, 200);
        assert.ok(first.text.length >= 1024, 'an answer the cache keeps');
        assert.equal(second.text, first.text, JSON.stringify(params));
        assert.equal(second.headers.get('etag'), first.headers.get('etag'));
        assert.deepEqual([after.hits - before.hits, after.misses - before.misses], [1, 1],
          `one miss then one hit for ${JSON.stringify(params)}`);
      }
      const cached = await rest(url(ns, 'feed'));
      // Beside: still the cached answer.
      await rest(url(ns, 'other/item000/score'), { method: 'PUT', body: 99 });
      let before = await cacheCounts();
      assert.equal((await rest(url(ns, 'feed'))).text, cached.text);
      assert.equal((await cacheCounts()).hits - before.hits, 1);
      // Below: the new value.
      await rest(url(ns, 'feed/item003/score'), { method: 'PUT', body: 1000 });
      const below = await rest(url(ns, 'feed'));
      assert.equal(below.json.item003.score, 1000);
      // Above: a PATCH that replaces it.
      await rest(url(ns, ''), { method: 'PATCH', body: { feed: { only: 'one' } } });
      assert.deepEqual((await rest(url(ns, 'feed'))).json, { only: 'one' });
      // Equal data written again: the same bytes.
      await rest(url(ns, 'feed'), { method: 'PUT', body: list(80) });
      before = await cacheCounts();
      const again = await rest(url(ns, 'feed'));
      assert.equal((await cacheCounts()).misses - before.misses, 1);
      assert.equal(again.text, cached.text);
    });
  }

  it('the ETag of a query answer is the hash of its result', T, async () => {
    const ns = h.ns('qetag');
    const people = { ada: { age: 36 }, bob: { age: 20 }, cyd: { age: 51 }, dee: { age: 44 } };
    await rest(url(ns, 'people'), { method: 'PUT', body: people });
    // The same data as the query's result, stored at a location of its own.
    await rest(url(ns, 'expected'), { method: 'PUT', body: { ada: people.ada, bob: people.bob } });
    const expected = (await rest(url(ns, 'expected'), { headers: ETAG })).headers.get('etag');
    const whole = (await rest(url(ns, 'people'), { headers: ETAG })).headers.get('etag');
    const query = { orderBy: '"$key"', limitToFirst: '2' };
    const answer = await rest(url(ns, 'people', query), { headers: ETAG });
    assert.deepEqual(answer.json, { ada: people.ada, bob: people.bob });
    assert.equal(answer.headers.get('etag'), expected);
    assert.notEqual(answer.headers.get('etag'), whole);
    // if-none-match compares with the result's ETag: unchanged while a write outside the
    // window leaves the result alone.
    const same = await rest(url(ns, 'people', query), { headers: { 'if-none-match': expected } });
    assert.equal(same.status, 304);
    assert.equal(same.headers.get('etag'), expected);
    await rest(url(ns, 'people/dee/age'), { method: 'PUT', body: 45 });
    assert.equal((await rest(url(ns, 'people', query), { headers: { 'if-none-match': expected } })).status, 304);
    assert.equal((await rest(url(ns, 'people', query), { headers: { 'if-none-match': whole } })).status, 200);
    // An empty result is null_etag.
    const none = await rest(url(ns, 'people', { orderBy: '"age"', startAt: '100' }), { headers: ETAG });
    assert.equal(none.headers.get('etag'), 'null_etag');
  });

  it('a PATCH answers each written path as a GET of it reads', T, async () => {
    const ns = h.ns('patch');
    const body = { list: { 1: 'b', 0: 'a' }, n: { 10: 'ten', 9: 'nine', b: 'bee' }, 'm/0': 'x', 'm/1': 'y' };
    const answer = await rest(url(ns, 'p'), { method: 'PATCH', body });
    assert.equal(answer.status, 200);
    assert.equal(answer.text, '{"list":["a","b"],"m/0":"x","m/1":"y","n":{"9":"nine","10":"ten","b":"bee"}}');
    for (const path of ['list', 'n', 'm/0']) {
      const read = await rest(url(ns, `p/${path}`));
      assert.ok(answer.text.includes(`"${path}":${read.text}`), `${path}: ${read.text}`);
    }
    const indented = await rest(url(ns, 'p', { print: 'pretty' }), { method: 'PATCH', body: { list: ['a', 'b'] } });
    assert.equal(indented.text, pretty({ list: ['a', 'b'] }));
  });

  it('timeout applies to every form of read, on the owner and through another core', { timeout: 60_000 }, async () => {
    for (const shard of [0, 1]) {
      const ns = nsOnShard('timeout', shard);
      // 200,000 children (about 10 MB): no read of it finishes within a millisecond, and no
      // answer of this size is cached.
      const big = {};
      for (let i = 0; i < 200_000; i++) big[`k${i}`] = { v: i, s: 'abcdefghijklmnopqrstuvwxyz' };
      const put = await rest(url(ns, 'big', { print: 'silent' }), { method: 'PUT', body: big });
      assert.equal(put.status, 204);
      const forms = [{}, { format: 'export' }, { print: 'pretty' }, { shallow: 'true' },
        { orderBy: '"$key"', limitToLast: '150000' }];
      for (const params of forms) {
        const res = await rest(url(ns, 'big', { ...params, timeout: '1ms' }));
        assert.equal(res.status, 400, `shard ${shard} ${JSON.stringify(params)}`);
        assert.match(res.json.error, /timeout/);
      }
      const small = await rest(url(ns, 'big/k7', { timeout: '15min' }));
      assert.deepEqual(small.json, { v: 7, s: 'abcdefghijklmnopqrstuvwxyz' });
    }
  });

  it('print=pretty indents every answer that carries data', T, async () => {
    const ns = h.ns('pretty');
    const P = { print: 'pretty' };
    const value = { a: { b: [1, 2] }, c: 'd' };
    const put = await rest(url(ns, 'v', P), { method: 'PUT', body: value });
    assert.equal(put.text, pretty(value));
    assert.equal((await rest(url(ns, 'v', P))).text, pretty(value));
    assert.equal((await rest(url(ns, 'v', { ...P, shallow: 'true' }))).text, pretty({ a: true, c: true }));
    assert.equal((await rest(url(ns, 'v', { ...P, orderBy: '"$key"', limitToFirst: '1' }))).text,
      pretty({ a: { b: [1, 2] } }));
    assert.equal((await rest(url(ns, 'v', { ...P, format: 'export' }))).text,
      pretty({ a: { b: { 0: 1, 1: 2 } }, c: 'd' }));
    const post = await rest(url(ns, 'list', P), { method: 'POST', body: 1 });
    assert.equal(post.text, pretty({ name: post.json.name }));
    const patch = await rest(url(ns, 'v', P), { method: 'PATCH', body: { c: { e: 1 } } });
    assert.equal(patch.text, pretty({ c: { e: 1 } }));
    const stale = await rest(url(ns, 'v', P), { method: 'PUT', body: 1, headers: { 'if-match': 'null_etag' } });
    assert.equal(stale.status, 412);
    assert.equal(stale.text, pretty({ a: { b: [1, 2] }, c: { e: 1 } }));
    await rest(url(ns, 'pr'), { method: 'PUT', body: { '.value': 'x', '.priority': 5 } });
    assert.equal((await rest(url(ns, 'pr/.priority', P))).text, '5');
    assert.equal((await rest(url(ns, 'v', { ...P, callback: 'cb' }))).text,
      `cb(${pretty({ a: { b: [1, 2] }, c: { e: 1 } })});`);
    const gone = await rest(url(ns, 'v', P), { method: 'DELETE' });
    assert.equal(gone.text, 'null');
  });
});
