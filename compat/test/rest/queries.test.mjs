// REST query parameters (spec §15.3): orderBy with every index, ranges, limits, and the
// errors of each parameter; timeout and writeSizeLimit.

import { describe, it, before } from 'node:test';
import assert from 'node:assert/strict';
import { useHearth, T } from '../../lib/harness.mjs';
import { rest, restURL } from './rest-client.mjs';

const PEOPLE = {
  ada: { age: 36, name: 'Ada' },
  bob: { age: 17, name: 'Bob' },
  cy: { age: 52, name: 'Cy', '.priority': 1 },
  dee: { age: 'unknown', name: 'Dee', '.priority': 'p' },
  eve: { name: 'Eve', '.priority': 3 },
  fay: { age: 36, name: 'Fay' },
};

describe('rest queries', () => {
  const h = useHearth();
  let ns;
  const url = (path, params) => restURL(h.server, ns, path, params);
  const keys = async (path, params) => {
    const res = await rest(url(path, params));
    assert.equal(res.status, 200, res.text);
    return res.json === null ? [] : Object.keys(res.json).sort();
  };

  before(async () => {
    ns = h.ns('query');
    const put = await rest(url('people'), { method: 'PUT', body: PEOPLE });
    assert.equal(put.status, 200);
    await rest(url('scores'), { method: 'PUT', body: { a: 5, b: 1, c: 9, d: 1, e: true, f: 'x' } });
  });

  it('orderBy a child with ranges and limits', T, async () => {
    assert.deepEqual(await keys('people', { orderBy: '"age"', startAt: '36' }), ['ada', 'cy', 'dee', 'fay']);
    assert.deepEqual(await keys('people', { orderBy: '"age"', startAt: '20', endAt: '40' }), ['ada', 'fay']);
    assert.deepEqual(await keys('people', { orderBy: '"age"', equalTo: '36' }), ['ada', 'fay']);
    assert.deepEqual(await keys('people', { orderBy: '"age"', limitToFirst: '2' }), ['bob', 'eve']);
    assert.deepEqual(await keys('people', { orderBy: '"age"', limitToLast: '2' }), ['cy', 'dee']);
    assert.deepEqual(await keys('people', { orderBy: '"age"', startAt: '5', endAt: '"z"', limitToFirst: '3' }), ['ada', 'bob', 'fay']);
    // Tie-breaker key after the value: children with age 36 from key "b" on.
    assert.deepEqual(await keys('people', { orderBy: '"age"', startAt: '36,"b"', endAt: '36' }), ['fay']);
    assert.deepEqual(await keys('people', { orderBy: '"age"', startAfter: '36' }), ['cy', 'dee']);
    assert.deepEqual(await keys('people', { orderBy: '"age"', endBefore: '36' }), ['bob', 'eve']);
    assert.deepEqual(await keys('people', { orderBy: '"name"', equalTo: '"Eve"' }), ['eve']);
  });

  it('orderBy "$key", "$value" and "$priority"', T, async () => {
    assert.deepEqual(await keys('people', { orderBy: '"$key"', startAt: '"b"', endAt: '"d"' }), ['bob', 'cy']);
    assert.deepEqual(await keys('people', { orderBy: '"$key"', limitToLast: '2' }), ['eve', 'fay']);
    assert.deepEqual(await keys('people', { orderBy: '"$key"', startAfter: '"cy"', limitToFirst: '1' }), ['dee']);
    assert.deepEqual(await keys('scores', { orderBy: '"$value"', startAt: '1', endAt: '5' }), ['a', 'b', 'd']);
    assert.deepEqual(await keys('scores', { orderBy: '"$value"', limitToFirst: '1' }), ['e']);
    assert.deepEqual(await keys('scores', { orderBy: '"$value"', equalTo: '"x"' }), ['f']);
    assert.deepEqual(await keys('people', { orderBy: '"$priority"', startAt: '1', endAt: '3' }), ['cy', 'eve']);
    assert.deepEqual(await keys('people', { orderBy: '"$priority"', equalTo: '"p"' }), ['dee']);
    // An order alone does not filter.
    assert.deepEqual(await keys('people', { orderBy: '"$key"' }), Object.keys(PEOPLE).sort());
  });

  it('query results keep priorities only with format=export', T, async () => {
    const plain = await rest(url('people', { orderBy: '"$priority"', equalTo: '1' }));
    assert.deepEqual(plain.json, { cy: { age: 52, name: 'Cy' } });
    const exported = await rest(url('people', { orderBy: '"$priority"', equalTo: '1', format: 'export' }));
    assert.deepEqual(exported.json, { cy: { age: 52, name: 'Cy', '.priority': 1 } });
  });

  it('a limit of 0 and a query on a leaf give null', T, async () => {
    assert.equal((await rest(url('people', { orderBy: '"$key"', limitToFirst: '0' }))).text, 'null');
    assert.equal((await rest(url('people/ada/age', { orderBy: '"$key"', limitToFirst: '1' }))).text, 'null');
  });

  it('bad queries answer 400 with an error message', T, async () => {
    const cases = [
      [{ limitToFirst: '1' }, /orderBy must be defined/],
      [{ startAt: '1' }, /orderBy must be defined/],
      [{ orderBy: 'age' }, /orderBy must be a valid JSON encoded path/],
      [{ orderBy: '5' }, /orderBy/],
      [{ orderBy: '"a.b"' }, /orderBy/],
      [{ orderBy: '"$key"', startAt: '5' }, /string/],
      [{ orderBy: '"$priority"', startAt: 'true' }, /boolean/],
      [{ orderBy: '"age"', startAt: 'abc' }, /JSON primitive/],
      [{ orderBy: '"age"', startAt: '{}' }, /JSON primitive/],
      [{ orderBy: '"age"', limitToFirst: '-1' }, /limitToFirst/],
      [{ orderBy: '"age"', limitToLast: 'x' }, /limitToLast/],
      [{ orderBy: '"age"', limitToFirst: '1', limitToLast: '1' }, /cannot be used together/],
      [{ orderBy: '"age"', equalTo: '1', startAt: '1' }, /cannot be used together/],
    ];
    for (const [params, pattern] of cases) {
      const res = await rest(url('people', params));
      assert.equal(res.status, 400, `${JSON.stringify(params)}: ${res.text}`);
      assert.match(res.json.error, pattern, JSON.stringify(params));
    }
  });

  it('timeout is parsed and applied to reads', T, async () => {
    for (const ok of ['500ms', '3s', '15min']) {
      const res = await rest(url('people', { timeout: ok }));
      assert.equal(res.status, 200, `${ok}: ${res.text}`);
      assert.equal(Object.keys(res.json).length, 6);
    }
    for (const bad of ['16min', '0ms', '1.5s', '10', 'soon']) {
      const res = await rest(url('people', { timeout: bad }));
      assert.equal(res.status, 400, bad);
      assert.match(res.json.error, /timeout/);
    }
  });

  it('writeSizeLimit refuses writes that would change too much', T, async () => {
    const big = 'x'.repeat(1_200_000);
    const tiny = await rest(url('big', { writeSizeLimit: 'tiny' }), { method: 'PUT', body: big });
    assert.equal(tiny.status, 413, tiny.text);
    assert.match(tiny.json.error, /size|limit/i);
    assert.equal((await rest(url('big', { writeSizeLimit: 'small' }), { method: 'PUT', body: big })).status, 200);
    // Deleting 1.2 MB of data costs as much as writing it.
    assert.equal((await rest(url('big', { writeSizeLimit: 'tiny' }), { method: 'DELETE' })).status, 413);
    assert.equal((await rest(url('big', { writeSizeLimit: 'unlimited' }), { method: 'DELETE' })).status, 200);
    assert.equal((await rest(url('big', { writeSizeLimit: 'huge' }), { method: 'PUT', body: 1 })).status, 400);
    for (const level of ['tiny', 'small', 'medium', 'large', 'unlimited']) {
      assert.equal((await rest(url('small', { writeSizeLimit: level }), { method: 'PUT', body: level })).status, 200);
    }
  });
});
