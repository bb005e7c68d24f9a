// The live tree: one realtime listen (official SDK) at the watched path, rendered as nested
// lists whose collapsed branches cost nothing. Values that change flash, so a write by
// anyone shows as it lands.

import { limitToFirst, onValue, orderByKey, query, ref } from 'firebase/database';

/** The most children listened to at the watched path; watch a child to see past them. */
export const MAX_CHILDREN = 500;

/** The most children drawn below the watched path, per node. */
export const MAX_DRAWN_CHILDREN = 200;

/** Branches at this depth or less below the watched path start expanded. */
const OPEN_DEPTH = 2;

const join = (path, key) => (path === '/' ? `/${key}` : `${path}/${key}`);

function leafText(value) {
  return typeof value === 'string' ? JSON.stringify(value) : String(value);
}

/** A plain value tree in the SDK's key order (val() would turn some objects into arrays). */
export function plainValue(snapshot) {
  if (!snapshot.hasChildren()) return snapshot.val();
  const out = {};
  snapshot.forEach((child) => {
    out[child.key] = plainValue(child);
  });
  return out;
}

export class LiveTree {
  /**
   * @param {HTMLElement} element where the tree is drawn
   * @param {{onSelect: (path: string) => void, onData: () => void,
   *          onError: (e: Error) => void, onNote: (text: string) => void}} hooks
   */
  constructor(element, hooks) {
    this.element = element;
    this.hooks = hooks;
    this.unsubscribe = null;
    this.path = '/';
    this.snapshot = null;
    this.previous = new Map(); // path -> leaf text drawn last time, to flash changes
    this.toggled = new Map(); // path -> expanded, where the user chose
    this.selected = null;
    this.frame = 0;
    this.flash = false;
    element.addEventListener('click', (event) => this.click(event));
  }

  /** Listens at `path` of `db`, replacing any earlier listen. */
  watch(db, path) {
    this.stop();
    this.path = path;
    this.previous = new Map();
    this.snapshot = null;
    this.element.replaceChildren(note('loading…'));
    const at = query(ref(db, path), orderByKey(), limitToFirst(MAX_CHILDREN + 1));
    this.unsubscribe = onValue(
      at,
      (snapshot) => {
        this.snapshot = snapshot;
        this.schedule();
        this.hooks.onData();
      },
      (error) => this.hooks.onError(error),
    );
  }

  stop() {
    if (this.unsubscribe) this.unsubscribe();
    this.unsubscribe = null;
  }

  /** Draws at most once per animation frame however many events arrive. */
  schedule() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.draw(true);
    });
  }

  /** Redraws; `flash` marks what changed since the last drawing (data events only). */
  draw(flash = false) {
    const snapshot = this.snapshot;
    if (!snapshot) return;
    this.flash = flash;
    const seen = new Map();
    const root = document.createElement('ul');
    root.className = 'branch root';
    root.append(this.node(snapshot, this.path, this.path, 0, seen));
    this.element.replaceChildren(root);
    this.previous = seen;
    const count = snapshot.size;
    this.hooks.onNote(
      count > MAX_CHILDREN
        ? `showing the first ${MAX_CHILDREN} children of ${this.path}; watch a child to see the others`
        : '',
    );
  }

  expanded(path, depth) {
    return this.toggled.has(path) ? this.toggled.get(path) : depth < OPEN_DEPTH;
  }

  node(snapshot, path, label, depth, seen) {
    const item = document.createElement('li');
    item.className = 'node';
    item.dataset.path = path;
    const row = document.createElement('div');
    row.className = 'row';
    if (path === this.selected) row.classList.add('selected');
    const key = document.createElement('span');
    key.className = 'key';
    key.textContent = label;
    item.append(row);
    if (!snapshot.hasChildren()) {
      const value = snapshot.val();
      const text = value === null ? 'null' : leafText(value);
      const toggle = document.createElement('span');
      toggle.className = 'toggle leaf';
      const shown = document.createElement('span');
      shown.className = `value ${value === null ? 'null' : typeof value}`;
      shown.textContent = text;
      shown.dataset.testid = 'value';
      row.append(toggle, key, document.createTextNode(': '), shown);
      seen.set(path, text);
      const before = this.previous.get(path);
      if (this.flash && before !== undefined && before !== text) row.classList.add('changed');
      else if (this.flash && before === undefined && this.previous.size > 0) row.classList.add('added');
      return item;
    }
    const open = this.expanded(path, depth);
    const toggle = document.createElement('button');
    toggle.type = 'button';
    toggle.className = 'toggle';
    toggle.textContent = open ? '▾' : '▸';
    toggle.setAttribute('aria-label', open ? 'collapse' : 'expand');
    const count = document.createElement('span');
    count.className = 'count';
    count.textContent = `{${snapshot.size}}`;
    row.append(toggle, key, count);
    if (this.flash && !this.previous.has(path) && this.previous.size > 0) row.classList.add('added');
    seen.set(path, '');
    if (!open) return item;
    const branch = document.createElement('ul');
    branch.className = 'branch';
    let drawn = 0;
    const limit = depth === 0 ? MAX_CHILDREN : MAX_DRAWN_CHILDREN;
    snapshot.forEach((child) => {
      if (drawn >= limit) return true;
      drawn += 1;
      branch.append(this.node(child, join(path, child.key), child.key, depth + 1, seen));
      return false;
    });
    if (snapshot.size > drawn) {
      const more = document.createElement('li');
      more.className = 'more';
      more.textContent = `… ${snapshot.size - drawn} more (watch ${path} to see them)`;
      branch.append(more);
    }
    item.append(branch);
    return item;
  }

  /** The value at `path` as JSON text, if the watched one holds it (else null). */
  textAt(path) {
    const snapshot = this.find(path);
    return snapshot ? JSON.stringify(plainValue(snapshot)) : null;
  }

  /** The snapshot at `path` within the watched one, if it is there. */
  find(path) {
    if (!this.snapshot) return null;
    if (path === this.path) return this.snapshot;
    const prefix = this.path === '/' ? '/' : `${this.path}/`;
    if (!path.startsWith(prefix)) return null;
    return this.snapshot.child(path.slice(prefix.length));
  }

  click(event) {
    const item = event.target.closest('li.node');
    if (!item) return;
    const path = item.dataset.path;
    if (event.target.closest('button.toggle')) {
      const depth = path === this.path ? 0 : path.slice(this.path.length).split('/').filter(Boolean).length;
      this.toggled.set(path, !this.expanded(path, depth));
      this.draw();
      return;
    }
    this.selected = path;
    this.hooks.onSelect(path);
    this.draw();
  }
}

function note(text) {
  const p = document.createElement('p');
  p.className = 'hint';
  p.textContent = text;
  return p;
}
