// Records child_* and value events of one query, in the order the SDK raises them.

import { onChildAdded, onChildChanged, onChildMoved, onChildRemoved, onValue } from 'firebase/database';
import { deferred, withTimeout, keysOf } from './util.mjs';

const SUBSCRIBERS = {
  child_added: onChildAdded,
  child_changed: onChildChanged,
  child_moved: onChildMoved,
  child_removed: onChildRemoved,
};

/**
 * Attach child_* listeners (all four by default) plus one value listener to `query`.
 *
 * events: [{type, key, prev, val}] in raise order (prev = previous sibling key or null;
 * undefined for child_removed, which has no previous-key argument).
 * window(): keys of the latest value snapshot, in forEach order.
 */
export class ChildEventRecorder {
  constructor(query, types = Object.keys(SUBSCRIBERS), label) {
    this.label = label || `events(${query.toString()})`;
    this.events = [];
    this.valueSnaps = [];
    this.error = null;
    this._waiters = new Set();
    this._unsubs = [];
    for (const type of types) {
      const sub = SUBSCRIBERS[type];
      if (!sub) throw new Error(`unknown event type ${type}`);
      this._unsubs.push(
        sub(
          query,
          (snap, prev) => {
            this.events.push({ type, key: snap.key, prev: type === 'child_removed' ? undefined : prev ?? null, val: snap.val() });
            this._check();
          },
          (err) => this._fail(err),
        ),
      );
    }
    this._unsubs.push(
      onValue(
        query,
        (snap) => {
          this.valueSnaps.push(snap);
          this._check();
        },
        (err) => this._fail(err),
      ),
    );
  }

  _fail(err) {
    this.error = err || new Error('cancelled');
    this._check();
  }

  get lastValue() {
    return this.valueSnaps.length ? this.valueSnaps[this.valueSnaps.length - 1] : undefined;
  }

  /** Keys of the latest value snapshot in forEach order ([] before the first one). */
  window() {
    const s = this.lastValue;
    return s ? keysOf(s) : [];
  }

  /** Compact "type:key" strings of the recorded events. */
  summary(from = 0) {
    return this.events.slice(from).map((e) => `${e.type}:${e.key}`);
  }

  /** Forget recorded events (keeps the latest value snapshot). */
  clear() {
    this.events = [];
  }

  _check() {
    for (const w of [...this._waiters]) {
      if (this.error) {
        this._waiters.delete(w);
        w.reject(new Error(`${this.label} cancelled: ${this.error.message || this.error}`));
        continue;
      }
      let ok = false;
      try {
        ok = w.pred(this);
      } catch (e) {
        this._waiters.delete(w);
        w.reject(e);
        continue;
      }
      if (ok) {
        this._waiters.delete(w);
        w.resolve(this);
      }
    }
  }

  until(pred, ms = 10_000, what = 'condition') {
    const d = deferred();
    const w = { pred, resolve: d.resolve, reject: d.reject };
    this._waiters.add(w);
    this._check();
    return withTimeout(d.promise, ms, `${this.label}: ${what}`).catch((e) => {
      this._waiters.delete(w);
      throw new Error(`${e.message}; window=${JSON.stringify(this.window())} events=${JSON.stringify(this.summary())}`);
    });
  }

  /** Wait until the latest value snapshot has exactly these keys in this order. */
  untilWindow(keys, ms = 10_000) {
    const want = JSON.stringify(keys);
    return this.until((r) => r.valueSnaps.length > 0 && JSON.stringify(r.window()) === want, ms, `window ${want}`);
  }

  off() {
    for (const u of this._unsubs.splice(0)) u();
  }
}
