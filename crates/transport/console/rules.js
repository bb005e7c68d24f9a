// The rules editor: the database's rules document as uploaded (comments kept), checked or
// saved by the server, whose refusals name a line and a column; the editor marks that line.
// Beside it, the rest of the database's settings document (docs/settings.md): the history of
// its rulesets, each compared with the stable one and made stable again in one click (a
// rollback), and its settings.

import { counts, fold, lineDiff } from './diff.js';

const $ = (id) => document.getElementById(id);

/** `line L, column C: reason`, the form of every refusal of a rules document. */
const POSITION = /^line (\d+), column (\d+): /;

export function errorPosition(message) {
  const found = POSITION.exec(message);
  return found ? { line: Number(found[1]), column: Number(found[2]) } : null;
}

export class RulesEditor {
  /**
   * @param {{ns: () => string | null, api: () => import('./api.js').Api}} context
   */
  constructor(context) {
    this.context = context;
    this.text = $('rules-text');
    this.gutter = $('rules-gutter');
    this.band = $('rules-band');
    this.errorLine = 0;
    this.lines = 0;
    this.text.addEventListener('input', () => {
      this.clearError();
      this.drawGutter();
    });
    this.text.addEventListener('scroll', () => this.follow());
    $('rules-load').addEventListener('click', () => this.load());
    $('rules-check').addEventListener('click', () => this.submit(false));
    $('rules-save').addEventListener('click', () => this.submit(true));
  }

  status(text) {
    $('rules-status').textContent = text;
  }

  async load() {
    const ns = this.context.ns();
    if (!ns) return;
    this.clearError();
    this.status('loading…');
    try {
      this.text.value = await this.context.api().rules(ns);
      this.status(`rules of ${ns}`);
    } catch (error) {
      this.status('');
      this.showError(error.message);
    }
    this.drawGutter();
  }

  /** Checks the document on the server, and with `save` installs it. */
  async submit(save) {
    const ns = this.context.ns();
    if (!ns) return;
    this.clearError();
    this.status(save ? 'saving…' : 'checking…');
    try {
      const api = this.context.api();
      if (save) await api.saveRules(ns, this.text.value);
      else await api.checkRules(this.text.value);
      this.status(save ? `saved; ${ns} uses these rules now` : 'the rules are valid');
      // A save is a new ruleset, and the stable one.
      if (save) this.context.rulesSaved?.();
    } catch (error) {
      this.status('');
      this.showError(error.message);
    }
  }

  showError(message) {
    $('rules-error').textContent = message;
    const at = errorPosition(message);
    if (!at) return;
    this.errorLine = at.line;
    this.drawGutter();
    // Put the caret on the spot, and scroll the line into view.
    const lines = this.text.value.split('\n');
    let offset = 0;
    for (let i = 0; i < Math.min(at.line - 1, lines.length); i++) offset += lines[i].length + 1;
    offset += Math.max(0, at.column - 1);
    this.text.focus();
    this.text.setSelectionRange(offset, offset);
    const lineHeight = this.lineHeight();
    const top = (at.line - 1) * lineHeight;
    if (top < this.text.scrollTop || top > this.text.scrollTop + this.text.clientHeight - lineHeight) {
      this.text.scrollTop = Math.max(0, top - this.text.clientHeight / 2);
    }
    this.follow();
  }

  clearError() {
    if (!this.errorLine && !$('rules-error').textContent) return;
    $('rules-error').textContent = '';
    this.errorLine = 0;
    this.drawGutter();
  }

  lineHeight() {
    return parseFloat(getComputedStyle(this.text).lineHeight) || 18;
  }

  /** One number per line, the refused line marked. */
  drawGutter() {
    const count = this.text.value.split('\n').length;
    if (count !== this.lines || this.gutter.querySelector('.error') || this.errorLine) {
      const rows = [];
      for (let line = 1; line <= count; line++) {
        const row = document.createElement('div');
        row.textContent = String(line);
        row.dataset.line = String(line);
        if (line === this.errorLine) row.className = 'error';
        rows.push(row);
      }
      this.gutter.replaceChildren(...rows);
      this.lines = count;
    }
    this.follow();
  }

