// The console's Audit tab: a database's audit trail (docs/audit.md): the setting that turns it
// on and its retention, a search of its entries a page at a time, and a user's entries erased
// on confirmation.

import { cell, localTime, plural } from './rules.js';

const $ = (id) => document.getElementById(id);

/** Entries asked for at a time; More asks for the next ones. */
export const AUDIT_PAGE = 1000;

/** An entry's time (ms since 1970) in the local time zone, to the millisecond. */
export function localMillis(ms) {
  const date = new Date(ms);
  if (Number.isNaN(date.getTime())) return String(ms ?? '');
  return `${localTime(date)}.${String(date.getMilliseconds()).padStart(3, '0')}`;
}

/** A `datetime-local` field's value as ms since 1970 (the field holds local time), or null. */
export function fieldMillis(value) {
  if (!value) return null;
  const ms = new Date(value).getTime();
  return Number.isNaN(ms) ? null : ms;
}

/**
 * The database's audit trail (`/.settings/audit.json` turns it on; entries are read from
 * `/.settings/auditTrail.json`): its setting saved as soon as it is changed, the entries that
 * match a search, oldest first, a page at a time, and a user's entries erased on confirmation.
 */
export class AuditTrail {
  /** @param {{ns: () => string | null, api: () => import('./api.js').Api}} context */
  constructor(context) {
    this.context = context;
    this.enabled = $('audit-enabled');
    this.retention = $('audit-retention');
    this.ns = null;
    /** What the server holds, to go back to when a change is refused. */
    this.value = null;
    this.loads = 0;
    /** The filters of the search shown, and the seq of its last entry. */
    this.query = null;
    this.last = null;
    this.searches = 0;
    this.enabled.addEventListener('change', () => this.save());
    this.retention.addEventListener('change', () => this.save());
    $('audit-query').addEventListener('submit', (event) => {
      event.preventDefault();
      this.search();
    });
    $('audit-more').addEventListener('click', () => this.more());
    $('audit-erase').addEventListener('submit', (event) => {
      event.preventDefault();
      this.erase();
    });
  }

  line(id, text, isError = false) {
    const line = $(id);
    line.textContent = text;
    line.classList.toggle('error', isError);
  }

  enable(enabled) {
    this.enabled.disabled = !enabled;
    this.retention.disabled = !enabled;
  }

  show() {
    this.enabled.checked = this.value?.enabled === true;
    this.retention.value = this.value?.retentionDays == null ? '' : String(this.value.retentionDays);
  }

  describe(value) {
    const days = plural(value.retentionDays, 'day', 'days');
    return value.enabled ? `writes are audited; entries are kept ${days}` : `writes are not audited (entries are kept ${days})`;
  }

  /** Reads the setting; a new database starts with an empty table. */
  async load() {
    const ns = this.context.ns();
    if (!ns) return;
    if (ns !== this.ns) {
      this.ns = ns;
      this.value = null;
      this.query = null;
      this.last = null;
      this.searches += 1;
      $('audit-rows').replaceChildren();
      $('audit-more').hidden = true;
      $('audit-search').disabled = false;
      $('audit-more').disabled = false;
      this.line('audit-status', 'Search lists the entries that match, oldest first.');
      this.line('audit-erase-status', '');
      this.show();
    }
    const load = ++this.loads;
    this.enable(false);
    this.line('audit-setting-status', 'loading…');
    try {
      const value = await this.context.api().setting(ns, 'audit');
      if (load !== this.loads) return;
      this.value = value;
      this.show();
      this.line('audit-setting-status', this.describe(value));
      this.enable(true);
    } catch (error) {
      if (load !== this.loads) return;
      this.line('audit-setting-status', error.message, true);
    }
  }

  /** The setting as the fields say: empty days is the server's default. */
  entered() {
    const text = this.retention.value.trim();
    return { enabled: this.enabled.checked, retentionDays: text === '' ? null : Number(text) };
  }

  async save() {
    const ns = this.context.ns();
    if (!ns) return;
    const load = ++this.loads;
    this.enable(false);
    this.line('audit-setting-status', 'saving…');
    try {
      const now = await this.context.api().saveSetting(ns, 'audit', this.entered());
      if (load !== this.loads) return;
      this.value = now;
      this.show();
      this.line('audit-setting-status', `saved: ${this.describe(now)}`);
    } catch (error) {
      if (load !== this.loads) return;
      // The fields go back to what the server still holds.
      this.show();
      this.line('audit-setting-status', `not changed: ${error.message}`, true);
    } finally {
      if (load === this.loads) this.enable(true);
    }
  }

