// The editor beside the tree. The box holds the value read at a path over REST with its
// ETag; *Set value* and *Delete* are conditional on that ETag, so a value someone else
// changed since it was read is never overwritten: the server refuses (412) and the panel
// shows the value there now. While the box is not edited it follows the live tree (a change
// there reads the value again); once edited, a change underneath is shown beside the box.
// Adding a child goes through the realtime connection; import and export through REST.

import { child, push, ref, set } from 'firebase/database';
import { NULL_ETAG, StaleError, cleanPath } from './api.js';

/** How long the Delete button waits for its confirming second click (a value, no children). */
const CONFIRM_MS = 4000;

const $ = (id) => document.getElementById(id);

function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new Error(`The value is not JSON: ${error.message}`);
  }
}

/** JSON text as the box shows it. */
const pretty = (text) => JSON.stringify(JSON.parse(text), null, 2);

/** The number of children of a JSON value (0 for a leaf or null). */
function childCount(value) {
  return value !== null && typeof value === 'object' ? Object.keys(value).length : 0;
}

export class Editor {
  /**
   * @param {{db: () => import('firebase/database').Database | null, ns: () => string | null,
   *          api: () => import('./api.js').Api, treeText: (path: string) => string | null}} context
   */
  constructor(context) {
    this.context = context;
    this.confirmTimer = 0;
    this.armedPath = null;
    this.read = null; // {path, etag, text}: what the box was loaded with
    this.treeText = null; // the live tree's value at read.path when last compared
    this.reads = 0; // sequence of reads, so that a late answer does not replace a newer one
    this.checking = null; // a running comparison with the server, and whether another is due
    $('edit-set').addEventListener('click', () => this.run('edit', () => this.setValue()));
    $('edit-add').addEventListener('click', () => this.run('add', () => this.addChild()));
    $('edit-delete').addEventListener('click', () => this.run('edit', () => this.remove()));
    $('edit-reload').addEventListener('click', () => this.run('edit', () => this.load(this.path())));
    $('edit-stale-reload').addEventListener('click', () => this.run('edit', () => this.load(this.path())));
    $('delete-confirm-name').addEventListener('input', () => this.confirmTyped());
    $('delete-confirm-form').addEventListener('submit', (event) => {
      event.preventDefault();
      this.run('edit', () => this.confirmDelete());
    });
    $('delete-confirm-cancel').addEventListener('click', () => this.hideConfirm());
    $('import').addEventListener('click', () => this.run('io', () => this.importFile()));
    $('export').addEventListener('click', () => this.run('io', () => this.exportPath()));
    $('edit-value').addEventListener('input', () => this.showNote());
    $('edit-path').addEventListener('input', () => {
      this.hideConfirm();
      this.disarm();
      this.showNote();
    });
  }

  /** Back to an empty panel (another database was opened). */
  reset() {
    this.reads += 1;
    this.read = null;
    this.treeText = null;
    $('edit-path').value = '/';
    $('edit-value').value = '';
    $('child-key').value = '';
    this.hideStale();
    this.hideConfirm();
    this.disarm();
    this.clearStatus();
    this.showNote();
  }

  /** Shows `path` and the value there now for editing. */
  async select(path) {
    $('edit-path').value = path;
    $('child-key').value = '';
    this.hideConfirm();
    this.disarm();
    await this.run('edit', () => this.load(path));
  }

  path() {
    return cleanPath($('edit-path').value);
  }

  /** Runs a button's action; its error is shown at that button's group, others cleared. */
  async run(where, action) {
    this.clearStatus();
    try {
      await action();
    } catch (error) {
      if (error instanceof StaleError) this.showStale(error, this.path());
      else this.say(where, error.message || String(error), true);
    }
  }

  say(where, text, isError = false) {
    const line = $(`${where}-status`);
    line.textContent = text;
    line.classList.toggle('error', isError);
  }

  /** Clears every status line of the panel (on success, another tab or database). */
  clearStatus() {
    for (const where of ['edit', 'add', 'io']) this.say(where, '');
  }

  ns() {
    const ns = this.context.ns();
    if (!ns) throw new Error('Open a database first.');
    return ns;
  }

