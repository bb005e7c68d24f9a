// Fan-out: one write delivered to many independent connections.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { set, push, update } from 'firebase/database';
import { useHearth, T } from '../lib/harness.mjs';
import { COMPAT_DIR } from '../lib/server.mjs';
import { recordValues, withTimeout, deferred } from '../lib/util.mjs';
import { ChildEventRecorder } from '../lib/events.mjs';

const TOTAL_CLIENTS = 500;
const WORKERS = 4;

describe('fanout', () => {
  const h = useHearth();

  function startWorker(ns, p, count, expected) {
    const child = spawn(
      process.execPath,
      [path.join(COMPAT_DIR, 'fixtures', 'fanout-worker.mjs'), h.server.databaseURL(ns), p, String(count), JSON.stringify(expected)],
      { cwd: COMPAT_DIR, stdio: ['pipe', 'pipe', 'pipe'] },
    );
    const w = { child, ready: deferred(), done: deferred(), errors: [], stderr: '' };
    child.stderr.on('data', (d) => (w.stderr += d));
    readline.createInterface({ input: child.stdout }).on('line', (line) => {
      const [kind, ...rest] = line.split(' ');
      if (kind === 'READY') w.ready.resolve(Number(rest[0]));
      else if (kind === 'DONE') w.done.resolve({ count: Number(rest[0]), bad: Number(rest[1]) });
      else if (kind === 'ERROR') w.errors.push(rest.join(' '));
    });
    w.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    w.exited.then((e) => {
      const msg = `fanout worker exited (${JSON.stringify(e)}) ${w.errors.join('; ')} ${w.stderr.slice(-500)}`;
      w.ready.reject(new Error(msg));
      w.done.reject(new Error(msg));
    });
    // Avoid unhandled rejections if a promise is never awaited.
    w.ready.promise.catch(() => {});
    w.done.promise.catch(() => {});
    h.defer(async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await w.exited;
    });
    return w;
  }

  it(`${TOTAL_CLIENTS} clients receive one write within 15 s`, { timeout: 150_000 }, async () => {
    const ns = h.ns('fan');
    const p = 'broadcast/msg';
    const expected = { text: 'hello everyone', n: TOTAL_CLIENTS };
    const per = TOTAL_CLIENTS / WORKERS;
    const workers = Array.from({ length: WORKERS }, () => startWorker(ns, p, per, expected));
    const readyCounts = await withTimeout(Promise.all(workers.map((w) => w.ready.promise)), 90_000, `${TOTAL_CLIENTS} listeners ready`);
    assert.equal(readyCounts.reduce((s, n) => s + n, 0), TOTAL_CLIENTS);

    const writer = h.client(ns);
    const t0 = Date.now();
    await set(writer.ref(p), expected);
    const results = await withTimeout(Promise.all(workers.map((w) => w.done.promise)), 15_000, `delivery to all ${TOTAL_CLIENTS} clients`);
    const elapsed = Date.now() - t0;
    assert.equal(results.reduce((s, r) => s + r.count, 0), TOTAL_CLIENTS);
    assert.equal(results.reduce((s, r) => s + r.bad, 0), 0, 'every client saw exactly [null, value]');
    for (const w of workers) assert.deepEqual(w.errors, []);
    process.stderr.write(`[compat] fan-out of one write to ${TOTAL_CLIENTS} clients took ${elapsed} ms\n`);
  });

  it('20 listeners see 50 sequential writes in commit order', { timeout: 60_000 }, async () => {
    const ns = h.ns();
    const writer = h.client(ns);
    const observers = h.clients(20, ns);
    const recs = observers.map((o) => recordValues(o.ref('seq')));
    await Promise.all(recs.map((r) => r.first()));
    for (let i = 1; i <= 50; i++) await set(writer.ref('seq'), i);
    await Promise.all(recs.map((r) => r.untilVal(50, 20_000)));
    for (const r of recs) {
      const nums = r.values.slice(1);
      for (let i = 1; i < nums.length; i++) {
        assert.ok(nums[i] > nums[i - 1], `values must only increase: ${JSON.stringify(nums)}`);
      }
      assert.equal(nums[nums.length - 1], 50);
      r.off();
    }
  });

  it('50 listeners each get every child_added of 20 pushes, in order', { timeout: 60_000 }, async () => {
    const ns = h.ns();
    const writer = h.client(ns);
    const observers = h.clients(50, ns);
    const recs = observers.map((o) => new ChildEventRecorder(o.ref('feed'), ['child_added']));
    await Promise.all(recs.map((r) => r.until((x) => x.valueSnaps.length > 0, 20_000, 'initial')));
    const keys = [];
    const writes = [];
    for (let i = 0; i < 20; i++) {
      const r = push(writer.ref('feed'), { i });
      keys.push(r.key);
      writes.push(r);
    }
    await Promise.all(writes);
    await Promise.all(recs.map((r) => r.until((x) => x.events.length >= 20, 20_000, '20 child_added')));
    for (const r of recs) {
      assert.deepEqual(r.events.map((e) => e.key), keys);
      assert.deepEqual(r.events.map((e) => e.val.i), [...Array(20).keys()]);
      r.off();
    }
  });

  it('a multi-path update fans out to listeners on each touched path', T, async () => {
    const ns = h.ns();
    const writer = h.client(ns);
    const paths = ['rooms/r1/title', 'rooms/r2/title', 'users/u/name', 'rooms'];
    const observers = paths.map(() => h.client(ns));
    const recs = observers.map((o, i) => recordValues(o.ref(paths[i])));
    await Promise.all(recs.map((r) => r.first()));
    await update(writer.ref('/'), { 'rooms/r1/title': 'one', 'rooms/r2/title': 'two', 'users/u/name': 'Ada' });
    await recs[0].untilVal('one');
    await recs[1].untilVal('two');
    await recs[2].untilVal('Ada');
    await recs[3].untilVal({ r1: { title: 'one' }, r2: { title: 'two' } });
    for (const r of recs) r.off();
  });
});
