// The console's Triggers tab: the server's declared triggers (docs/triggers.md), server-wide:
// their counts and lag, their databases, and their dead letters sent again or dropped; and
// the declaration itself, read and saved (`/.admin/triggers/declaration`).

import { localMillis } from './audit.js';
import { cell, localTime, plural } from './rules.js';

const $ = (id) => document.getElementById(id);

/** How often the Triggers tab reads the triggers again while it is shown. */
export const TRIGGERS_EVERY_MS = 3000;

/** Dead letters shown of one trigger, at most (the server answers them all). */
export const DEAD_LETTERS_SHOWN = 200;

/** The columns of a trigger's row: the field of the status each shows, and its heading. */
const TRIGGER_COLUMNS = ['name', 'path', 'event', 'destination', 'delivered', 'failed', 'deadLetters', 'dropped', 'pending', 'lagSeconds'];

/** `google.firebase.database.ref.v1.written` -> `written`. */
export function eventWord(type) {
  const text = String(type ?? '');
  return text.startsWith('google.firebase.database.ref.v1.') ? text.slice('google.firebase.database.ref.v1.'.length) : text;
}

/** A URL as shown: a password or token in it (`nats://user:pass@host`) is not. */
export function shownUrl(url) {
  const text = String(url ?? '');
  return text.replace(/^([a-z][a-z0-9+.-]*:\/\/)([^/@]*)@/i, (_, scheme, credentials) => {
    const user = credentials.includes(':') ? credentials.slice(0, credentials.indexOf(':')) : '';
    return `${scheme}${user ? `${user}:` : ''}•••@`;
  });
}

/** Where a trigger delivers: `{http: URL}` or `{nats: URL, subject}`. */
export function destinationText(destination) {
  if (destination?.http != null) return shownUrl(destination.http);
  if (destination?.nats != null) return `${shownUrl(destination.nats)} → ${destination.subject ?? ''}`;
  return JSON.stringify(destination ?? null);
}

function table(headings, className = 'profile') {
  const element = document.createElement('table');
  element.className = className;
  const head = document.createElement('tr');
  for (const text of headings) {
    const th = document.createElement('th');
    th.textContent = text;
    head.append(th);
  }
  const thead = document.createElement('thead');
  thead.append(head);
  const body = document.createElement('tbody');
  element.append(thead, body);
  return { element, body };
}

function element(tag, className, text = '') {
  const made = document.createElement(tag);
  if (className) made.className = className;
  if (text) made.textContent = text;
  return made;
}

/**
 * The server's declared triggers (`GET /.admin/triggers`, docs/triggers.md), read again every
 * few seconds while the tab is shown: a row each with its figures; a row opened shows its
 * databases and its dead letters, which are sent again or dropped (on confirmation).
 */
export class TriggersPanel {
  /** @param {{api: () => import('./api.js').Api | null}} context */
  constructor(context) {
    this.context = context;
    this.visible = false;
    this.timer = 0;
    this.loads = 0;
    /** name -> the elements of its row and its detail. */
    this.shown = new Map();
    /** The names of the triggers whose detail is open. */
    this.open = new Set();
    /** The declaration was read into its editor, and not edited since. */
    this.declarationRead = false;
    this.declarationEdited = false;
    $('triggers-refresh').addEventListener('click', () => this.load());
    $('triggers-declaration-text').addEventListener('input', () => {
      this.declarationEdited = true;
      this.line($('triggers-declaration-error'), '');
    });
    // Read when opened (it shows the credentials the file holds), once: Reload reads again.
    $('triggers-declaration').addEventListener('toggle', () => {
      if ($('triggers-declaration').open && !this.declarationRead && !this.declarationEdited) this.loadDeclaration();
    });
    $('triggers-declaration-load').addEventListener('click', () => this.loadDeclaration());
    $('triggers-declaration-save').addEventListener('click', () => this.saveDeclaration());
  }

