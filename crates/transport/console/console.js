// The console's shell: signing in with the admin token (or `owner` on a --dev server), the
// list of databases, one SDK connection to the chosen database, and the tabs.

import { _addComponent, deleteApp, initializeApp } from 'firebase/app';
import { getDatabase, onValue, ref } from 'firebase/database';
import { Api, DEV_TOKEN, HttpError, cleanPath, forgetToken, saveToken, savedToken } from './api.js';
import { LiveTree } from './tree.js';
import { Editor } from './editor.js';
import { AuditTrail } from './audit.js';
import { TriggersPanel } from './triggers.js';
import { DatabaseSettings, RulesEditor, RulesHistory } from './rules.js';
import { MetricsPanel } from './charts-panel.js';
import { ProfilerPanel } from './profiler.js';

/** How often the database list is read again. */
const DATABASES_EVERY_MS = 5000;

const $ = (id) => document.getElementById(id);

const state = {
  api: null,
  ns: null,
  app: null,
  db: null,
  apps: 0,
  tab: 'data',
  databasesTimer: 0,
};

function tell(text, isError = false) {
  const bar = $('message');
  bar.textContent = text;
  bar.classList.toggle('error', isError);
}

/**
 * The SDK asks the `auth-internal` component of its app for the credential it sends as the
 * realtime `auth` request; Firebase Authentication registers one, and so does this console,
 * with the admin token. It works over ws:// and wss:// alike (the emulator path would force
 * ws://).
 */
function adminAuthComponent(token) {
  const auth = {
    getToken: async () => ({ accessToken: token }),
    getUid: () => null,
    addAuthTokenListener: () => {},
    removeAuthTokenListener: () => {},
  };
  return {
    name: 'auth-internal',
    type: 'PRIVATE',
    instantiationMode: 'LAZY',
    multipleInstances: false,
    serviceProps: {},
    onInstanceCreated: null,
    instanceFactory: () => auth,
  };
}

async function closeDatabase() {
  state.tree.stop();
  if (state.app) {
    const app = state.app;
    state.app = null;
    state.db = null;
    await deleteApp(app).catch(() => {});
  }
}

async function openDatabase(ns) {
  await closeDatabase();
  // A profile is of one database.
  state.profiler.stop();
  if (state.ns !== ns) {
    tell('');
    state.editor.reset();
  }
  state.ns = ns;
  location.hash = `ns=${encodeURIComponent(ns)}`;
  $('current-db').textContent = ns;
  $('no-db').hidden = true;
  $('data-view').hidden = false;
  state.apps += 1;
  const app = initializeApp(
    { databaseURL: `${location.protocol}//${location.host}?ns=${encodeURIComponent(ns)}` },
    `hearth-console-${state.apps}`,
  );
  _addComponent(app, adminAuthComponent(state.api.token));
  state.app = app;
  state.db = getDatabase(app);
  onValue(ref(state.db, '.info/connected'), (snapshot) => {
    if (state.app !== app) return;
    const online = snapshot.val() === true;
    $('status').dataset.state = online ? 'online' : 'offline';
    $('status').textContent = online ? 'live' : 'connecting…';
  });
  state.tree.watch(state.db, cleanPath($('watch-path').value));
  markSelectedDatabase();
  state.metrics.follow();
  if (state.tab === 'rules') state.rules.load();
  if (state.tab === 'history') state.history.load();
  if (state.tab === 'settings') state.settings.load();
  if (state.tab === 'audit') state.audit.load();
}

function markSelectedDatabase() {
  for (const row of $('database-rows').children) row.classList.toggle('selected', row.dataset.name === state.ns);
}

function formatBytes(bytes) {
  if (bytes >= 1 << 20) return `${(bytes / (1 << 20)).toFixed(1)} MiB`;
  if (bytes >= 1 << 10) return `${(bytes / (1 << 10)).toFixed(1)} KiB`;
  return `${bytes} B`;
}

async function refreshDatabases() {
  clearTimeout(state.databasesTimer);
  try {
    const databases = await state.api.databases();
    databases.sort((a, b) => a.name.localeCompare(b.name));
    $('database-rows').replaceChildren(
      ...databases.map((database) => {
        const row = document.createElement('tr');
        row.dataset.name = database.name;
        row.title = database.loaded ? 'loaded' : 'on disk only';
        for (const text of [database.name, formatBytes(database.bytes), database.clients, database.shard]) {
          const cell = document.createElement('td');
          cell.textContent = String(text);
          row.append(cell);
        }
        if (!database.loaded) row.classList.add('unloaded');
        return row;
      }),
    );
    markSelectedDatabase();
  } catch (error) {
    if (error instanceof HttpError && (error.status === 401 || error.status === 403)) return signOut(error.message);
    tell(`The database list could not be read: ${error.message}`, true);
  }
  state.databasesTimer = setTimeout(refreshDatabases, DATABASES_EVERY_MS);
}