  /** Whether the box differs from what was read into it. */
  edited() {
    return this.read !== null && $('edit-value').value !== this.read.text;
  }

  /** Whether the box holds the value read at the path the panel shows. */
  following() {
    return this.read !== null && this.read.path === this.path();
  }

  showNote() {
    let text = '';
    if (!this.read || this.read.path !== this.path()) {
      text = 'not read: Set value only creates this path (Reload reads it)';
    } else if (this.edited()) {
      text = 'edited: Set value writes it if the value is still the one read';
    } else {
      text = 'following the live value';
    }
    $('edit-note').textContent = text;
  }

  /**
   * Reads the value at `path` into the box, replacing what it held, unless the user typed in
   * the box while the read was on its way: then the read is remembered (so that Set value is
   * conditional on it) and the typing is kept.
   */
  async load(path) {
    const ns = this.ns();
    const seq = ++this.reads;
    const typed = $('edit-value').value;
    const { text, etag } = await this.context.api().read(ns, path);
    if (seq !== this.reads || this.context.ns() !== ns) return;
    if ($('edit-value').value !== typed && this.path() === path) {
      this.read = { path, etag, text: pretty(text) };
      this.treeText = this.context.treeText(path);
      this.showNote();
      return;
    }
    this.accept(path, text, etag);
  }

  accept(path, text, etag) {
    $('edit-path').value = path;
    $('edit-value').value = pretty(text);
    this.read = { path, etag, text: $('edit-value').value };
    this.treeText = this.context.treeText(path);
    this.hideStale();
    this.showNote();
  }

  /**
   * The live tree drew new data: when the value at the path read changed there, ask the
   * server (the tree may lag or lead the read) and either follow it (box not edited) or
   * show the change beside the box (box edited, kept as it is).
   */
  treeChanged() {
    if (!this.following()) return;
    const now = this.context.treeText(this.read.path);
    if (now === null || now === this.treeText) return;
    this.treeText = now;
    if (this.checking) {
      this.checking.again = true;
      return;
    }
    this.checking = { again: false };
    this.compare()
      .catch(() => {})
      .finally(() => {
        const again = this.checking.again;
        this.checking = null;
        if (again) {
          this.treeText = null;
          this.treeChanged();
        }
      });
  }

  async compare() {
    const ns = this.ns();
    const { path, etag: readEtag } = this.read;
    const seq = this.reads;
    const { text, etag } = await this.context.api().read(ns, path);
    if (seq !== this.reads || !this.following() || this.read.path !== path || this.context.ns() !== ns) return;
    if (etag === readEtag) return;
    if (!this.edited()) {
      this.accept(path, text, etag);
      return;
    }
    this.showStale(new StaleError(path, text, etag), path, false);
  }

  /** The value at `path` is not the one the box was read from: say so, show it, keep the box. */
  showStale(error, path, refused = true) {
    const created = !this.read || this.read.path !== path;
    let text;
    if (created) text = `${path} already holds a value, so nothing was written. Reload to edit it. It holds:`;
    else if (refused) {
      text = `${path} changed since you read it: nothing was written and your text is kept. Reload to take the current value. It holds now:`;
    } else {
      text = `${path} changed since you read it: your text is kept, and Set value or Delete would be refused. Reload to take the current value. It holds now:`;
    }
    $('edit-stale-text').textContent = text;
    let shown = error.current;
    try {
      shown = pretty(error.current);
    } catch {
      // shown as it came
    }
    $('edit-current').textContent = shown;
    $('edit-stale').hidden = false;
  }

  hideStale() {
    $('edit-stale').hidden = true;
    $('edit-current').textContent = '';
  }

  database() {
    const db = this.context.db();
    if (!db) throw new Error('Open a database first.');
    return db;
  }

  /** Writes the box at the path, if the value there is still the one read (or none). */
  async setValue() {
    const ns = this.ns();
    const path = this.path();
    const text = JSON.stringify(parseJson($('edit-value').value));
    const etag = this.following() ? this.read.etag : NULL_ETAG;
    const written = await this.context.api().writeIfUnchanged(ns, path, text, etag);
    this.read = { path, etag: written, text: $('edit-value').value };
    this.treeText = this.context.treeText(path);
    this.hideStale();
    this.showNote();
    this.say('edit', `Set ${path}.`);
  }

