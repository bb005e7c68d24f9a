// Small, dependency-free helpers for deterministic waiting in tests.
//
// Rule of thumb used throughout the suite: wait for an *event* (a promise that is
// resolved by a listener) with a timeout, never for a fixed amount of time. To show that
// something does NOT happen, wait for a later event that must come after it instead
// (`roundTrip`): a pause proves nothing on a slow machine.

import { onValue, set } from 'firebase/database';

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Resolves once the server has answered a write of `client` (a harness client) made now.
 * The server answers a connection's requests in order and sends a write's reply after every
 * push it queued for that connection before (spec §4.2), and the SDK raises events as each
 * message arrives: afterwards, every event the server caused so far has been raised. Use it
 * before asserting that an event did not happen. The write sets null at a fresh path, so it
 * changes no data; the path must be writable under the database's rules.
 */
export async function roundTrip(client) {
  await set(client.ref(`round-trip-${rid(8)}`), null);
}

export function deferred() {
  let resolve;
  let reject;
  const promise = new Promise((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Reject with a descriptive error if `promise` does not settle within `ms`. */
export function withTimeout(promise, ms, label = 'operation') {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timeout after ${ms} ms waiting for ${label}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Poll `predicate` (sync or async) every `interval` ms until it returns a truthy value.
 * Resolves with that value. Use for conditions that are not tied to a single event source.
 */
export async function waitFor(predicate, ms = 10_000, label = 'condition', interval = 10) {
  const deadline = Date.now() + ms;
  let lastError;
  for (;;) {
    try {
      const v = await predicate();
      if (v) return v;
    } catch (e) {
      lastError = e;
    }
    if (Date.now() > deadline) {
      const extra = lastError ? ` (last error: ${lastError.message})` : '';
      throw new Error(`timeout after ${ms} ms waiting for ${label}${extra}`);
    }
    await sleep(interval);
  }
}

/** Keys of a DataSnapshot in the order the SDK reports them (snapshot.forEach). */
export function keysOf(snap) {
  const out = [];
  snap.forEach((child) => {
    out.push(child.key);
  });
  return out;
}

/** [key, value] pairs of a DataSnapshot in forEach order. */
export function entriesOf(snap) {
  const out = [];
  snap.forEach((child) => {
    out.push([child.key, child.val()]);
  });
  return out;
}

/**
 * Generic recorder of snapshots delivered by some subscription.
 * `subscribe(onSnap, onError)` must return an unsubscribe function.
 */
export class SnapshotRecorder {
  constructor(subscribe, label = 'listener') {
    this.label = label;
    this.snaps = [];
    this.error = null;
    this._waiters = new Set();
    this._unsub = subscribe(
      (snap) => {
        this.snaps.push(snap);
        this._check();
      },
      (err) => {
        this.error = err || new Error('listener cancelled');
        this._check();
      },
    );
  }

  get values() {
    return this.snaps.map((s) => s.val());
  }

  get last() {
    return this.snaps.length ? this.snaps[this.snaps.length - 1] : undefined;
  }

  get lastVal() {
    const s = this.last;
    return s === undefined ? undefined : s.val();
  }

  _check() {
    for (const w of [...this._waiters]) {
      if (this.error) {
        this._waiters.delete(w);
        w.reject(new Error(`${this.label} failed: ${this.error.message || this.error}`));
        continue;
      }
      const snap = this.last;
      if (snap === undefined) continue;
      let ok = false;
      try {
        ok = w.pred(snap, this);
      } catch (e) {
        this._waiters.delete(w);
        w.reject(e);
        continue;
      }
      if (ok) {
        this._waiters.delete(w);
        w.resolve(snap);
      }
    }
  }

  /**
   * Resolve with the first snapshot (the current latest one included) for which
   * pred(snapshot, recorder) is true.
   */
  until(pred, ms = 10_000, what = 'matching snapshot') {
    const d = deferred();
    const w = { pred, resolve: d.resolve, reject: d.reject };
    this._waiters.add(w);
    this._check();
    return withTimeout(d.promise, ms, `${this.label}: ${what}`).catch((e) => {
      this._waiters.delete(w);
      const seen = JSON.stringify(this.values.slice(-5));
      throw new Error(`${e.message}; last values seen: ${seen}`.slice(0, 2000));
    });
  }

  /** Resolve with the first snapshot whose val() deep-equals `expected`. */
  untilVal(expected, ms = 10_000) {
    const want = JSON.stringify(canonical(expected));
    return this.until((s) => JSON.stringify(canonical(s.val())) === want, ms, `value ${want.slice(0, 200)}`);
  }

  /** Wait for the first snapshot (initial data). */
  first(ms = 10_000) {
    return this.until(() => true, ms, 'first snapshot');
  }

  off() {
    if (this._unsub) {
      this._unsub();
      this._unsub = null;
    }
  }
}

/** JSON with object keys sorted (for order-insensitive equality of plain values). */
export function canonical(v) {
  if (Array.isArray(v)) return v.map(canonical);
  if (v && typeof v === 'object') {
    const o = {};
    for (const k of Object.keys(v).sort()) o[k] = canonical(v[k]);
    return o;
  }
  return v;
}

/** Record value events of a modular-SDK Query/Reference. */
export function recordValues(query, label) {
  return new SnapshotRecorder((cb, err) => onValue(query, cb, err), label || `onValue(${query.toString()})`);
}

/** Record value events of a compat (firebase-admin) Reference/Query. */
export function recordAdminValues(adminRef, label) {
  return new SnapshotRecorder((cb, err) => {
    adminRef.on('value', cb, err);
    return () => adminRef.off('value', cb);
  }, label || `admin on(value ${adminRef.toString()})`);
}

/** One-shot: the first value event of a modular query (listen, not get()). */
export async function firstValue(query, ms = 10_000) {
  const rec = recordValues(query);
  try {
    return await rec.first(ms);
  } finally {
    rec.off();
  }
}

/** Random lower-case alphanumeric id. */
export function rid(n = 8) {
  const a = 'abcdefghijklmnopqrstuvwxyz0123456789';
  let s = '';
  for (let i = 0; i < n; i++) s += a[Math.floor(Math.random() * a.length)];
  return s;
}

/**
 * Resolves once `pred(value)` holds for a value of `r` (15 s at most). The SDK may call back
 * before onValue returns (a value it already holds), so listening stops once `off` exists.
 */
export function valueWhere(r, pred, label) {
  return withTimeout(
    new Promise((resolve) => {
      let done = false;
      const off = onValue(r, (snap) => {
        if (!done && pred(snap.val())) {
          done = true;
          resolve(snap.val());
          queueMicrotask(() => off());
        }
      });
    }),
    15_000,
    label,
  );
}
