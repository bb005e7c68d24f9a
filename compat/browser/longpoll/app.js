// The page of the long-polling browser test: the official firebase SDK (the browser build,
// as the console vendors it), its functions on `window.api` for the test to call.
// ?port=&ns= name the server and database; ?mode=force calls forceLongPolling().
import { initializeApp } from 'firebase/app';
import {
  forceLongPolling,
  get,
  getDatabase,
  limitToLast,
  onDisconnect,
  onValue,
  orderByChild,
  push,
  query,
  ref,
  runTransaction,
  serverTimestamp,
  set,
  update,
} from 'firebase/database';

const params = new URLSearchParams(location.search);
if (params.get('mode') === 'force') forceLongPolling();
const app = initializeApp({
  databaseURL: `http://127.0.0.1:${params.get('port')}?ns=${params.get('ns')}`,
});
const db = getDatabase(app);

/** Every value each watched path had, in order. */
const seen = {};
/** Errors of failed writes, by label. */
const errors = {};

window.api = {
  set: (path, value) => set(ref(db, path), value).then(() => true),
  update: (path, value) => update(ref(db, path), value).then(() => true),
  push: (path, value) => push(ref(db, path), value).then((child) => child.key),
  stamp: (path) => set(ref(db, path), serverTimestamp()).then(() => true),
  get: (path) => get(ref(db, path)).then((snap) => snap.val()),
  watch(path) {
    seen[path] = [];
    onValue(ref(db, path), (snap) => seen[path].push(snap.val()));
  },
  watchTop(path, child, count) {
    const key = `top:${path}`;
    seen[key] = [];
    const top = query(ref(db, path), orderByChild(child), limitToLast(count));
    onValue(top, (snap) => {
      const names = [];
      snap.forEach((c) => {
        names.push(c.key);
      });
      seen[key].push(names);
    });
  },
  seen: (key) => seen[key],
  last: (key) => (seen[key] && seen[key].length ? seen[key][seen[key].length - 1] : undefined),
  async increment(path, times) {
    const runs = [];
    for (let i = 0; i < times; i++) {
      runs.push(runTransaction(ref(db, path), (n) => (n || 0) + 1).then((r) => r.committed));
    }
    return (await Promise.all(runs)).every(Boolean);
  },
  present: (path) =>
    onDisconnect(ref(db, path))
      .remove()
      .then(() => set(ref(db, path), true))
      .then(() => true),
  tryWrite: (label, path, value) =>
    set(ref(db, path), value).then(
      () => (errors[label] = 'none'),
      (e) => (errors[label] = e.code || e.message),
    ),
  error: (label) => errors[label],
  connected() {
    return new Promise((resolve) => {
      onValue(ref(db, '.info/connected'), (snap) => {
        if (snap.val() === true) resolve(true);
      });
    });
  },
};
window.ready = true;
