// REST methods, output forms, namespaces, credentials and error codes (spec §15.1–15.5),
// driven with plain fetch.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { useHearth, T } from '../../lib/harness.mjs';
import { OWNER, RawHttp, baseURL, rest, restURL } from './rest-client.mjs';

const MOCK_TOKEN =
  Buffer.from('{"alg":"none","type":"JWT"}').toString('base64url') +
  '.' +
  Buffer.from('{"sub":"alice","user_id":"alice","iat":0,"exp":3600}').toString('base64url') +
  '.';

describe('rest methods', () => {
  const h = useHearth();
  const url = (ns, path, params) => restURL(h.server, ns, path, params);

  it('PUT answers the stored value and GET reads it back', T, async () => {
    const ns = h.ns('rest');
    const put = await rest(url(ns, 'a/b'), { method: 'PUT', body: { n: 1.0, s: 'x', t: true, list: [1, 2] } });
    assert.equal(put.status, 200);
    assert.match(put.headers.get('content-type'), /^application\/json/);
    assert.equal(put.text, '{"list":[1,2],"n":1,"s":"x","t":true}');
    assert.deepEqual((await rest(url(ns, 'a'))).json, { b: { n: 1, s: 'x', t: true, list: [1, 2] } });
    assert.deepEqual((await rest(url(ns, 'a/b/list'))).json, [1, 2]);
    assert.equal((await rest(url(ns, 'missing'))).text, 'null');
    // `/path/.json` is the same location as `/path.json`, and `/.json` is the root.
    assert.deepEqual((await rest(`${baseURL(h.server)}/a/b/.json?ns=${ns}`)).json.n, 1);
    assert.deepEqual(Object.keys((await rest(`${baseURL(h.server)}/.json?ns=${ns}`)).json), ['a']);
  });

  it('POST creates a child with a push id, in creation order', T, async () => {
    const ns = h.ns('rest');
    const names = [];
    for (let i = 0; i < 5; i++) {
      const res = await rest(url(ns, 'list'), { method: 'POST', body: { i } });
      assert.equal(res.status, 200);
      assert.match(res.json.name, /^[-0-9A-Za-z_]{20}$/);
      names.push(res.json.name);
    }
    assert.deepEqual([...names].sort(), names);
    const list = (await rest(url(ns, 'list'))).json;
    assert.deepEqual(Object.keys(list).sort(), names);
    assert.deepEqual(list[names[3]], { i: 3 });
  });

  it('PATCH updates several paths at once; DELETE removes', T, async () => {
    const ns = h.ns('rest');
    await rest(url(ns, 'u'), { method: 'PUT', body: { a: 1, b: { c: 2, d: 3 } } });
    const patch = await rest(url(ns, 'u'), { method: 'PATCH', body: { a: null, 'b/c': 20, e: { f: 'g' } } });
    assert.equal(patch.status, 200);
    assert.deepEqual(patch.json, { a: null, 'b/c': 20, e: { f: 'g' } });
    assert.deepEqual((await rest(url(ns, 'u'))).json, { b: { c: 20, d: 3 }, e: { f: 'g' } });
    const del = await rest(url(ns, 'u/b'), { method: 'DELETE' });
    assert.equal(del.status, 200);
    assert.equal(del.text, 'null');
    assert.deepEqual((await rest(url(ns, 'u'))).json, { e: { f: 'g' } });
  });

  it('X-HTTP-Method-Override turns a POST into PUT, PATCH or DELETE', T, async () => {
    const ns = h.ns('rest');
    const put = await rest(url(ns, 'o'), { method: 'POST', body: { a: 1 }, headers: { 'x-http-method-override': 'PUT' } });
    assert.deepEqual(put.json, { a: 1 });
    await rest(url(ns, 'o'), { method: 'POST', body: { b: 2 }, headers: { 'X-HTTP-Method-Override': 'PATCH' } });
    assert.deepEqual((await rest(url(ns, 'o'))).json, { a: 1, b: 2 });
    await rest(url(ns, 'o', { 'x-http-method-override': 'DELETE' }), { method: 'POST' });
    assert.equal((await rest(url(ns, 'o'))).text, 'null');
    const bad = await rest(url(ns, 'o'), { method: 'POST', body: 1, headers: { 'x-http-method-override': 'GET' } });
    assert.equal(bad.status, 400);
  });

  it('server values are resolved in REST writes', T, async () => {
    const ns = h.ns('rest');
    const before = Date.now();
    const put = await rest(url(ns, 'sv'), { method: 'PUT', body: { at: { '.sv': 'timestamp' }, n: 5 } });
    assert.ok(put.json.at >= before && put.json.at <= Date.now() + 1000, `timestamp ${put.json.at}`);
    await rest(url(ns, 'sv'), { method: 'PATCH', body: { n: { '.sv': { increment: 2 } } } });
    assert.equal((await rest(url(ns, 'sv/n'))).json, 7);
  });

  it('print=pretty indents, print=silent answers 204 for reads and writes', T, async () => {
    const ns = h.ns('rest');
    const silent = await rest(url(ns, 'p', { print: 'silent' }), { method: 'PUT', body: { a: { b: 1 } } });
    assert.equal(silent.status, 204);
    assert.equal(silent.text, '');
    const pretty = await rest(url(ns, 'p', { print: 'pretty' }));
    assert.equal(pretty.text, '{\n  "a" : {\n    "b" : 1\n  }\n}');
    assert.equal((await rest(url(ns, 'p', { print: 'silent' }))).status, 204);
    assert.equal((await rest(url(ns, 'p', { print: 'loud' }))).status, 400);
  });

  it('format=export keeps priorities; the plain form drops them', T, async () => {
    const ns = h.ns('rest');
    await rest(url(ns, 'e'), { method: 'PUT', body: { a: { '.value': 1, '.priority': 2 }, b: { c: 3, '.priority': 'x' } } });
    assert.deepEqual((await rest(url(ns, 'e'))).json, { a: 1, b: { c: 3 } });
    assert.deepEqual((await rest(url(ns, 'e', { format: 'export' }))).json, {
      a: { '.value': 1, '.priority': 2 },
      b: { c: 3, '.priority': 'x' },
    });
    await rest(url(ns, 'e/b/.priority'), { method: 'PUT', body: 9 });
    assert.equal((await rest(url(ns, 'e/b/.priority'))).json, 9);
    assert.equal((await rest(url(ns, 'e', { format: 'xml' }))).status, 400);
  });

  it('shallow=true lists keys; a primitive stays itself', T, async () => {
    const ns = h.ns('rest');
    await rest(url(ns, 's'), { method: 'PUT', body: { a: { deep: { deeper: 1 } }, b: 2, c: 'x' } });
    assert.deepEqual((await rest(url(ns, 's', { shallow: 'true' }))).json, { a: true, b: true, c: true });
    assert.equal((await rest(url(ns, 's/b', { shallow: 'true' }))).json, 2);
    assert.equal((await rest(url(ns, 'none', { shallow: 'true' }))).text, 'null');
    const mixed = await rest(url(ns, 's', { shallow: 'true', orderBy: '"$key"' }));
    assert.equal(mixed.status, 400);
    assert.match(mixed.json.error, /shallow/);
  });

  it('download sets Content-Disposition; callback wraps the value (JSONP)', T, async () => {
    const ns = h.ns('rest');
    await rest(url(ns, 'd'), { method: 'PUT', body: { a: 1 } });
    const download = await rest(url(ns, 'd', { download: 'backup.json' }));
    assert.equal(download.headers.get('content-disposition'), 'attachment; filename="backup.json"');
    assert.deepEqual(download.json, { a: 1 });
    const jsonp = await rest(url(ns, 'd', { callback: 'handle' }));
    assert.equal(jsonp.text, 'handle({"a":1});');
    assert.match(jsonp.headers.get('content-type'), /javascript/);
    assert.equal((await rest(url(ns, 'd', { callback: 'alert(1)' }))).status, 400);
  });

  it('the namespace comes from ns=, else from the Host header', T, async () => {
    const ns = h.ns('host');
    await rest(url(ns, 'where'), { method: 'PUT', body: 'by-param' });
    // fetch cannot set Host, so this request is written by hand.
    const c = await RawHttp.connect(h.server.port);
    h.defer(() => c.close());
    await c.write(`GET /where.json HTTP/1.1\r\nHost: ${ns}.example.com:${h.server.port}\r\n\r\n`);
    assert.equal((await c.response()).body, '"by-param"');
    const other = await rest(url(h.ns('host'), 'where'));
    assert.equal(other.text, 'null');
    const invalid = await rest(`${baseURL(h.server)}/where.json?ns=bad.name`);
    assert.equal(invalid.status, 404);
  });

  it('credentials: auth=, access_token= and Authorization: Bearer', T, async () => {
    const ns = h.ns('auth');
    for (const [how, opts, suffix] of [
      ['bearer', { headers: OWNER }, {}],
      ['access_token', {}, { access_token: 'owner' }],
      ['auth', {}, { auth: 'owner' }],
      ['mock token', {}, { auth: MOCK_TOKEN }],
    ]) {
      const res = await rest(url(ns, `who/${how.replace(' ', '_')}`, suffix), { method: 'PUT', body: how, ...opts });
      assert.equal(res.status, 200, `${how}: ${res.text}`);
    }
    const bad = await rest(url(ns, 'who', { auth: 'not-a-token' }));
    assert.equal(bad.status, 401);
    assert.equal(typeof bad.json.error, 'string');
    const badBearer = await rest(url(ns, 'who'), { headers: { authorization: 'Bearer nope' } });
    assert.equal(badBearer.status, 401);
  });

  it('/.settings/rules.json needs an admin; GET / answers', T, async () => {
    const ns = h.ns('settings');
    const rulesURL = `${baseURL(h.server)}/.settings/rules.json?ns=${ns}`;
    assert.equal((await rest(rulesURL)).status, 401);
    assert.equal((await rest(rulesURL, { method: 'PUT', body: { rules: {} } })).status, 401);
    const text = '{\n  // open for the test\n  "rules": { ".read": true, ".write": true }\n}';
    const put = await rest(rulesURL, { method: 'PUT', body: text, raw: true, headers: OWNER });
    assert.equal(put.status, 200);
    assert.equal((await rest(rulesURL, { headers: OWNER })).text, text);
    assert.deepEqual((await rest(`${rulesURL}&format=strict`, { headers: OWNER })).json, {
      rules: { '.read': true, '.write': true },
    });
    assert.equal((await rest(rulesURL, { method: 'PUT', body: 'nope', raw: true, headers: OWNER })).status, 400);
    assert.equal((await rest(`${baseURL(h.server)}/.settings/other.json?ns=${ns}`, { headers: OWNER })).status, 404);
    const root = await rest(`${baseURL(h.server)}/`);
    assert.equal(root.status, 200);
  });

  it('error codes: 400 bad JSON and paths, 404 unknown endpoints, 405 methods', T, async () => {
    const ns = h.ns('errors');
    const badJson = await rest(url(ns, 'x'), { method: 'PUT', body: '{"a":', raw: true });
    assert.equal(badJson.status, 400);
    assert.match(badJson.json.error, /JSON/);
    assert.equal((await rest(url(ns, 'x'), { method: 'PUT', body: '', raw: true })).status, 400);
    assert.equal((await rest(url(ns, 'x'), { method: 'PUT', body: { 'bad.key': 1 } })).status, 400);
    assert.equal((await rest(url(ns, 'x'), { method: 'PUT', body: { '.value': 1, other: 2 } })).status, 400);
    assert.equal((await rest(url(ns, 'x'), { method: 'PATCH', body: [1, 2] })).status, 400);
    assert.equal((await rest(url(ns, 'x'), { method: 'PATCH', body: { a: 1, 'a/b': 2 } })).status, 400);
    assert.equal((await rest(`${baseURL(h.server)}/a.b.json?ns=${ns}`)).status, 400);
    assert.equal((await rest(`${baseURL(h.server)}/.info/connected.json?ns=${ns}`)).status, 400);
    const deep = `${'d/'.repeat(40)}x`;
    assert.equal((await rest(url(ns, deep), { method: 'PUT', body: 1 })).status, 400);
    const notFound = await rest(`${baseURL(h.server)}/no-suffix?ns=${ns}`);
    assert.equal(notFound.status, 404);
    assert.equal(typeof notFound.json.error, 'string');
    const trace = await rest(url(ns, 'x'), { method: 'PROPFIND' });
    assert.equal(trace.status, 405);
    assert.match(trace.headers.get('allow'), /GET/);
    assert.equal((await rest(`${baseURL(h.server)}/.ws?ns=${ns}`)).status, 400);
    // Nothing was written by the refused requests.
    assert.equal((await rest(url(ns, 'x'))).text, 'null');
  });

  it('CORS: every answer allows any origin, preflights are answered', T, async () => {
    const ns = h.ns('cors');
    const res = await rest(url(ns, 'c'));
    assert.equal(res.headers.get('access-control-allow-origin'), '*');
    const pre = await fetch(url(ns, 'c'), {
      method: 'OPTIONS',
      headers: { origin: 'http://app.example', 'access-control-request-method': 'PATCH', 'access-control-request-headers': 'x-firebase-etag' },
    });
    assert.equal(pre.status, 204);
    assert.match(pre.headers.get('access-control-allow-methods'), /PATCH/);
    assert.equal(pre.headers.get('access-control-allow-headers'), 'x-firebase-etag');
  });

  it('HEAD answers like GET without a body', T, async () => {
    const ns = h.ns('head');
    await rest(url(ns, 'h'), { method: 'PUT', body: { a: 1 } });
    const head = await fetch(url(ns, 'h'), { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(head.headers.get('content-length'), '7');
    assert.equal(await head.text(), '');
  });
});
