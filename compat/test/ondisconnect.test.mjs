// onDisconnect(): operations queued on the server and run when the connection ends.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { get, set, update, onDisconnect, goOffline, goOnline, serverTimestamp } from 'firebase/database';
import { deleteApp } from 'firebase/app';
import { useHearth, T } from '../lib/harness.mjs';
import { COMPAT_DIR } from '../lib/server.mjs';
import { recordValues, withTimeout, waitFor } from '../lib/util.mjs';

describe('onDisconnect', () => {
  const h = useHearth();

  /** A client whose connection is established (a write was acknowledged). */
  async function connected(ns) {
    const c = h.client(ns);
    await set(c.ref(`warmup/${c.name}`), true);
    return c;
  }

  it('set() runs when the client goes offline and is seen by another client', T, async () => {
    const ns = h.ns();
    const a = await connected(ns);
    const b = h.client(ns);
    await set(a.ref('presence/a'), 'online');
    await onDisconnect(a.ref('presence/a')).set('offline');
    const rec = recordValues(b.ref('presence/a'));
    await rec.untilVal('online');
    goOffline(a.db);
    await rec.untilVal('offline');
    assert.deepEqual(rec.values, ['online', 'offline']);
    rec.off();
  });

  it('update() and remove() run on disconnect', T, async () => {
    const ns = h.ns();
    const a = await connected(ns);
    const b = h.client(ns);
    await set(a.ref('od'), { keep: 1, tmp: { x: 1 }, nested: { a: 1 } });
    await onDisconnect(a.ref('od')).update({ 'nested/b': 2, flag: true, keep: null });
    await onDisconnect(a.ref('od/tmp')).remove();
    const rec = recordValues(b.ref('od'));
    await rec.untilVal({ keep: 1, tmp: { x: 1 }, nested: { a: 1 } });
    goOffline(a.db);
    await rec.untilVal({ nested: { a: 1, b: 2 }, flag: true });
    rec.off();
  });

  it('cancel() removes queued operations at and below the path', T, async () => {
    const ns = h.ns();
    const a = await connected(ns);
    const b = h.client(ns);
    await set(a.ref('cx'), { state: 'online', sub: { v: 1 } });
    await onDisconnect(a.ref('cx/state')).set('offline');
    await onDisconnect(a.ref('cx/sub/v')).set(2);
    await onDisconnect(a.ref('cx')).cancel(); // cancels both
    // Queued after the cancel: must still run, and serves as a completion marker.
    await onDisconnect(a.ref('cx/marker')).set('done');
    const rec = recordValues(b.ref('cx'));
    await rec.untilVal({ state: 'online', sub: { v: 1 } });
    goOffline(a.db);
    const snap = await rec.until((s) => s.child('marker').val() === 'done', 10_000, 'marker');
    assert.deepEqual(snap.val(), { state: 'online', sub: { v: 1 }, marker: 'done' });
    rec.off();
  });

  it('cancel() on one path leaves sibling operations queued', T, async () => {
    const ns = h.ns();
    const a = await connected(ns);
    const b = h.client(ns);
    await set(a.ref('cs'), { a: 'on', b: 'on' });
    await onDisconnect(a.ref('cs/a')).set('off');
    await onDisconnect(a.ref('cs/b')).set('off');
    await onDisconnect(a.ref('cs/b')).cancel();
    const rec = recordValues(b.ref('cs'));
    await rec.untilVal({ a: 'on', b: 'on' });
    goOffline(a.db);
    await rec.untilVal({ a: 'off', b: 'on' });
    rec.off();
  });

  it('serverTimestamp() in onDisconnect resolves at disconnect time', T, async () => {
    const ns = h.ns();
    const a = await connected(ns);
    const b = h.client(ns);
    await onDisconnect(a.ref('seen/a')).set({ lastSeen: serverTimestamp(), state: 'offline' });
    const rec = recordValues(b.ref('seen/a'));
    await rec.first();
    await new Promise((r) => setTimeout(r, 300)); // make "queue time" and "disconnect time" distinguishable
    const t0 = Date.now();
    goOffline(a.db);
    const snap = await rec.until((s) => s.child('state').val() === 'offline', 10_000, 'offline');
    const at = snap.child('lastSeen').val();
    assert.equal(typeof at, 'number');
    assert.ok(at >= t0 - 150 && at <= Date.now() + 1_000, `lastSeen ${at} vs goOffline at ${t0}`);
    rec.off();
  });

  it('deleting the app (closing the socket) runs the queue', T, async () => {
    const ns = h.ns();
    const a = await connected(ns);
    const b = h.client(ns);
    await onDisconnect(a.ref('bye')).set({ gone: true });
    const rec = recordValues(b.ref('bye'));
    await rec.first();
    await deleteApp(a.app);
    await rec.untilVal({ gone: true });
    rec.off();
  });

  it('the queue runs once; reconnecting does not re-run it', T, async () => {
    const ns = h.ns();
    const a = await connected(ns);
    const b = h.client(ns);
    await onDisconnect(a.ref('once')).set('fired');
    const rec = recordValues(b.ref('once'));
    await rec.first();
    goOffline(a.db);
    await rec.untilVal('fired');
    await set(b.ref('once'), 'reset');
    await rec.untilVal('reset');
    goOnline(a.db);
    await set(a.ref('once-marker'), 1); // a is connected again
    goOffline(a.db);
    // A later disconnect of another client acts as a barrier for the check below.
    const c = await connected(ns);
    await onDisconnect(c.ref('once-barrier')).set(true);
    goOffline(c.db);
    await waitFor(async () => (await get(b.ref('once-barrier'))).val() === true, 10_000, 'barrier', 50);
    assert.equal((await get(b.ref('once'))).val(), 'reset');
    rec.off();
  });

  it('a killed (SIGKILL) child process triggers its onDisconnect operations', { timeout: 30_000 }, async () => {
    const ns = h.ns();
    const b = h.client(ns);
    const p = 'presence/child';
    const child = spawn(process.execPath, [path.join(COMPAT_DIR, 'fixtures', 'ondisconnect-client.mjs'), h.server.databaseURL(ns), p], {
      cwd: COMPAT_DIR,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    h.defer(async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    });
    const ready = new Promise((resolve, reject) => {
      readline.createInterface({ input: child.stdout }).on('line', (line) => {
        if (line.startsWith('READY')) resolve(line);
      });
      exited.then((e) => reject(new Error(`child exited before READY: ${JSON.stringify(e)} ${stderr}`)));
    });
    await withTimeout(ready, 15_000, 'child READY');
    const rec = recordValues(b.ref(p));
    const online = await rec.until((s) => s.child('status/state').val() === 'online', 10_000, 'online');
    assert.equal(online.child('session/pid').val(), child.pid);
    const killedAt = Date.now();
    child.kill('SIGKILL');
    assert.equal((await exited).signal, 'SIGKILL');
    // The three queued operations may be applied (and observed) one at a time: wait for the last.
    const snap = await rec.until(
      (s) => s.child('status/state').val() === 'offline' && s.child('counters/disconnects').val() === 1,
      10_000,
      'all onDisconnect operations after SIGKILL',
    );
    const v = snap.val();
    assert.equal(v.session, undefined, 'session removed');
    assert.equal(v.counters.disconnects, 1);
    assert.equal(typeof v.status.at, 'number');
    assert.ok(v.status.at >= killedAt - 1_000, 'timestamp resolved at disconnect time');
    assert.ok(Date.now() - killedAt < 10_000);
    rec.off();
  });

  it('onDisconnect of one client does not fire when another client disconnects', T, async () => {
    const ns = h.ns();
    const a = await connected(ns);
    const c = await connected(ns);
    const b = h.client(ns);
    await onDisconnect(a.ref('iso/a')).set('a-gone');
    await onDisconnect(c.ref('iso/c')).set('c-gone');
    const rec = recordValues(b.ref('iso'));
    await rec.first();
    goOffline(c.db);
    await rec.untilVal({ c: 'c-gone' });
    await update(b.ref('iso'), { check: 1 });
    await rec.untilVal({ c: 'c-gone', check: 1 });
    goOffline(a.db);
    await rec.untilVal({ a: 'a-gone', c: 'c-gone', check: 1 });
    rec.off();
  });
});
