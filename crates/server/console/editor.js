// The editor beside the tree: set, delete and add values through the realtime connection
// (so the tree shows the write at once, and a refusal rolls it back), and import or export
// the JSON at a path through REST.

import { child, push, ref, remove, set } from 'firebase/database';
import { cleanPath } from './api.js';

/** How long the Delete button waits for its confirming second click. */
const CONFIRM_MS = 4000;

const $ = (id) => document.getElementById(id);

function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new Error(`The value is not JSON: ${error.message}`);
  }
}

export class Editor {
  /**
   * @param {{db: () => import('firebase/database').Database | null, ns: () => string | null,
   *          api: () => import('./api.js').Api, tell: (text: string, isError?: boolean) => void}} context
   */
  constructor(context) {
    this.context = context;
    this.confirmTimer = 0;
    $('edit-set').addEventListener('click', () => this.run(() => this.setValue()));
    $('edit-add').addEventListener('click', () => this.run(() => this.addChild()));
    $('edit-delete').addEventListener('click', () => this.run(() => this.remove()));
    $('import').addEventListener('click', () => this.run(() => this.importFile()));
    $('export').addEventListener('click', () => this.run(() => this.exportPath()));
  }

  /** Shows `path` and its value for editing. */
  select(path, value) {
    $('edit-path').value = path;
    $('edit-value').value = JSON.stringify(value, null, 2);
    $('child-key').value = '';
  }

  path() {
    return cleanPath($('edit-path').value);
  }

  async run(action) {
    try {
      await action();
    } catch (error) {
      this.context.tell(error.message || String(error), true);
    }
  }

  database() {
    const db = this.context.db();
    if (!db) throw new Error('Open a database first.');
    return db;
  }

  async setValue() {
    const db = this.database();
    const path = this.path();
    const value = parseJson($('edit-value').value);
    await set(ref(db, path), value);
    this.context.tell(`Set ${path}.`);
  }

  async addChild() {
    const db = this.database();
    const path = this.path();
    const value = parseJson($('edit-value').value);
    const key = $('child-key').value.trim();
    const target = key ? child(ref(db, path), key) : push(ref(db, path));
    await set(target, value);
    this.context.tell(`Added ${cleanPath(`${path}/${target.key}`)}.`);
  }

  /** The first click arms the button, the second (within CONFIRM_MS) deletes. */
  async remove() {
    const button = $('edit-delete');
    const path = this.path();
    if (!this.confirmTimer) {
      button.textContent = `Delete ${path}?`;
      button.classList.add('armed');
      this.confirmTimer = setTimeout(() => this.disarm(), CONFIRM_MS);
      return;
    }
    this.disarm();
    await remove(ref(this.database(), path));
    this.context.tell(`Deleted ${path}.`);
  }

  disarm() {
    clearTimeout(this.confirmTimer);
    this.confirmTimer = 0;
    const button = $('edit-delete');
    button.textContent = 'Delete';
    button.classList.remove('armed');
  }

  async importFile() {
    const ns = this.context.ns();
    if (!ns) throw new Error('Open a database first.');
    const file = $('import-file').files[0];
    if (!file) throw new Error('Choose a JSON file to import.');
    const text = await file.text();
    parseJson(text);
    const path = this.path();
    await this.context.api().importJson(ns, path, text);
    this.context.tell(`Imported ${file.name} (${text.length} bytes) into ${path}.`);
  }

  async exportPath() {
    const ns = this.context.ns();
    if (!ns) throw new Error('Open a database first.');
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
    this.context.tell(`Exported ${path} as ${name}.`);
  }
}