  /** Reads the declaration into its editor (over what was typed there). */
  async loadDeclaration() {
    const api = this.context.api();
    if (!api) return;
    const status = $('triggers-declaration-status');
    this.line($('triggers-declaration-error'), '');
    this.line(status, 'reading…');
    try {
      $('triggers-declaration-text').value = await api.triggersDeclaration();
      this.declarationRead = true;
      this.declarationEdited = false;
      this.line(status, `the server's declaration, read at ${localTime(new Date())}`);
    } catch (error) {
      this.line(status, '');
      this.line($('triggers-declaration-error'), `The declaration could not be read: ${error.message}`, true);
    }
  }

  /** Declares what the editor holds: the server checks it whole, writes its file and applies it. */
  async saveDeclaration() {
    const api = this.context.api();
    if (!api) return;
    const status = $('triggers-declaration-status');
    this.line($('triggers-declaration-error'), '');
    this.line(status, 'saving…');
    try {
      const declared = await api.declareTriggers($('triggers-declaration-text').value);
      this.declarationEdited = false;
      this.line(status, `saved at ${localTime(new Date())}: ${plural(declared, 'trigger', 'triggers')} declared`);
      this.load();
    } catch (error) {
      this.line(status, '');
      this.line($('triggers-declaration-error'), `Not saved: ${error.message}`, true);
    }
  }

  line(element, text, isError = false) {
    element.textContent = text;
    element.classList.toggle('error', isError);
  }

  /** Shown, the tab reads the triggers at once and then every few seconds; hidden, it stops. */
  setVisible(visible) {
    this.visible = visible;
    clearTimeout(this.timer);
    if (visible) this.load();
    else this.loads += 1;
  }

  stop() {
    this.setVisible(false);
  }

  /** Reads the triggers, and the dead letters of those open. */
  async load() {
    clearTimeout(this.timer);
    const api = this.context.api();
    if (!api) return;
    const load = ++this.loads;
    const status = $('triggers-status');
    try {
      const triggers = await api.triggers();
      const letters = new Map();
      await Promise.all(
        triggers
          .filter((trigger) => this.open.has(trigger.name))
          .map(async (trigger) => {
            letters.set(trigger.name, await api.deadLetters(trigger.name).catch((error) => error));
          }),
      );
      if (load !== this.loads) return;
      this.show(triggers, letters);
      this.line(
        status,
        triggers.length
          ? `${plural(triggers.length, 'trigger', 'triggers')}, read at ${localTime(new Date())}; read again every ${TRIGGERS_EVERY_MS / 1000} s`
          : `read at ${localTime(new Date())}`,
      );
    } catch (error) {
      if (load !== this.loads) return;
      this.line(status, `The triggers could not be read: ${error.message}`, true);
    } finally {
      if (load === this.loads && this.visible) this.timer = setTimeout(() => this.load(), TRIGGERS_EVERY_MS);
    }
  }

  show(triggers, letters) {
    $('triggers-none').hidden = triggers.length > 0;
    $('triggers-table').hidden = triggers.length === 0;
    const names = new Set(triggers.map((trigger) => String(trigger.name)));
    for (const [name, shown] of this.shown) {
      if (names.has(name)) continue;
      shown.row.remove();
      shown.detail.remove();
      this.shown.delete(name);
      this.open.delete(name);
    }
    const rows = $('triggers-rows');
    for (const trigger of triggers) {
      const name = String(trigger.name);
      const shown = this.shown.get(name) ?? this.made(name);
      this.fill(shown, trigger);
      if (letters.has(name)) this.fillLetters(shown, letters.get(name));
      // In the server's order.
      rows.append(shown.row, shown.detail);
    }
  }