  /** Keeps the gutter and the error band level with the text as it scrolls. */
  follow() {
    this.gutter.scrollTop = this.text.scrollTop;
    if (!this.errorLine) {
      this.band.hidden = true;
      return;
    }
    const padding = parseFloat(getComputedStyle(this.text).paddingTop) || 0;
    this.band.hidden = false;
    this.band.style.top = `${padding + (this.errorLine - 1) * this.lineHeight() - this.text.scrollTop}px`;
    this.band.style.height = `${this.lineHeight()}px`;
  }
}

/** `2026-11-29T21:13:07.508Z` in the local time zone, to the second. */
export function localTime(iso) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return String(iso ?? '');
  const pad = (n) => String(n).padStart(2, '0');
  const day = `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}`;
  return `${day} ${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}

function badge(label) {
  const span = document.createElement('span');
  span.className = `badge ${label}`;
  span.textContent = label;
  return span;
}

export function cell(row, text, title = '') {
  const td = document.createElement('td');
  td.textContent = text;
  if (title) td.title = title;
  row.append(td);
  return td;
}

export const plural = (count, one, many) => `${count} ${count === 1 ? one : many}`;

/**
 * The database's rulesets, newest first, with their labels; the one selected compared line by
 * line with the stable one (what would change if it were made stable), and made stable on
 * confirmation.
 */
export class RulesHistory {
  /**
   * @param {{ns: () => string | null, api: () => import('./api.js').Api,
   *   rulesChanged?: () => void}} context
   */
  constructor(context) {
    this.context = context;
    this.ns = null;
    /** The last `GET /.settings/rulesets.json` of `ns`. */
    this.history = null;
    this.selected = null;
    /** Sources by `ns id`: a ruleset never changes once created, so one read serves. */
    this.sources = new Map();
    this.loads = 0;
    this.shows = 0;
    $('history-load').addEventListener('click', () => this.load());
    $('history-rows').addEventListener('click', (event) => {
      const row = event.target.closest('tr');
      if (row?.dataset.id) this.select(row.dataset.id);
    });
    $('history-make-stable').addEventListener('click', () => this.makeStable());
  }

  status(text) {
    $('history-status').textContent = text;
  }

  error(text) {
    $('history-error').textContent = text;
  }

  /** Reads the history again; answers whether it could. */
  async load() {
    const ns = this.context.ns();
    if (!ns) return false;
    if (ns !== this.ns) {
      this.ns = ns;
      this.history = null;
      this.selected = null;
      this.draw();
    }
    const load = ++this.loads;
    this.error('');
    this.status('loading…');
    try {
      const history = await this.context.api().rulesets(ns);
      if (load !== this.loads) return false;
      history.rulesets ??= [];
      history.labels ??= {};
      history.releases ??= [];
      this.history = history;
      if (!history.rulesets.some((ruleset) => ruleset.id === this.selected)) this.selected = null;
      this.draw();
      const { stable } = history.labels;
      this.status(
        history.rulesets.length === 0
          ? `${ns} has no ruleset yet: the next save of its rules starts the history`
          : `${plural(history.rulesets.length, 'ruleset', 'rulesets')} of ${ns}; ${stable ? `ruleset ${stable} is stable` : 'none is stable'}`,
      );
      await this.show();
      return true;
    } catch (error) {
      if (load !== this.loads) return false;
      this.status('');
      this.error(error.message);
      return false;
    }
  }

  select(id) {
    this.selected = id;
    this.error('');
    this.markSelected();
    this.show();
  }

  markSelected() {
    for (const row of $('history-rows').children) row.classList.toggle('selected', row.dataset.id === this.selected);
  }

  draw() {
    const history = this.history;
    const labels = history?.labels ?? {};
    const rows = [...(history?.rulesets ?? [])].reverse().map((ruleset) => {
      const row = document.createElement('tr');
      row.dataset.id = ruleset.id;
      row.title = 'Compare with the stable ruleset';
      cell(row, ruleset.id);
      cell(row, localTime(ruleset.createdAt), ruleset.createdAt);
      cell(row, ruleset.by ?? '');
      const marks = cell(row, '');
      for (const label of ['stable', 'canary']) if (labels[label] === ruleset.id) marks.append(badge(label));
      return row;
    });
    $('history-rows').replaceChildren(...rows);
    this.markSelected();
    $('history-releases').replaceChildren(
      ...[...(history?.releases ?? [])].reverse().map((release) => {
        const row = document.createElement('tr');
        cell(row, localTime(release.at), release.at);
        cell(row, release.by ?? '');
        cell(row, release.stable ?? '');
        cell(row, release.canary ?? '');
        return row;
      }),
    );
    $('history-no-releases').hidden = (history?.releases ?? []).length > 0;
    if (!this.selected) $('history-detail').hidden = true;
  }

  async source(ns, id) {
    const key = `${ns} ${id}`;
    if (!this.sources.has(key)) this.sources.set(key, (await this.context.api().ruleset(ns, id)).source);
    return this.sources.get(key);
  }

  /** The selected ruleset against the stable one. */
  async show() {
    const { ns, history, selected: id } = this;
    const show = ++this.shows;
    if (!id || !history) {
      $('history-detail').hidden = true;
      return;
    }
    const ruleset = history.rulesets.find((entry) => entry.id === id);
    const { stable } = history.labels;
    $('history-detail').hidden = false;
    $('history-title').textContent = `Ruleset ${id}, created ${localTime(ruleset?.createdAt)} by ${ruleset?.by ?? 'unknown'}`;
    $('history-make-stable').hidden = id === stable;
    $('history-make-stable').textContent = `Make ruleset ${id} stable`;
    $('history-diff-note').textContent = 'reading…';
    $('history-diff').replaceChildren();
    try {
      const [source, stableSource] = await Promise.all([
        this.source(ns, id),
        stable && stable !== id ? this.source(ns, stable) : null,
      ]);
      if (show !== this.shows) return;
      this.drawDiff(id, stable, source, stableSource);
    } catch (error) {
      if (show !== this.shows) return;
      $('history-diff-note').textContent = '';
      this.error(error.message);
    }
  }

  drawDiff(id, stable, source, stableSource) {
    let note;
    let diff;
    if (stable === id) {
      note = `Ruleset ${id} is stable: its rules are in effect. Its text:`;
      diff = lineDiff(source, source) ?? [];
    } else {
      diff = lineDiff(stableSource ?? '', source);
      const from = stable ? `the stable ruleset ${stable}` : 'nothing (no ruleset is stable)';
      if (!diff) {
        note = `Ruleset ${id} and ${from} differ in too many lines to compare here.`;
        diff = [];
      } else {
        const { added, removed } = counts(diff);
        note =
          added + removed === 0
            ? `Ruleset ${id} has the same text as ${from}.`
            : `From ${from} to ruleset ${id}: ${plural(added, 'line', 'lines')} added (+), ${plural(removed, 'line', 'lines')} removed (-).`;
        diff = fold(diff);
      }
    }
    $('history-diff-note').textContent = note;
    $('history-diff').replaceChildren(
      ...diff.map((line) => {
        const div = document.createElement('div');
        div.className = { '+': 'added', '-': 'removed', '…': 'folded' }[line.op] ?? 'same';
        div.dataset.op = line.op;
        div.textContent = line.op === '…' ? `⋯ ${plural(line.count, 'unchanged line', 'unchanged lines')}` : `${line.op} ${line.text}`;
        return div;
      }),
    );
  }

  /** Moves `stable` to the selected ruleset (the canary stays), once confirmed. */
  async makeStable() {
    const { ns, history, selected: id } = this;
    if (!ns || !history || !id) return;
    const { stable, canary } = history.labels;
    const instead = stable ? `, in place of ruleset ${stable}` : '';
    if (!window.confirm(`Make ruleset ${id} stable? ${ns} uses its rules at once${instead}.`)) return;
    const button = $('history-make-stable');
    button.disabled = true;
    this.error('');
    this.status(`making ruleset ${id} stable…`);
    try {
      const labels = canary ? { stable: id, canary } : { stable: id };
      await this.context.api().setRulesetLabels(ns, labels);
      this.context.rulesChanged?.();
      if (await this.load()) this.status(`ruleset ${id} is stable; ${ns} uses its rules now`);
    } catch (error) {
      this.status('');
      this.error(error.message);
    } finally {
      button.disabled = false;
    }
  }
}

/** The database's settings, each saved as soon as it is changed. */
export class DatabaseSettings {
  /** @param {{ns: () => string | null, api: () => import('./api.js').Api}} context */
  constructor(context) {
    this.context = context;
    this.size = $('setting-write-size');
    this.strict = $('setting-strict');
    this.appCheck = $('setting-app-check');
    /** The quota fields, by the quota each holds. */
    this.quotas = [...document.querySelectorAll('[data-quota]')];
    /** What the server holds, to go back to when a change is refused. */
    this.values = {};
    this.loads = 0;
    this.size.addEventListener('change', () => this.save('defaultWriteSizeLimit', this.size.value));
    this.strict.addEventListener('change', () => this.save('strictTriggerValidation', this.strict.checked));
    this.appCheck.addEventListener('change', () => this.save('appCheck', this.appCheck.value));
    for (const input of this.quotas) {
      input.addEventListener('change', () => this.save('quotas', this.quotasEntered()));
    }
  }

  /** The quotas as the fields say: a whole number, or null for none. */
  quotasEntered() {
    const quotas = {};
    for (const input of this.quotas) {
      const text = input.value.trim();
      quotas[input.dataset.quota] = text === '' ? null : Number(text);
    }
    return quotas;
  }

  status(text, isError = false) {
    const line = $('settings-status');
    line.textContent = text;
    line.classList.toggle('error', isError);
  }

  enable(enabled) {
    this.size.disabled = !enabled;
    this.strict.disabled = !enabled;
    this.appCheck.disabled = !enabled;
    for (const input of this.quotas) input.disabled = !enabled;
  }

  show() {
    this.size.value = this.values.defaultWriteSizeLimit ?? '';
    this.strict.checked = this.values.strictTriggerValidation === true;
    this.appCheck.value = this.values.appCheck ?? '';
    for (const input of this.quotas) {
      const value = this.values.quotas?.[input.dataset.quota];
      input.value = value == null ? '' : String(value);
    }
  }

  async load() {
    const ns = this.context.ns();
    if (!ns) return;
    const load = ++this.loads;
    this.enable(false);
    this.status('loading…');
    try {
      const api = this.context.api();
      const [size, strict, appCheck, quotas] = await Promise.all([
        api.setting(ns, 'defaultWriteSizeLimit'),
        api.setting(ns, 'strictTriggerValidation'),
        api.setting(ns, 'appCheck'),
        api.setting(ns, 'quotas'),
      ]);
      if (load !== this.loads) return;
      this.values = { defaultWriteSizeLimit: size, strictTriggerValidation: strict, appCheck, quotas };
      this.show();
      this.status(`settings of ${ns}`);
      this.enable(true);
    } catch (error) {
      if (load !== this.loads) return;
      this.status(error.message, true);
    }
  }

  async save(name, value) {
    const ns = this.context.ns();
    if (!ns) return;
    const load = ++this.loads;
    this.enable(false);
    this.status(`saving ${name}…`);
    try {
      const now = await this.context.api().saveSetting(ns, name, value);
      if (load !== this.loads) return;
      this.values[name] = now;
      this.show();
      this.status(`${name} of ${ns} is ${JSON.stringify(now)} now`);
    } catch (error) {
      if (load !== this.loads) return;
      // The control goes back to what the server still holds.
      this.show();
      this.status(`${name} was not changed: ${error.message}`, true);
    } finally {
      if (load === this.loads) this.enable(true);
    }
  }
}