  async addChild() {
    const db = this.database();
    const path = this.path();
    const value = parseJson($('edit-value').value);
    const key = $('child-key').value.trim();
    const target = key ? child(ref(db, path), key) : push(ref(db, path));
    await set(target, value);
    this.say('add', `Added ${cleanPath(`${path}/${target.key}`)}.`);
  }

  /**
   * Deletes the path, named before it goes: a value asks for a second click within
   * CONFIRM_MS; a node with children asks for its path to be typed, and the root for the
   * database's name. The delete is conditional on the value read, like Set value.
   */
  async remove() {
    const path = this.path();
    if (this.confirmTimer && this.armedPath === path) {
      this.disarm();
      await this.deleteRead(path);
      return;
    }
    this.disarm();
    this.hideConfirm();
    if (!this.following()) await this.load(path);
    if (!this.following()) return;
    const value = JSON.parse(this.read.text);
    if (value === null) throw new Error(`There is nothing at ${path} to delete.`);
    const children = childCount(value);
    if (path === '/' || children > 0) {
      const ns = this.ns();
      const expected = path === '/' ? ns : path;
      $('delete-confirm-text').textContent =
        path === '/'
          ? `Delete everything in the database ${ns} (${children} children at /)? Type the database name, ${ns}, to confirm.`
          : `Delete ${path} and the ${children} ${children === 1 ? 'child' : 'children'} under it? Type ${path} to confirm.`;
      const input = $('delete-confirm-name');
      input.value = '';
      input.dataset.expected = expected;
      $('delete-confirm-form').dataset.path = path;
      $('delete-confirm-go').disabled = true;
      $('delete-confirm-form').hidden = false;
      input.focus();
      return;
    }
    const button = $('edit-delete');
    button.textContent = `Delete ${path}?`;
    button.classList.add('armed');
    this.armedPath = path;
    this.confirmTimer = setTimeout(() => this.disarm(), CONFIRM_MS);
  }

  confirmTyped() {
    const input = $('delete-confirm-name');
    $('delete-confirm-go').disabled = input.value.trim() !== input.dataset.expected;
  }

  async confirmDelete() {
    const input = $('delete-confirm-name');
    const path = $('delete-confirm-form').dataset.path;
    if (input.value.trim() !== input.dataset.expected || path !== this.path()) return;
    this.hideConfirm();
    await this.deleteRead(path);
  }

  hideConfirm() {
    $('delete-confirm-form').hidden = true;
    $('delete-confirm-name').value = '';
  }

  async deleteRead(path) {
    const ns = this.ns();
    if (!this.following()) throw new Error(`Read ${path} before deleting it.`);
    const written = await this.context.api().writeIfUnchanged(ns, path, null, this.read.etag);
    $('edit-value').value = 'null';
    this.read = { path, etag: written || NULL_ETAG, text: 'null' };
    this.treeText = this.context.treeText(path);
    this.hideStale();
    this.showNote();
    this.say('edit', `Deleted ${path}.`);
  }

  disarm() {
    clearTimeout(this.confirmTimer);
    this.confirmTimer = 0;
    this.armedPath = null;
    const button = $('edit-delete');
    button.textContent = 'Delete';
    button.classList.remove('armed');
  }

  async importFile() {
    const ns = this.ns();
    const file = $('import-file').files[0];
    if (!file) throw new Error('Choose a JSON file to import.');
    const text = await file.text();
    parseJson(text);
    const path = this.path();
    await this.context.api().importJson(ns, path, text);
    this.say('io', `Imported ${file.name} (${text.length} bytes) into ${path}.`);
  }

  async exportPath() {
    const ns = this.ns();
    const path = this.path();
    const text = await this.context.api().exportJson(ns, path);
    const name = `${ns}${path === '/' ? '' : path.replaceAll('/', '-')}.json`;
    const url = URL.createObjectURL(new Blob([text], { type: 'application/json' }));
    const link = document.createElement('a');
    link.href = url;
    link.download = name;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
    this.say('io', `Exported ${path} as ${name}.`);
  }
}