function showTab(tab) {
  if (tab !== state.tab) {
    // What a tab said was about that tab.
    tell('');
    state.editor.clearStatus();
  }
  state.tab = tab;
  for (const button of document.querySelectorAll('.tabs button')) {
    button.setAttribute('aria-selected', String(button.dataset.tab === tab));
  }
  for (const name of ['data', 'rules', 'history', 'settings', 'audit', 'metrics', 'profiler', 'triggers']) $(`tab-${name}`).hidden = name !== tab;
  if (tab === 'rules') state.rules.load();
  if (tab === 'history') state.history.load();
  if (tab === 'settings') state.settings.load();
  if (tab === 'audit') state.audit.load();
  state.metrics.setVisible(tab === 'metrics');
  // Server-wide: read again every few seconds while shown, whichever database is open.
  state.triggers.setVisible(tab === 'triggers');
}

/** Admin tokens are checked with the database list, which only admins may read. */
async function tryToken(token) {
  const api = new Api(token);
  try {
    await api.databases();
    return api;
  } catch (error) {
    if (error instanceof HttpError && (error.status === 401 || error.status === 403)) return null;
    throw error;
  }
}

async function signIn(api) {
  state.api = api;
  $('login').hidden = true;
  $('app').hidden = false;
  $('sign-out').hidden = api.token === DEV_TOKEN;
  $('status').textContent = 'signed in';
  state.metrics.start();
  if (state.tab === 'triggers') state.triggers.setVisible(true);
  await refreshDatabases();
  const ns = new URLSearchParams(location.hash.slice(1)).get('ns');
  if (ns) await openDatabase(ns);
}

async function signOut(reason = '') {
  forgetToken();
  state.profiler.stop();
  state.triggers.stop();
  clearTimeout(state.databasesTimer);
  state.metrics.stop();
  await closeDatabase();
  state.api = null;
  $('app').hidden = true;
  $('login').hidden = false;
  $('sign-out').hidden = true;
  $('status').dataset.state = 'offline';
  $('status').textContent = 'signed out';
  $('login-error').textContent = reason;
}

async function start() {
  const context = {
    db: () => state.db,
    ns: () => state.ns,
    api: () => state.api,
    treeText: (path) => state.tree.textAt(path),
    // A save in the editor adds a ruleset; a rollback in the history changes the rules.
    rulesSaved: () => state.history.load(),
    rulesChanged: () => state.rules.load(),
  };
  state.editor = new Editor(context);
  state.rules = new RulesEditor(context);
  state.history = new RulesHistory(context);
  state.settings = new DatabaseSettings(context);
  state.audit = new AuditTrail(context);
  state.triggers = new TriggersPanel(context);
  state.metrics = new MetricsPanel($('charts'), $('metrics-note'), $('metrics-scope'), context);
  state.profiler = new ProfilerPanel(
    {
      start: $('profiler-start'),
      stop: $('profiler-stop'),
      status: $('profiler-status'),
      rows: $('profiler-rows'),
      unindexed: $('profiler-unindexed'),
    },
    context,
  );
  state.tree = new LiveTree($('tree'), {
    onSelect: (path) => state.editor.select(path),
    onData: () => state.editor.treeChanged(),
    onError: (error) => tell(`The listen failed: ${error.message}`, true),
    onNote: (text) => {
      $('tree-note').textContent = text;
    },
  });

  $('login-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    const token = $('token').value.trim();
    if (!token) return;
    try {
      const api = await tryToken(token);
      if (!api) {
        $('login-error').textContent = 'The server refused this token.';
        return;
      }
      saveToken(token);
      $('token').value = '';
      await signIn(api);
    } catch (error) {
      $('login-error').textContent = error.message;
    }
  });
  $('sign-out').addEventListener('click', () => signOut());
  $('refresh-dbs').addEventListener('click', () => refreshDatabases());
  $('database-rows').addEventListener('click', (event) => {
    const row = event.target.closest('tr');
    if (row) openDatabase(row.dataset.name);
  });
  $('open-db').addEventListener('submit', (event) => {
    event.preventDefault();
    const name = $('open-db-name').value.trim();
    if (name) openDatabase(name);
  });
  $('watch-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const path = cleanPath($('watch-path').value);
    $('watch-path').value = path;
    if (state.db) state.tree.watch(state.db, path);
  });
  for (const button of document.querySelectorAll('.tabs button')) {
    button.addEventListener('click', () => showTab(button.dataset.tab));
  }

  try {
    // A saved token first, then the development credential: a --dev server needs no sign-in.
    for (const token of [savedToken(), DEV_TOKEN]) {
      if (!token) continue;
      const api = await tryToken(token);
      if (api) return await signIn(api);
    }
  } catch (error) {
    $('login-error').textContent = `The server could not be reached: ${error.message}`;
  }
  await signOut($('login-error').textContent);
}

start();