  /** The row of trigger `name` and its detail (hidden until opened). */
  made(name) {
    const row = document.createElement('tr');
    row.className = 'trigger';
    row.dataset.name = name;
    const cells = {};
    for (const field of TRIGGER_COLUMNS) {
      const td = document.createElement('td');
      td.dataset.field = field;
      cells[field] = td;
      row.append(td);
    }
    const toggle = element('button', 'toggle');
    toggle.type = 'button';
    cells.name.append(toggle, element('span', 'trigger-name', name));

    const detail = document.createElement('tr');
    detail.className = 'trigger-detail';
    detail.dataset.name = name;
    const td = document.createElement('td');
    td.colSpan = TRIGGER_COLUMNS.length;
    detail.append(td);

    td.append(element('h4', '', 'Databases'));
    const databases = table(['database', 'pending', 'attempts', 'last error', 'retry in (ms)', 'following', 'taken / confirmed']);
    databases.element.classList.add('trigger-databases');
    const noDatabase = element('p', 'note', 'No database has had an event for this trigger yet.');
    td.append(databases.element, noDatabase);

    td.append(element('h4', '', 'Dead letters'));
    const buttons = element('div', 'buttons');
    const retry = element('button', 'trigger-retry', 'Send again');
    retry.type = 'button';
    retry.title = 'Every dead letter of this trigger goes back to the end of its database’s events';
    const drop = element('button', 'danger trigger-drop', 'Drop');
    drop.type = 'button';
    drop.title = 'Every dead letter of this trigger is deleted: its event is never delivered';
    const letterStatus = element('span', 'status-line trigger-letters-status');
    letterStatus.setAttribute('role', 'status');
    buttons.append(retry, drop, letterStatus);
    const dead = table(['database', 'id', 'attempts', 'error', 'when', 'ref']);
    dead.element.classList.add('trigger-dead');
    const noLetter = element('p', 'note trigger-no-letter', 'No dead letter.');
    const more = element('p', 'note trigger-more-letters');
    td.append(buttons, dead.element, noLetter, more);

    const shown = {
      name,
      row,
      detail,
      cells,
      toggle,
      databases: databases.body,
      databasesTable: databases.element,
      noDatabase,
      retry,
      drop,
      letterStatus,
      dead: dead.body,
      deadTable: dead.element,
      noLetter,
      more,
      /** How many dead letters the list shown holds (null: not read yet). */
      letters: null,
      /** Whether the last read of the dead letters failed (its status line says so). */
      unread: false,
      busy: false,
    };
    row.addEventListener('click', () => this.toggle(shown));
    retry.addEventListener('click', () => this.retry(shown));
    drop.addEventListener('click', () => this.drop(shown));
    this.shown.set(name, shown);
    this.opened(shown);
    // Nothing is said of the dead letters until they are read (once the row is opened).
    dead.element.hidden = true;
    noLetter.hidden = true;
    more.hidden = true;
    this.enableLetters(shown);
    return shown;
  }

  opened(shown) {
    const open = this.open.has(shown.name);
    shown.detail.hidden = !open;
    shown.row.classList.toggle('open', open);
    shown.toggle.textContent = open ? '▾' : '▸';
    shown.toggle.setAttribute('aria-expanded', String(open));
    shown.toggle.setAttribute('aria-label', open ? 'collapse' : 'expand');
  }

  toggle(shown) {
    if (this.open.has(shown.name)) this.open.delete(shown.name);
    else this.open.add(shown.name);
    this.opened(shown);
    if (this.open.has(shown.name)) this.load();
  }

  fill(shown, trigger) {
    const { cells } = shown;
    cells.path.textContent = String(trigger.path ?? '');
    cells.event.textContent = eventWord(trigger.event);
    cells.event.title = String(trigger.event ?? '');
    cells.destination.textContent = destinationText(trigger.destination);
    cells.destination.title = trigger.destination?.nats != null ? 'NATS JetStream → subject' : 'HTTP CloudEvents';
    for (const field of ['delivered', 'failed', 'deadLetters', 'dropped', 'pending']) {
      cells[field].textContent = String(trigger[field] ?? '');
    }
    cells.failed.title = `failed attempts; ${plural(trigger.maxAttempts, 'attempt', 'attempts')} at most per delivery`;
    cells.deadLetters.classList.toggle('alarm', Number(trigger.deadLetters) > 0);
    const lag = Number(trigger.lagSeconds);
    cells.lagSeconds.textContent = Number.isFinite(lag) ? lag.toFixed(1) : String(trigger.lagSeconds ?? '');
    cells.lagSeconds.title = 'the age of the oldest event not yet confirmed, in seconds';

    const databases = Array.isArray(trigger.databases) ? trigger.databases : [];
    shown.databases.replaceChildren(
      ...databases.map((database) => {
        const row = document.createElement('tr');
        row.dataset.database = String(database.database ?? '');
        cell(row, String(database.database ?? ''));
        cell(row, String(database.pending ?? ''));
        cell(row, String(database.attempts ?? ''));
        const error = cell(row, database.lastError == null ? '—' : String(database.lastError));
        error.classList.toggle('none', database.lastError == null);
        const retry = cell(row, database.retryInMs == null ? '—' : String(database.retryInMs));
        retry.classList.toggle('none', database.retryInMs == null);
        cell(row, database.following ? 'yes' : 'no', database.following ? 'this node keeps its events and the owner delivers them' : 'this node delivers its events');
        cell(row, `${database.lastTaken ?? ''} / ${database.lastConfirmed ?? ''}`, 'the last position taken into the outbox, and the last confirmed');
        return row;
      }),
    );
    shown.databasesTable.hidden = databases.length === 0;
    shown.noDatabase.hidden = databases.length > 0;
  }

