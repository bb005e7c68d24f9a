// Basic data operations written by one client and observed by another.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  get,
  set,
  update,
  remove,
  push,
  setWithPriority,
  setPriority,
  serverTimestamp,
  increment,
  query,
  orderByKey,
  limitToFirst,
  limitToLast,
  startAt,
} from 'firebase/database';
import { useHearth, T } from '../lib/harness.mjs';
import { keysOf, entriesOf, recordValues, firstValue } from '../lib/util.mjs';

describe('values', () => {
  const h = useHearth();

  it('set/get of primitives is seen by a second client', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    const cases = {
      str: 'hello',
      empty: '',
      t: true,
      f: false,
      zero: 0,
      int: 42,
      float: 3.25,
      neg: -17,
      quote: 'with "quotes" and \\ backslash\nnewline',
    };
    for (const [k, v] of Object.entries(cases)) await set(a.ref(`prim/${k}`), v);
    for (const [k, v] of Object.entries(cases)) {
      const snap = await get(b.ref(`prim/${k}`));
      assert.equal(snap.exists(), true, `prim/${k} exists`);
      assert.equal(snap.val(), v, `prim/${k}`);
    }
    const all = await get(b.ref('prim'));
    assert.deepEqual(all.val(), cases);
  });

  it('nested objects round-trip and child paths are readable', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    const value = { user: { name: 'Ada', langs: { rust: true, js: 'yes' }, age: 36 }, meta: { v: 1 } };
    await set(a.ref('doc'), value);
    assert.deepEqual((await get(b.ref('doc'))).val(), value);
    assert.deepEqual((await get(b.ref('doc/user/langs'))).val(), { rust: true, js: 'yes' });
    assert.equal((await get(b.ref('doc/user/name'))).val(), 'Ada');
    assert.equal((await get(b.ref('doc/user/missing'))).val(), null);
    assert.equal((await get(b.ref('doc/user/name/deeper'))).val(), null, 'child of a leaf is null');
    // Overwriting a parent replaces the whole subtree.
    await set(a.ref('doc/user'), { name: 'Grace' });
    assert.deepEqual((await get(b.ref('doc'))).val(), { user: { name: 'Grace' }, meta: { v: 1 } });
  });

  it('multi-path update() with nested paths is applied atomically', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    await set(a.ref('u'), { a: { b: 1, c: 2 }, d: 3, e: { f: 1 } });
    const rec = recordValues(b.ref('u'));
    await rec.untilVal({ a: { b: 1, c: 2 }, d: 3, e: { f: 1 } });
    const before = rec.snaps.length;
    await update(a.ref('u'), { 'a/b': 10, e: null, 'g/h': 'x', d: { nested: true } });
    const expected = { a: { b: 10, c: 2 }, d: { nested: true }, g: { h: 'x' } };
    await rec.untilVal(expected);
    // Exactly one new value event: the multi-path update must not be observed half-applied.
    assert.equal(rec.snaps.length - before, 1, `value events after update: ${JSON.stringify(rec.values.slice(before))}`);
    assert.deepEqual((await get(h.client(ns).ref('u'))).val(), expected);
    rec.off();
  });

  it('update() at the root with deep paths and at an empty location', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    await update(a.ref('/'), { 'r1/x/y': 1, 'r2/z': 'two' });
    assert.deepEqual((await get(b.ref('r1'))).val(), { x: { y: 1 } });
    assert.deepEqual((await get(b.ref('r2'))).val(), { z: 'two' });
    await update(a.ref('fresh/place'), { k: 1 });
    assert.deepEqual((await get(b.ref('fresh'))).val(), { place: { k: 1 } });
  });

  it('remove() deletes a subtree and empty parents vanish', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    await set(a.ref('r'), { keep: 1, gone: { deep: { x: 1 } } });
    await remove(a.ref('r/gone/deep'));
    const snap = await get(b.ref('r'));
    assert.deepEqual(snap.val(), { keep: 1 });
    assert.equal(snap.hasChild('gone'), false, 'empty parent must vanish');
    await remove(a.ref('r/keep'));
    const after = await get(b.ref('r'));
    assert.equal(after.exists(), false);
    assert.equal(after.val(), null);
  });

  it('push() ids are 20 chars, sort chronologically and keep insertion order', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    const list = a.ref('list');
    // Fire 10 pushes synchronously (same millisecond => increment path of the id generator),
    // then 5 more one at a time.
    const keys = [];
    const pending = [];
    for (let i = 0; i < 10; i++) {
      const r = push(list, { i });
      keys.push(r.key);
      pending.push(r);
    }
    await Promise.all(pending);
    for (let i = 10; i < 15; i++) {
      const r = push(list);
      await set(r, { i });
      keys.push(r.key);
    }
    for (const k of keys) assert.match(k, /^[-0-9A-Za-z_]{20}$/);
    const sorted = [...keys].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
    assert.deepEqual(keys, sorted, 'push ids are increasing');
    assert.equal(new Set(keys).size, keys.length);
    const snap = await get(b.ref('list'));
    assert.deepEqual(keysOf(snap), keys);
    assert.deepEqual(entriesOf(snap).map(([, v]) => v.i), [...Array(15).keys()]);
    // The server decides limit windows: the last 3 pushes by key.
    const last3 = await get(query(b.ref('list'), limitToLast(3)));
    assert.deepEqual(keysOf(last3), keys.slice(-3));
  });

  it('push ids from two clients interleave chronologically', T, async () => {
    const ns = h.ns();
    const [a, b, c] = h.clients(3, ns);
    const keys = [];
    for (let i = 0; i < 6; i++) {
      const writer = i % 2 ? b : a;
      const r = push(writer.ref('chat'), { i });
      await r;
      keys.push(r.key);
      // Push ids start with the client's estimate of the server's clock, taken from its own
      // handshake: two clients' estimates can differ by a few milliseconds on a busy machine,
      // so the pushes are spaced well beyond that.
      await new Promise((res) => setTimeout(res, 30));
    }
    const snap = await get(c.ref('chat'));
    assert.deepEqual(entriesOf(snap).map(([, v]) => v.i), [0, 1, 2, 3, 4, 5]);
    assert.deepEqual(keysOf(snap), keys);
  });

  it('setWithPriority / setPriority are visible to another client', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    await setWithPriority(a.ref('p/leaf'), 'v', 5);
    await setWithPriority(a.ref('p/obj'), { x: 1 }, 'prio');
    await set(a.ref('p/plain'), 7);
    await setPriority(a.ref('p/plain'), 2.5);
    const leaf = await get(b.ref('p/leaf'));
    assert.equal(leaf.val(), 'v');
    assert.equal(leaf.priority, 5);
    assert.deepEqual(leaf.exportVal(), { '.value': 'v', '.priority': 5 });
    const obj = await get(b.ref('p/obj'));
    assert.equal(obj.priority, 'prio');
    assert.deepEqual(obj.exportVal(), { x: 1, '.priority': 'prio' });
    const plain = await get(b.ref('p/plain'));
    assert.equal(plain.val(), 7);
    assert.equal(plain.priority, 2.5);
    // Priority survives in the parent's export form.
    const parent = await get(b.ref('p'));
    assert.deepEqual(parent.exportVal(), {
      leaf: { '.value': 'v', '.priority': 5 },
      obj: { x: 1, '.priority': 'prio' },
      plain: { '.value': 7, '.priority': 2.5 },
    });
    // set() without priority clears it.
    await set(a.ref('p/leaf'), 'w');
    const cleared = await get(h.client(ns).ref('p/leaf'));
    assert.equal(cleared.val(), 'w');
    assert.equal(cleared.priority, null);
  });

  it('setPriority on an empty node is a no-op', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    await setPriority(a.ref('nothing/here'), 3);
    const snap = await get(b.ref('nothing'));
    assert.equal(snap.exists(), false);
  });

  it('arrays are stored with index keys and val() returns an array', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    await set(a.ref('arr'), ['a', 'b', 'c']);
    const snap = await get(b.ref('arr'));
    assert.ok(Array.isArray(snap.val()), 'val() is an array');
    assert.deepEqual(snap.val(), ['a', 'b', 'c']);
    assert.deepEqual(keysOf(snap), ['0', '1', '2']);
    assert.equal(snap.child('1').val(), 'b');
    // Index keys are ordinary children.
    await set(a.ref('arr/1'), 'x');
    assert.deepEqual((await get(b.ref('arr'))).val(), ['a', 'x', 'c']);
    // Twelve elements: integer keys sort numerically (10 after 9, not after 1).
    const twelve = Array.from({ length: 12 }, (_, i) => i * 10);
    await set(a.ref('arr12'), twelve);
    const s12 = await get(b.ref('arr12'));
    assert.deepEqual(s12.val(), twelve);
    assert.deepEqual(keysOf(s12), twelve.map((_, i) => String(i)));
    // Sparse index keys stay an object.
    await set(a.ref('sparse'), { 0: 'a', 5: 'b' });
    const sparse = (await get(b.ref('sparse'))).val();
    assert.equal(Array.isArray(sparse), false);
    assert.deepEqual(sparse, { 0: 'a', 5: 'b' });
    // Array of objects.
    await set(a.ref('objs'), [{ n: 1 }, { n: 2 }]);
    assert.deepEqual((await get(b.ref('objs'))).val(), [{ n: 1 }, { n: 2 }]);
  });

  it('null handling: null children vanish, empty objects are null', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    await set(a.ref('n'), { a: null, b: 1, c: { d: null }, e: {} });
    assert.deepEqual((await get(b.ref('n'))).val(), { b: 1 });
    await set(a.ref('n2'), { only: null });
    assert.equal((await get(b.ref('n2'))).exists(), false);
    await set(a.ref('n3'), {});
    assert.equal((await get(b.ref('n3'))).val(), null);
    await set(a.ref('n4'), 'x');
    await set(a.ref('n4'), null);
    assert.equal((await get(b.ref('n4'))).val(), null);
    await set(a.ref('n5'), { x: 1, y: 2 });
    await update(a.ref('n5'), { x: null });
    assert.deepEqual((await get(b.ref('n5'))).val(), { y: 2 });
    await update(a.ref('n5'), { y: null });
    assert.equal((await get(b.ref('n5'))).exists(), false);
  });

  it('numbers: integers, floats, large and negative values keep their exact value', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    const nums = {
      zero: 0,
      one: 1,
      neg: -1,
      int32max: 2147483647,
      int32min: -2147483648,
      big: 4294967296,
      maxSafe: 9007199254740991,
      minSafe: -9007199254740991,
      twoTo60: 1152921504606846976,
      tenth: 0.1,
      third: 1 / 3,
      negFloat: -2.5,
      tiny: 5e-324,
      small: 1.5e-7,
      huge: 1e21,
      maxDouble: 1.7976931348623157e308,
      pi: Math.PI,
    };
    await set(a.ref('nums'), nums);
    const got = (await get(b.ref('nums'))).val();
    for (const [k, v] of Object.entries(nums)) {
      assert.equal(typeof got[k], 'number', `${k} is a number`);
      assert.ok(Object.is(got[k], v), `${k}: expected ${v}, got ${got[k]}`);
    }
    assert.ok(Number.isInteger(got.big) && Number.isInteger(got.maxSafe));
    assert.equal(Number.isInteger(got.negFloat), false);
    // Integral floats are just numbers: 2.0 === 2.
    await set(a.ref('two'), 2.0);
    assert.equal((await get(b.ref('two'))).val(), 2);
  });

  it('unicode keys and values round-trip', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    const value = {
      héllo: 'wörld',
      日本語: 'テスト',
      ключ: 'значение',
      '😀': 'grin 😀',
      'with space': 'a b',
      'emoji in value': '👩‍👩‍👧‍👦 family',
      'ä\u0308': 'combining',
    };
    await set(a.ref('uni'), value);
    assert.deepEqual((await get(b.ref('uni'))).val(), value);
    assert.equal((await get(b.ref('uni/日本語'))).val(), 'テスト');
    assert.equal((await get(b.ref('uni/😀'))).val(), 'grin 😀');
    assert.equal((await get(b.ref('uni/with space'))).val(), 'a b');
  });

  it('integer-like keys sort numerically before other keys (forEach and server limits)', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    const keys = ['a', '10', 'B', '007', '2', '-1', '1', '0', '2147483648', '-2147483648', '11'];
    const data = Object.fromEntries(keys.map((k, i) => [k, i]));
    await set(a.ref('ord'), data);
    const expected = ['-2147483648', '-1', '0', '1', '2', '007', '10', '11', '2147483648', 'B', 'a'];
    assert.deepEqual(keysOf(await get(b.ref('ord'))), expected);
    // A listen sees the same order.
    const rec = recordValues(b.ref('ord'));
    assert.deepEqual(keysOf(await rec.first()), expected);
    rec.off();
    // Limit windows are computed by the server, so these check the server's key order.
    const c = h.client(ns);
    assert.deepEqual(keysOf(await get(query(c.ref('ord'), orderByKey(), limitToFirst(6)))), expected.slice(0, 6));
    assert.deepEqual(keysOf(await get(query(c.ref('ord'), orderByKey(), limitToLast(4)))), expected.slice(-4));
    assert.deepEqual(keysOf(await get(query(c.ref('ord'), limitToFirst(3)))), expected.slice(0, 3), 'default (priority) order ties by key');
    assert.deepEqual(
      keysOf(await get(query(c.ref('ord'), orderByKey(), startAt('2'), limitToFirst(3)))),
      ['2', '007', '10'],
    );
  });

  it('keys compare by UTF-16 code units (emoji before U+FF61)', T, async () => {
    const ns = h.ns();
    const [a, b, c] = h.clients(3, ns);
    // UTF-16: 'z' (007A) < '😀' (D83D DE00) < '｡' (FF61); code-point order would put '｡' first.
    await set(a.ref('u16'), { '｡': 1, '😀': 2, z: 3, '\u00e9': 4 });
    const expected = ['z', '\u00e9', '😀', '｡'];
    assert.deepEqual(keysOf(await get(b.ref('u16'))), expected);
    assert.deepEqual(keysOf(await get(query(c.ref('u16'), orderByKey(), limitToFirst(3)))), expected.slice(0, 3));
    assert.deepEqual(keysOf(await get(query(c.ref('u16'), orderByKey(), limitToLast(1)))), ['｡']);
    assert.deepEqual(keysOf(await get(query(c.ref('u16'), orderByKey(), startAt('😀')))), ['😀', '｡']);
  });

  it('serverTimestamp() resolves to the server clock (close to Date.now())', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    const before = Date.now();
    await set(a.ref('ts'), { at: serverTimestamp(), label: 'x' });
    await update(a.ref('ts'), { updated: serverTimestamp() });
    const after = Date.now();
    const v = (await get(b.ref('ts'))).val();
    for (const k of ['at', 'updated']) {
      assert.equal(typeof v[k], 'number', `${k} is a number`);
      assert.ok(Number.isInteger(v[k]), `${k} is integral ms`);
      assert.ok(v[k] >= before - 5_000 && v[k] <= after + 5_000, `${k}=${v[k]} near [${before}, ${after}]`);
    }
    assert.ok(v.updated >= v.at, 'timestamps are monotonic');
    assert.equal(v.label, 'x');
  });

  it('increment() adds on the server, including on missing and non-numeric nodes', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    await set(a.ref('inc/missing'), increment(5));
    await set(a.ref('inc/num'), 10);
    await set(a.ref('inc/num'), increment(2.5));
    await set(a.ref('inc/str'), 'text');
    await set(a.ref('inc/str'), increment(3));
    await set(a.ref('inc/neg'), 1);
    await update(a.ref('inc'), { neg: increment(-4) });
    assert.deepEqual((await get(b.ref('inc'))).val(), { missing: 5, num: 12.5, str: 3, neg: -3 });
  });

  it('increment() under contention: 2 clients x 25 increments => 50', T, async () => {
    const ns = h.ns();
    const [a, b, c] = h.clients(3, ns);
    await set(a.ref('counter'), 0);
    const writes = [];
    for (let i = 0; i < 25; i++) {
      writes.push(set(a.ref('counter'), increment(1)));
      writes.push(set(b.ref('counter'), increment(1)));
    }
    await Promise.all(writes);
    const rec = recordValues(c.ref('counter'));
    await rec.untilVal(50);
    rec.off();
    assert.equal((await get(h.client(ns).ref('counter'))).val(), 50);
  });

  it('.info/connected becomes true and .info/serverTimeOffset is small', T, async () => {
    const ns = h.ns();
    const a = h.client(ns);
    const conn = recordValues(a.ref('.info/connected'));
    await conn.untilVal(true);
    conn.off();
    // serverTimeOffset is set from the handshake ts; same machine => small.
    const offset = (await firstValue(a.ref('.info/serverTimeOffset'))).val();
    assert.equal(typeof offset, 'number');
    assert.ok(Math.abs(offset) < 5_000, `serverTimeOffset ${offset} ms`);
  });
});
