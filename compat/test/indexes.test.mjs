// `.indexOn`: a filtered listen ordered by a child or by value that the rules do not index
// is answered with Firebase's `no_index` warning, which the SDK logs ("Using an unspecified
// index … Consider adding ".indexOn": "score" at /board …"); with the index declared there
// is no warning, and the query results are the same either way (there the server reads its
// windows from an ordered index).
//
// The SDK logs the warning through @firebase/logger (`warn`), not through the callback of
// `enableLogging(fn)` (which only gets its debug lines), so the test captures it with
// `onLog` at level `warn`, which sees it even while the harness keeps the console silent.

import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { onLog } from 'firebase/app';
import {
  enableLogging,
  onValue,
  query,
  set,
  update,
  orderByChild,
  orderByKey,
  orderByValue,
  equalTo,
  limitToFirst,
  limitToLast,
  startAt,
} from 'firebase/database';
import { useHearth, T } from '../lib/harness.mjs';
import { entriesOf, roundTrip } from '../lib/util.mjs';
import { putRules } from '../lib/rules.mjs';

/** Every message the SDK logged at `warn` or above, and its debug lines, while the file runs. */
const warnings = [];
const debugLines = [];

const INDEXED_RULES = {
  rules: {
    '.read': true,
    '.write': true,
    board: { '.indexOn': ['score', 'stats/points'] },
    rooms: { $room: { '.indexOn': '.value' } },
  },
};

/** The queries of the test, by name, as [path, constraints]. */
const QUERIES = {
  top3: ['board', [orderByChild('score'), limitToLast(3)]],
  lowest2: ['board', [orderByChild('score'), limitToFirst(2)]],
  fives: ['board', [orderByChild('score'), equalTo(5)]],
  deep: ['board', [orderByChild('stats/points'), startAt(10), limitToFirst(2)]],
  values: ['rooms/r1', [orderByValue(), limitToLast(2)]],
};

function seedData() {
  const board = {};
  for (let i = 0; i < 20; i++) {
    board[`p${String(i).padStart(2, '0')}`] = { score: i % 7, stats: { points: i * 3 } };
  }
  return { board, rooms: { r1: { a: 3, b: 'x', c: 1, d: true } } };
}

/** Writes made to both databases, one at a time. */
const WRITES = [
  ['board/p03/score', 100],
  ['board/p19/score', 5],
  ['board/p00', null],
  ['board/p07/stats/points', 11],
  ['board/p20', { score: 101, stats: { points: 12 } }],
  ['rooms/r1/e', 'zz'],
  ['board/p03/score', -1],
];

/** Listens to every query of QUERIES with `client`; `latest()` gives their current results. */
function listenAll(client, h) {
  const values = {};
  for (const [name, [path, constraints]] of Object.entries(QUERIES)) {
    const off = onValue(query(client.ref(path), ...constraints), (snap) => {
      values[name] = entriesOf(snap);
    });
    h.defer(off);
  }
  return {
    latest: () => JSON.parse(JSON.stringify(values)),
  };
}

describe('indexes: .indexOn and the no_index warning', () => {
  const h = useHearth();

  before(() => {
    onLog((entry) => warnings.push(entry.message), { level: 'warn' });
    enableLogging((line) => debugLines.push(line));
  });
  after(() => {
    onLog(null);
    enableLogging(false);
  });

  it('warns for unindexed child and value queries only, and not once they are indexed', T, async () => {
    const ns = h.ns('idx');
    const client = h.client(ns);
    await set(client.ref('/'), seedData());
    const listens = listenAll(client, h);
    // Key order and plain listens never need an index.
    const byKey = onValue(query(client.ref('board'), orderByKey(), limitToFirst(2)), () => {});
    h.defer(byKey);
    await roundTrip(client);
    assert.equal(Object.keys(listens.latest()).length, Object.keys(QUERIES).length);

    // The SDK names the index and the location of each unindexed query.
    const logged = warnings.filter((w) => w.includes('Using an unspecified index'));
    const advice = new Set(
      logged.map((w) => w.match(/Consider adding (".indexOn": "[^"]*" at \/[^ ]*)/)?.[1]),
    );
    assert.deepEqual([...advice].sort(), [
      '".indexOn": ".value" at /rooms/r1',
      '".indexOn": "score" at /board',
      '".indexOn": "stats/points" at /board',
    ]);
    assert.ok(
      debugLines.some((line) => line.includes('listen response') && line.includes('"w":["no_index"]')),
      'the listen answer carries the warning on the wire',
    );

    // With the indexes declared (at a literal and at a wildcard location), a new client's
    // listens of the same queries are answered without a warning.
    const before = logged.length;
    await putRules(h.server, ns, INDEXED_RULES);
    const other = h.client(ns);
    const indexed = listenAll(other, h);
    await roundTrip(other);
    assert.deepEqual(indexed.latest(), listens.latest());
    assert.equal(
      warnings.filter((w) => w.includes('Using an unspecified index')).length,
      before,
      `no new warning: ${warnings.slice(before).join('\n')}`,
    );
  });

  it('gives the same results with and without the indexes, write after write', T, async () => {
    const plainNs = h.ns('plain');
    const indexedNs = h.ns('indexed');
    await putRules(h.server, indexedNs, INDEXED_RULES);
    const plain = h.client(plainNs);
    const indexed = h.client(indexedNs);
    await set(plain.ref('/'), seedData());
    await set(indexed.ref('/'), seedData());
    const unindexed = () => warnings.filter((w) => w.includes('Using an unspecified index')).length;
    const start = unindexed();
    const indexedListens = listenAll(indexed, h);
    await roundTrip(indexed);
    assert.equal(unindexed(), start, 'no warning where the rules index');
    const plainListens = listenAll(plain, h);
    await roundTrip(plain);
    assert.equal(unindexed(), start + Object.keys(QUERIES).length, 'one warning per query where they do not');

    const results = [];
    for (const [path, value] of WRITES) {
      // Written by another client, so that the listeners' windows come from the server.
      for (const [ns, listener] of [
        [plainNs, plain],
        [indexedNs, indexed],
      ]) {
        const writer = h.client(ns);
        await update(writer.ref('/'), { [path]: value });
        await roundTrip(writer);
        await roundTrip(listener);
      }
      const got = indexedListens.latest();
      assert.deepEqual(got, plainListens.latest(), `after ${path} = ${JSON.stringify(value)}`);
      results.push(got);
    }
    // The windows did move: after the last write, p20 leads and p03 has left the top three.
    assert.deepEqual(
      results.at(-1).top3.map(([key]) => key),
      ['p06', 'p13', 'p20'],
    );
    assert.deepEqual(
      results[0].top3.map(([key]) => key),
      ['p06', 'p13', 'p03'],
    );
  });
});