  /** Shows the dead letters read (or the error that came instead). */
  fillLetters(shown, letters) {
    if (letters instanceof Error) {
      shown.unread = true;
      this.line(shown.letterStatus, `The dead letters could not be read: ${letters.message}`, true);
      return;
    }
    if (shown.unread) {
      shown.unread = false;
      this.line(shown.letterStatus, '');
    }
    const list = Array.isArray(letters) ? letters : [];
    shown.letters = list.length;
    shown.dead.replaceChildren(
      ...list.slice(0, DEAD_LETTERS_SHOWN).map((letter) => {
        const row = document.createElement('tr');
        row.dataset.id = String(letter.id ?? '');
        cell(row, String(letter.database ?? ''));
        cell(row, String(letter.id ?? ''), `position ${letter.seq ?? ''} in the outbox`);
        cell(row, String(letter.attempts ?? ''));
        cell(row, String(letter.error ?? ''));
        const exact = new Date(letter.deadAt);
        cell(row, localMillis(letter.deadAt), Number.isNaN(exact.getTime()) ? '' : exact.toISOString());
        const ref = letter.event && typeof letter.event === 'object' ? letter.event.ref : null;
        cell(row, ref == null ? '' : String(ref), letter.event == null ? '' : JSON.stringify(letter.event, null, 2));
        return row;
      }),
    );
    shown.deadTable.hidden = list.length === 0;
    shown.noLetter.hidden = list.length > 0;
    shown.more.hidden = list.length <= DEAD_LETTERS_SHOWN;
    shown.more.textContent = `The first ${DEAD_LETTERS_SHOWN} of ${list.length} dead letters are shown.`;
    this.enableLetters(shown);
  }

  enableLetters(shown) {
    const none = !shown.letters;
    shown.retry.disabled = shown.busy || none;
    shown.drop.disabled = shown.busy || none;
  }

  /** Sends every dead letter of the trigger again. */
  async retry(shown) {
    const api = this.context.api();
    if (!api) return;
    shown.busy = true;
    this.enableLetters(shown);
    this.line(shown.letterStatus, 'sending again…');
    try {
      const { retried, keptForOtherOwners: kept = 0 } = await api.retryDeadLetters(shown.name);
      this.line(
        shown.letterStatus,
        `${plural(retried, 'dead letter', 'dead letters')} sent again`
          + (kept ? `; ${kept} kept: their databases are owned by another node now` : ''),
      );
    } catch (error) {
      this.line(shown.letterStatus, error.message, true);
    } finally {
      shown.busy = false;
      this.enableLetters(shown);
    }
    await this.load();
  }

  /** Drops every dead letter of the trigger, once confirmed. */
  async drop(shown) {
    const api = this.context.api();
    if (!api) return;
    const what = plural(shown.letters ?? 0, 'dead letter', 'dead letters');
    if (!window.confirm(`Drop every dead letter of ${shown.name} (${what} shown)? Their events will never be delivered, and cannot be brought back.`)) return;
    shown.busy = true;
    this.enableLetters(shown);
    this.line(shown.letterStatus, 'dropping…');
    try {
      const dropped = await api.dropDeadLetters(shown.name);
      this.line(shown.letterStatus, `${plural(dropped, 'dead letter', 'dead letters')} dropped`);
    } catch (error) {
      this.line(shown.letterStatus, error.message, true);
    } finally {
      shown.busy = false;
      this.enableLetters(shown);
    }
    await this.load();
  }
}
