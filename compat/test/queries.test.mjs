// Ordered and filtered queries. Every query is checked twice: as a realtime listen
// (tagged query listen on the wire) from one client and as a one-shot get() from
// another, fresh client (so the server, not a client cache, answers).

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  get,
  set,
  update,
  remove,
  setPriority,
  query,
  orderByChild,
  orderByKey,
  orderByValue,
  orderByPriority,
  startAt,
  startAfter,
  endAt,
  endBefore,
  equalTo,
  limitToFirst,
  limitToLast,
} from 'firebase/database';
import { useHearth, T } from '../lib/harness.mjs';
import { keysOf, entriesOf, firstValue, roundTrip } from '../lib/util.mjs';
import { ChildEventRecorder } from '../lib/events.mjs';

describe('queries', () => {
  const h = useHearth();

  /** Assert listen (client `lis`) and get (client `getter`) both yield `expected` keys in order. */
  async function expectKeys(lis, getter, path, constraints, expected, label) {
    const viaListen = keysOf(await firstValue(query(lis.ref(path), ...constraints)));
    assert.deepEqual(viaListen, expected, `${label} (listen)`);
    const viaGet = keysOf(await get(query(getter.ref(path), ...constraints)));
    assert.deepEqual(viaGet, expected, `${label} (get)`);
  }

  async function setup(data) {
    const ns = h.ns();
    const writer = h.client(ns);
    await set(writer.ref('q'), data);
    return { ns, writer, lis: h.client(ns), getter: h.client(ns) };
  }

  const SCORES = {
    a: { score: 10 },
    b: { score: 10 },
    c: { score: 10 },
    d: { score: 20 },
    e: { score: 30 },
    f: { other: 1 }, // no score => null, sorts first
  };

  it('orderByChild sorts by child value with key tie-breaker and mixed types', T, async () => {
    const { lis, getter } = await setup({
      s1: { v: 'b' },
      s0: { v: 'a' },
      n2: { v: 2 },
      n1: { v: -1.5 },
      t: { v: true },
      f: { v: false },
      o: { v: { x: 1 } },
      m: { w: 1 },
      n3: { v: 2 },
    });
    const expected = ['m', 'f', 't', 'n1', 'n2', 'n3', 's0', 's1', 'o'];
    await expectKeys(lis, getter, 'q', [orderByChild('v')], expected, 'orderByChild(v)');
    await expectKeys(lis, getter, 'q', [orderByChild('v'), limitToFirst(4)], expected.slice(0, 4), 'limitToFirst(4)');
    await expectKeys(lis, getter, 'q', [orderByChild('v'), limitToLast(3)], expected.slice(-3), 'limitToLast(3)');
    await expectKeys(lis, getter, 'q', [orderByChild('v'), startAt(2), endAt('a')], ['n2', 'n3', 's0'], 'startAt(2).endAt(a)');
    await expectKeys(lis, getter, 'q', [orderByChild('v'), startAt(false), endAt(true)], ['f', 't'], 'booleans');
  });

  it('orderByChild on a nested path a/b', T, async () => {
    const { lis, getter } = await setup({
      x: { a: { b: 3 } },
      y: { a: { b: 1 } },
      z: { a: { b: 2 } },
      w: { c: 1 },
      v: { a: 'not-an-object' },
    });
    const all = ['v', 'w', 'y', 'z', 'x'];
    await expectKeys(lis, getter, 'q', [orderByChild('a/b')], all, 'orderByChild(a/b)');
    await expectKeys(lis, getter, 'q', [orderByChild('a/b'), limitToFirst(3)], ['v', 'w', 'y'], 'limitToFirst(3)');
    await expectKeys(lis, getter, 'q', [orderByChild('a/b'), startAt(2)], ['z', 'x'], 'startAt(2)');
    await expectKeys(lis, getter, 'q', [orderByChild('a/b'), limitToLast(1)], ['x'], 'limitToLast(1)');
  });

  it('startAt/endAt/equalTo with key tie-breakers', T, async () => {
    const { lis, getter } = await setup(SCORES);
    const oc = orderByChild('score');
    await expectKeys(lis, getter, 'q', [oc, startAt(10, 'b')], ['b', 'c', 'd', 'e'], 'startAt(10,b)');
    await expectKeys(lis, getter, 'q', [oc, endAt(10, 'b')], ['f', 'a', 'b'], 'endAt(10,b)');
    await expectKeys(lis, getter, 'q', [oc, startAt(10, 'b'), endAt(20)], ['b', 'c', 'd'], 'startAt(10,b).endAt(20)');
    await expectKeys(lis, getter, 'q', [oc, equalTo(10)], ['a', 'b', 'c'], 'equalTo(10)');
    await expectKeys(lis, getter, 'q', [oc, equalTo(10, 'b')], ['b'], 'equalTo(10,b)');
    await expectKeys(lis, getter, 'q', [oc, equalTo(15)], [], 'equalTo(15) empty');
    await expectKeys(lis, getter, 'q', [oc, startAt(15), endAt(30)], ['d', 'e'], 'startAt(15).endAt(30)');
    await expectKeys(lis, getter, 'q', [oc, startAt(10), limitToFirst(2)], ['a', 'b'], 'startAt(10).limitToFirst(2)');
    await expectKeys(lis, getter, 'q', [oc, endAt(20), limitToLast(2)], ['c', 'd'], 'endAt(20).limitToLast(2)');
  });

  it('startAfter/endBefore (exclusive bounds) with and without keys', T, async () => {
    const { lis, getter } = await setup(SCORES);
    const oc = orderByChild('score');
    await expectKeys(lis, getter, 'q', [oc, startAfter(10)], ['d', 'e'], 'startAfter(10)');
    await expectKeys(lis, getter, 'q', [oc, startAfter(10, 'a')], ['b', 'c', 'd', 'e'], 'startAfter(10,a)');
    await expectKeys(lis, getter, 'q', [oc, endBefore(20)], ['f', 'a', 'b', 'c'], 'endBefore(20)');
    await expectKeys(lis, getter, 'q', [oc, endBefore(10, 'c')], ['f', 'a', 'b'], 'endBefore(10,c)');
    await expectKeys(lis, getter, 'q', [oc, startAfter(10), endBefore(30)], ['d'], 'startAfter(10).endBefore(30)');
    await expectKeys(lis, getter, 'q', [orderByKey(), startAfter('b'), limitToFirst(2)], ['c', 'd'], 'key startAfter(b)');
    await expectKeys(lis, getter, 'q', [orderByKey(), endBefore('c')], ['a', 'b'], 'key endBefore(c)');
  });

  it('equalTo(null) selects children without the indexed child', T, async () => {
    const { lis, getter } = await setup({ ...SCORES, g: { other: 2 } });
    await expectKeys(lis, getter, 'q', [orderByChild('score'), equalTo(null)], ['f', 'g'], 'equalTo(null)');
    await expectKeys(lis, getter, 'q', [orderByChild('other'), equalTo(null)], ['a', 'b', 'c', 'd', 'e'], 'other equalTo(null)');
    await expectKeys(lis, getter, 'q', [orderByChild('score'), endAt(null)], ['f', 'g'], 'endAt(null)');
  });

  it('orderByKey with ranges and limits', T, async () => {
    const { lis, getter } = await setup({ d: 4, a: 1, c: 3, b: 2, e: 5, 10: 'ten', 9: 'nine' });
    const all = ['9', '10', 'a', 'b', 'c', 'd', 'e'];
    await expectKeys(lis, getter, 'q', [orderByKey()], all, 'orderByKey');
    await expectKeys(lis, getter, 'q', [orderByKey(), startAt('b'), endAt('d')], ['b', 'c', 'd'], 'b..d');
    await expectKeys(lis, getter, 'q', [orderByKey(), limitToFirst(3)], ['9', '10', 'a'], 'limitToFirst(3)');
    await expectKeys(lis, getter, 'q', [orderByKey(), limitToLast(2)], ['d', 'e'], 'limitToLast(2)');
    await expectKeys(lis, getter, 'q', [orderByKey(), equalTo('c')], ['c'], 'equalTo(c)');
    await expectKeys(lis, getter, 'q', [orderByKey(), startAt('10'), limitToFirst(2)], ['10', 'a'], 'startAt(10)');
  });

  it('orderByValue across types, ranges and limits', T, async () => {
    const { lis, getter } = await setup({ a: 3, b: 1, c: 'x', d: true, e: 2, f: false, g: { x: 1 }, h: 'a', i: 2 });
    const all = ['f', 'd', 'b', 'e', 'i', 'a', 'h', 'c', 'g'];
    await expectKeys(lis, getter, 'q', [orderByValue()], all, 'orderByValue');
    await expectKeys(lis, getter, 'q', [orderByValue(), limitToLast(3)], ['h', 'c', 'g'], 'limitToLast(3)');
    await expectKeys(lis, getter, 'q', [orderByValue(), startAt(2), endAt('a')], ['e', 'i', 'a', 'h'], '2..a');
    await expectKeys(lis, getter, 'q', [orderByValue(), equalTo(true)], ['d'], 'equalTo(true)');
    await expectKeys(lis, getter, 'q', [orderByValue(), equalTo(2, 'i')], ['i'], 'equalTo(2,i)');
    await expectKeys(lis, getter, 'q', [orderByValue(), startAfter(2, 'e'), limitToFirst(2)], ['i', 'a'], 'startAfter(2,e)');
  });

  it('orderByValue compares strings by UTF-16 code units', T, async () => {
    const { lis, getter } = await setup({ k1: '｡', k2: '😀', k3: 'z', k4: '\u00e9' });
    await expectKeys(lis, getter, 'q', [orderByValue()], ['k3', 'k4', 'k2', 'k1'], 'orderByValue');
    await expectKeys(lis, getter, 'q', [orderByValue(), limitToFirst(3)], ['k3', 'k4', 'k2'], 'limitToFirst(3)');
    await expectKeys(lis, getter, 'q', [orderByValue(), startAt('😀')], ['k2', 'k1'], 'startAt(emoji)');
  });

  it('orderByPriority with numeric, string and missing priorities', T, async () => {
    const { lis, getter, writer } = await setup({
      n2: 'no priority 2',
      n1: 'no priority 1',
      p1: { '.value': 'five', '.priority': 5 },
      p2: { '.value': 'neg', '.priority': -1.5 },
      p3: { x: 1, '.priority': 100 },
      s1: { '.value': 'b', '.priority': 'b' },
      s2: { '.value': 'A', '.priority': 'A' },
      s3: { '.value': '10', '.priority': '10' },
    });
    await setPriority(writer.ref('q/n1'), null); // explicit "no priority" stays none
    const all = ['n1', 'n2', 'p2', 'p1', 'p3', 's3', 's2', 's1'];
    await expectKeys(lis, getter, 'q', [orderByPriority()], all, 'orderByPriority');
    await expectKeys(lis, getter, 'q', [orderByPriority(), limitToFirst(4)], all.slice(0, 4), 'limitToFirst(4)');
    await expectKeys(lis, getter, 'q', [limitToLast(2)], ['s2', 's1'], 'limit only => priority order');
    await expectKeys(lis, getter, 'q', [orderByPriority(), startAt(5)], ['p1', 'p3', 's3', 's2', 's1'], 'startAt(5)');
    await expectKeys(lis, getter, 'q', [orderByPriority(), startAt('A')], ['s2', 's1'], "startAt('A')");
    await expectKeys(lis, getter, 'q', [orderByPriority(), endAt(5)], ['n1', 'n2', 'p2', 'p1'], 'endAt(5)');
    await expectKeys(lis, getter, 'q', [orderByPriority(), startAt(null), endAt(null)], ['n1', 'n2'], 'null..null');
    await expectKeys(lis, getter, 'q', [orderByPriority(), startAt(5, 'p1'), endAt(100, 'p3')], ['p1', 'p3'], '5,p1..100,p3');
    // Changing a priority reorders; verify the server's view through a limit.
    await setPriority(writer.ref('q/n2'), 1000);
    const c = h.client(writer.ns);
    assert.deepEqual(keysOf(await get(query(c.ref('q'), orderByPriority(), startAt(101), limitToFirst(1)))), ['n2']);
  });

  it('limitToLast(3) window on orderByChild follows score changes exactly', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    await set(a.ref('board'), {
      a: { score: 10 },
      b: { score: 20 },
      c: { score: 30 },
      d: { score: 40 },
      e: { score: 50 },
    });
    const rec = new ChildEventRecorder(query(b.ref('board'), orderByChild('score'), limitToLast(3)));
    await rec.untilWindow(['c', 'd', 'e']);
    assert.deepEqual(rec.summary(), ['child_added:c', 'child_added:d', 'child_added:e']);

    const step = async (write, window, events, label) => {
      rec.clear();
      await write();
      await rec.untilWindow(window);
      await roundTrip(b);
      assert.deepEqual(rec.window(), window, `${label}: window`);
      assert.deepEqual([...rec.summary()].sort(), [...events].sort(), `${label}: events`);
    };

    // a enters the window from below, c leaves.
    await step(() => set(a.ref('board/a/score'), 45), ['d', 'a', 'e'], ['child_removed:c', 'child_added:a'], 'a enters');
    assert.equal(rec.events.find((e) => e.type === 'child_added').prev, 'd', 'prev key of entering child');
    // e drops out of the window, c comes back.
    await step(() => set(a.ref('board/e/score'), 5), ['c', 'd', 'a'], ['child_removed:e', 'child_added:c'], 'e leaves');
    // Deleting a child inside the full window refills it from outside.
    await step(() => remove(a.ref('board/d')), ['b', 'c', 'a'], ['child_removed:d', 'child_added:b'], 'delete refills');
    // Moving inside the window: child_moved + child_changed only.
    await step(() => set(a.ref('board/c/score'), 100), ['b', 'a', 'c'], ['child_moved:c', 'child_changed:c'], 'move inside');
    // A new child enters at the top and pushes b out.
    await step(() => set(a.ref('board/f'), { score: 60 }), ['a', 'f', 'c'], ['child_removed:b', 'child_added:f'], 'new child');
    // A change outside the window produces no events; a change inside does.
    rec.clear();
    await set(a.ref('board/b/score'), 1);
    await set(a.ref('board/a/label'), 'x'); // not the indexed child: no child_moved
    await rec.until((r) => r.lastValue.child('a/label').val() === 'x', 10_000, 'a/label');
    await roundTrip(b);
    assert.deepEqual(rec.window(), ['a', 'f', 'c']);
    assert.deepEqual(rec.summary(), ['child_changed:a'], 'outside change is invisible');
    // Multi-path update that swaps two children across the window edge at once.
    await step(
      () => update(a.ref('board'), { 'e/score': 200, 'a/score': 0 }),
      ['f', 'c', 'e'],
      ['child_removed:a', 'child_added:e'],
      'swap via update',
    );
    rec.off();
  });

  it('limitToFirst(2) window refills after deletions and shrinks when data runs out', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    await set(a.ref('lf'), { k1: 1, k2: 2, k3: 3, k4: 4 });
    const rec = new ChildEventRecorder(query(b.ref('lf'), orderByValue(), limitToFirst(2)));
    await rec.untilWindow(['k1', 'k2']);
    rec.clear();
    await remove(a.ref('lf/k1'));
    await rec.untilWindow(['k2', 'k3']);
    await remove(a.ref('lf/k2'));
    await rec.untilWindow(['k3', 'k4']);
    await remove(a.ref('lf/k3'));
    await rec.untilWindow(['k4']);
    await set(a.ref('lf/k0'), 0);
    await rec.untilWindow(['k0', 'k4']);
    await set(a.ref('lf/k5'), -5);
    await rec.untilWindow(['k5', 'k0']);
    await roundTrip(b);
    assert.deepEqual(rec.summary(), [
      'child_removed:k1',
      'child_added:k3',
      'child_removed:k2',
      'child_added:k4',
      'child_removed:k3',
      'child_added:k0',
      'child_removed:k4',
      'child_added:k5',
    ]);
    rec.off();
  });

  it('ranged query window: children moving in and out of startAt/endAt', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    await set(a.ref('rg'), { a: { n: 1 }, b: { n: 5 }, c: { n: 9 } });
    const rec = new ChildEventRecorder(query(b.ref('rg'), orderByChild('n'), startAt(3), endAt(7)));
    await rec.untilWindow(['b']);
    rec.clear();
    await set(a.ref('rg/a/n'), 4);
    await rec.untilWindow(['a', 'b']);
    await set(a.ref('rg/b/n'), 8);
    await rec.untilWindow(['a']);
    await set(a.ref('rg/c/n'), 3);
    await rec.untilWindow(['c', 'a']);
    await roundTrip(b);
    assert.deepEqual(rec.summary(), ['child_added:a', 'child_removed:b', 'child_added:c']);
    rec.off();
  });

  it('two different queries on the same path of one client stay independent', T, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    await set(a.ref('two'), { a: 1, b: 2, c: 3, d: 4 });
    const first = new ChildEventRecorder(query(b.ref('two'), orderByValue(), limitToFirst(2)));
    const last = new ChildEventRecorder(query(b.ref('two'), orderByValue(), limitToLast(2)));
    await first.untilWindow(['a', 'b']);
    await last.untilWindow(['c', 'd']);
    await set(a.ref('two/b'), 10);
    await first.untilWindow(['a', 'c']);
    await last.untilWindow(['d', 'b']);
    first.off();
    last.off();
  });

  it('get() of a query from a fresh client and get() of an unlistened path', T, async () => {
    const ns = h.ns();
    const a = h.client(ns);
    await set(a.ref('g'), { a: { n: 3 }, b: { n: 1 }, c: { n: 2 } });
    const fresh1 = h.client(ns);
    const snap = await get(query(fresh1.ref('g'), orderByChild('n'), limitToFirst(2)));
    assert.deepEqual(entriesOf(snap), [
      ['b', { n: 1 }],
      ['c', { n: 2 }],
    ]);
    const fresh2 = h.client(ns);
    assert.deepEqual((await get(fresh2.ref('g/a'))).val(), { n: 3 });
    assert.equal((await get(fresh2.ref('g/zzz'))).val(), null);
    const empty = await get(query(fresh2.ref('nothing'), orderByKey(), limitToFirst(1)));
    assert.equal(empty.exists(), false);
    // A query on a leaf has no children.
    await set(a.ref('leaf'), 'x');
    const leafQ = await get(query(h.client(ns).ref('leaf'), orderByKey(), limitToFirst(1)));
    assert.equal(leafQ.exists(), false);
  });
});