  /** The search form's filters; throws on a path or time that cannot be one. */
  filters() {
    const uid = $('audit-uid').value.trim();
    const path = $('audit-path').value.trim();
    const filters = { limit: AUDIT_PAGE };
    if (uid) filters.uid = uid;
    if (path && path !== '/') filters.path = `/${path.split('/').filter(Boolean).join('/')}`;
    for (const name of ['since', 'until']) {
      const field = $(`audit-${name}`);
      if (!field.value) continue;
      const ms = fieldMillis(field.value);
      if (ms === null) throw new Error(`${name} is not a time`);
      filters[name] = ms;
    }
    return filters;
  }

  async search() {
    let filters;
    try {
      filters = this.filters();
    } catch (error) {
      this.line('audit-status', error.message, true);
      return;
    }
    this.query = filters;
    this.last = null;
    $('audit-rows').replaceChildren();
    $('audit-more').hidden = true;
    await this.page(true);
  }

  more() {
    if (this.query) return this.page(false);
  }

  /** Reads the next page of the search shown and adds its entries to the table. */
  async page(first) {
    const ns = this.context.ns();
    if (!ns || !this.query) return;
    const search = ++this.searches;
    const filters = this.last === null ? this.query : { ...this.query, after: this.last };
    $('audit-search').disabled = true;
    $('audit-more').disabled = true;
    this.line('audit-status', 'reading…');
    try {
      const entries = await this.context.api().auditTrail(ns, filters);
      if (search !== this.searches) return;
      $('audit-rows').append(...entries.map((entry) => this.row(entry)));
      if (entries.length) this.last = entries.at(-1).seq;
      const shown = $('audit-rows').children.length;
      const full = entries.length >= (this.query.limit ?? AUDIT_PAGE);
      $('audit-more').hidden = !full;
      const what = plural(shown, 'entry', 'entries');
      this.line(
        'audit-status',
        shown === 0 && first
          ? 'No entry matches.'
          : full
            ? `${what} shown, oldest first; More reads the next ${AUDIT_PAGE}`
            : `${what}, oldest first`,
      );
    } catch (error) {
      if (search !== this.searches) return;
      this.line('audit-status', error.message, true);
    } finally {
      if (search === this.searches) {
        $('audit-search').disabled = false;
        $('audit-more').disabled = false;
      }
    }
  }

  row(entry) {
    const row = document.createElement('tr');
    row.dataset.seq = String(entry.seq);
    if (entry.uid != null) row.dataset.uid = String(entry.uid);
    row.title = `entry ${entry.seq}`;
    const exact = new Date(entry.time);
    cell(row, localMillis(entry.time), Number.isNaN(exact.getTime()) ? '' : exact.toISOString());
    cell(row, String(entry.op ?? ''));
    const where = cell(row, '');
    const path = document.createElement('div');
    path.className = 'audit-path';
    path.textContent = String(entry.path ?? '');
    where.append(path);
    if (Array.isArray(entry.paths) && entry.paths.length) {
      const list = document.createElement('ul');
      list.className = 'audit-paths';
      for (const each of entry.paths) {
        const item = document.createElement('li');
        item.textContent = String(each);
        list.append(item);
      }
      where.append(list);
    }
    for (const text of [entry.uid, entry.provider, entry.transport, entry.address]) {
      const td = cell(row, text == null ? '—' : String(text));
      if (text == null) td.classList.add('none');
    }
    cell(row, Array.isArray(entry.rules) ? entry.rules.join(', ') : '');
    return row;
  }

  /** Erases every entry of the uid typed, once confirmed. */
  async erase() {
    const ns = this.context.ns();
    const uid = $('audit-erase-uid').value.trim();
    if (!ns) return;
    if (!uid) {
      this.line('audit-erase-status', 'Type the uid whose entries go.', true);
      return;
    }
    if (!window.confirm(`Erase every audit entry of ${uid} in ${ns}? They cannot be brought back.`)) return;
    const button = $('audit-erase-go');
    button.disabled = true;
    this.line('audit-erase-status', `erasing the entries of ${uid}…`);
    try {
      const erased = await this.context.api().eraseAudit(ns, uid);
      if (this.context.ns() !== ns) return;
      this.line('audit-erase-status', `${plural(erased, 'entry', 'entries')} erased`);
      // The rows shown of that uid are gone too.
      for (const row of [...$('audit-rows').children]) if (row.dataset.uid === uid) row.remove();
    } catch (error) {
      this.line('audit-erase-status', error.message, true);
    } finally {
      button.disabled = false;
    }
  }
}
