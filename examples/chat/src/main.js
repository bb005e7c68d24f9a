// Hearth chat: an ordinary Firebase Realtime Database app. Only the block marked CONFIG knows
// where the database is; everything else is the plain modular `firebase` API.
//
// Page URL parameters: ?host=127.0.0.1&port=9000&ns=chat&user=alice&room=general
import { initializeApp } from 'firebase/app';
import {
  connectDatabaseEmulator,
  getDatabase,
  limitToLast,
  onDisconnect,
  onValue,
  orderByChild,
  push,
  query,
  ref,
  remove,
  runTransaction,
  serverTimestamp,
  set,
  update,
} from 'firebase/database';
import './style.css';

const params = new URLSearchParams(location.search);
const slug = (s, max = 32) =>
  String(s || '')
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, max);

// ---- CONFIG ------------------------------------------------------------------------------
const host = params.get('host') || location.hostname || '127.0.0.1';
const port = Number(params.get('port') || 9000);
const ns = params.get('ns') || 'chat';
const uid = slug(params.get('user')) || `guest-${Math.random().toString(36).slice(2, 7)}`;
const name = uid;

// What a production app would have; only databaseURL matters to the database SDK, and with
// the emulator connection below only its namespace (the "chat" in chat.firebaseio.com) is used.
const app = initializeApp({
  apiKey: 'demo-api-key',
  projectId: 'demo-hearth',
  databaseURL: `https://${ns}.firebaseio.com`,
});
const db = getDatabase(app);
// The one line that points the app at Hearth (the mock token is an unsigned emulator token
// that Hearth accepts in --dev mode; rules see it as auth.uid).
connectDatabaseEmulator(db, host, port, { mockUserToken: { sub: uid, user_id: uid, name } });
// ------------------------------------------------------------------------------------------

const $ = (id) => document.getElementById(id);
const els = {
  status: $('status'),
  errors: $('errors'),
  roomTitle: $('room-title'),
  rooms: $('rooms'),
  newRoom: $('new-room'),
  newRoomName: $('new-room-name'),
  members: $('members'),
  memberCount: $('member-count'),
  messages: $('messages'),
  typing: $('typing'),
  composer: $('composer'),
  input: $('input'),
  editing: $('editing'),
  cancelEdit: $('cancel-edit'),
};

// ---- errors --------------------------------------------------------------------------------
function showError(what, err) {
  const code = (err && err.code) || '';
  const refused = /permission[_ ]denied/i.test(`${code} ${err && err.message}`);
  const li = document.createElement('div');
  li.className = 'error';
  li.dataset.code = refused ? 'permission-denied' : code || 'error';
  const text = document.createElement('span');
  text.textContent = refused
    ? `The server refused this: ${what} (permission denied).`
    : `${what} failed: ${(err && err.message) || err}`;
  const close = document.createElement('button');
  close.type = 'button';
  close.title = 'Dismiss';
  close.textContent = '✕';
  close.onclick = () => li.remove();
  li.append(text, close);
  els.errors.append(li);
  while (els.errors.children.length > 5) els.errors.firstChild.remove();
  console.warn(`[chat] ${what}:`, err);
}

// ---- connection status ---------------------------------------------------------------------
let connected = false;
function renderStatus() {
  els.status.textContent = `${connected ? 'online' : 'offline'} · ${name} @ ${host}:${port}/${ns}`;
  els.status.className = `status ${connected ? 'online' : 'offline'}`;
  els.status.dataset.state = connected ? 'online' : 'offline';
}
renderStatus();

// ---- rooms ---------------------------------------------------------------------------------
let room = slug(params.get('room')) || 'general';
let roomsSeen = {};
let roomSubs = [];

onValue(
  ref(db, 'rooms'),
  (snap) => {
    roomsSeen = snap.val() || {};
    renderRooms();
  },
  (err) => showError('reading the room list', err),
);

function renderRooms() {
  const keys = new Set([...Object.keys(roomsSeen), room]);
  els.rooms.replaceChildren(
    ...[...keys].sort().map((key) => {
      const li = document.createElement('li');
      const a = document.createElement('a');
      a.href = roomURL(key);
      a.textContent = `# ${(roomsSeen[key] && roomsSeen[key].name) || key}`;
      a.dataset.room = key;
      if (key === room) a.className = 'current';
      a.onclick = (e) => {
        e.preventDefault();
        switchRoom(key);
      };
      li.append(a);
      return li;
    }),
  );
}

function roomURL(key) {
  const p = new URLSearchParams(location.search);
  p.set('room', key);
  return `?${p}`;
}

/** Create the room record if nobody has yet (a transaction, so two creators do not clash). */
function ensureRoom(key, title = key) {
  return runTransaction(ref(db, `rooms/${key}`), (current) =>
    current === null ? { name: title, createdBy: uid, createdAt: serverTimestamp() } : undefined,
  ).catch((err) => showError(`creating room #${key}`, err));
}

els.newRoom.addEventListener('submit', (e) => {
  e.preventDefault();
  const title = els.newRoomName.value.trim();
  const key = slug(title);
  if (!key) return;
  els.newRoomName.value = '';
  ensureRoom(key, title.slice(0, 40));
  switchRoom(key);
});

// ---- presence and typing -------------------------------------------------------------------
const presenceRef = (r = room) => ref(db, `presence/${r}/${uid}`);
const typingRef = (r = room) => ref(db, `typing/${r}/${uid}`);

function announcePresence() {
  const r = room;
  // Register the cleanup first, so the server removes us even if we vanish right after.
  Promise.all([onDisconnect(presenceRef(r)).remove(), onDisconnect(typingRef(r)).remove()])
    .then(() => set(presenceRef(r), { name, since: serverTimestamp() }))
    .catch((err) => showError(`joining #${r}`, err));
}

function leavePresence(r) {
  onDisconnect(presenceRef(r)).cancel();
  onDisconnect(typingRef(r)).cancel();
  remove(presenceRef(r)).catch((err) => showError(`leaving #${r}`, err));
  remove(typingRef(r)).catch(() => {});
}

onValue(ref(db, '.info/connected'), (snap) => {
  connected = snap.val() === true;
  renderStatus();
  if (connected) announcePresence(); // also after every reconnect
});

let typingSince = 0;
let typingTimer = null;
function stopTyping() {
  clearTimeout(typingTimer);
  typingTimer = null;
  if (typingSince) {
    typingSince = 0;
    remove(typingRef()).catch((err) => showError('clearing the typing indicator', err));
  }
}
els.input.addEventListener('input', () => {
  if (!els.input.value) return stopTyping();
  if (Date.now() - typingSince > 2000) {
    typingSince = Date.now();
    set(typingRef(), serverTimestamp()).catch((err) => showError('setting the typing indicator', err));
  }
  clearTimeout(typingTimer);
  typingTimer = setTimeout(stopTyping, 4000);
});

let members = {};
let typists = {};
function renderMembers() {
  const uids = Object.keys(members).sort();
  els.memberCount.textContent = `(${uids.length})`;
  els.members.replaceChildren(
    ...uids.map((u) => {
      const li = document.createElement('li');
      li.dataset.uid = u;
      li.textContent = members[u].name || u;
      if (u === uid) li.classList.add('me');
      if (typists[u]) {
        const t = document.createElement('span');
        t.className = 'typing-mark';
        t.textContent = '✎ typing';
        li.append(t);
      }
      return li;
    }),
  );
  const others = Object.keys(typists).filter((u) => u !== uid);
  const names = others.map((u) => (members[u] && members[u].name) || u);
  els.typing.textContent =
    names.length === 0 ? '' : names.length === 1 ? `${names[0]} is typing…` : `${names.join(', ')} are typing…`;
}

// ---- messages ------------------------------------------------------------------------------
let editing = null; // message id being edited

function renderMessages(list) {
  const atBottom = els.messages.scrollHeight - els.messages.scrollTop - els.messages.clientHeight < 40;
  if (list.length === 0) {
    const li = document.createElement('li');
    li.className = 'empty';
    li.textContent = `No messages in #${room} yet. Say hello!`;
    els.messages.replaceChildren(li);
    return;
  }
  els.messages.replaceChildren(
    ...list.map((m) => {
      const li = document.createElement('li');
      li.className = `msg${m.uid === uid ? ' mine' : ''}`;
      li.dataset.id = m.id;
      li.dataset.uid = m.uid;
      const meta = document.createElement('div');
      meta.className = 'meta';
      const author = document.createElement('span');
      author.className = 'author';
      author.textContent = m.name || m.uid;
      const time = document.createElement('time');
      if (typeof m.at === 'number') {
        time.dateTime = new Date(m.at).toISOString();
        time.textContent = new Date(m.at).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
      }
      if (m.editedAt) time.textContent += ' (edited)';
      // Edit / delete are offered on every message on purpose: the rules, not the UI, decide,
      // and a refused change shows up in the error bar.
      const actions = document.createElement('span');
      actions.className = 'actions';
      const edit = document.createElement('button');
      edit.type = 'button';
      edit.className = 'edit';
      edit.textContent = 'edit';
      edit.onclick = () => startEdit(m);
      const del = document.createElement('button');
      del.type = 'button';
      del.className = 'delete';
      del.textContent = 'delete';
      del.onclick = () =>
        remove(ref(db, `messages/${room}/${m.id}`)).catch((err) =>
          showError(`deleting ${m.name || m.uid}'s message`, err),
        );
      actions.append(edit, del);
      meta.append(author, time, actions);
      const text = document.createElement('div');
      text.className = 'text';
      text.textContent = m.text;
      li.append(meta, text);
      return li;
    }),
  );
  if (atBottom || list.some((m) => m.uid === uid)) els.messages.scrollTop = els.messages.scrollHeight;
}

function startEdit(m) {
  editing = m;
  els.editing.hidden = false;
  els.input.value = m.text;
  els.input.focus();
}
function stopEdit() {
  editing = null;
  els.editing.hidden = true;
}
els.cancelEdit.onclick = () => {
  stopEdit();
  els.input.value = '';
};

els.composer.addEventListener('submit', (e) => {
  e.preventDefault();
  const text = els.input.value.trim();
  if (!text) return;
  els.input.value = '';
  stopTyping();
  if (editing) {
    const m = editing;
    stopEdit();
    update(ref(db, `messages/${room}/${m.id}`), { text, editedAt: serverTimestamp() }).catch((err) =>
      showError(`editing ${m.name || m.uid}'s message`, err),
    );
    return;
  }
  if (!roomsSeen[room]) ensureRoom(room);
  push(ref(db, `messages/${room}`), { uid, name, text, at: serverTimestamp() }).catch((err) =>
    showError('sending your message', err),
  );
});

// ---- room switching ------------------------------------------------------------------------
function enterRoom(r) {
  room = r;
  document.title = `#${r} · Hearth chat`;
  els.roomTitle.textContent = `#${r}`;
  members = {};
  typists = {};
  renderRooms();
  renderMembers();
  const recent = query(ref(db, `messages/${r}`), orderByChild('at'), limitToLast(50));
  roomSubs = [
    onValue(
      recent,
      (snap) => {
        const list = [];
        snap.forEach((child) => {
          list.push({ id: child.key, ...child.val() });
        });
        renderMessages(list);
      },
      (err) => showError(`reading #${r}`, err),
    ),
    onValue(
      ref(db, `presence/${r}`),
      (snap) => {
        members = snap.val() || {};
        renderMembers();
      },
      (err) => showError(`reading who is in #${r}`, err),
    ),
    onValue(
      ref(db, `typing/${r}`),
      (snap) => {
        typists = snap.val() || {};
        renderMembers();
      },
      (err) => showError(`reading who is typing in #${r}`, err),
    ),
  ];
  if (connected) announcePresence();
}

function switchRoom(r) {
  if (r === room) return;
  stopTyping();
  stopEdit();
  roomSubs.forEach((unsubscribe) => unsubscribe());
  leavePresence(room);
  history.replaceState(null, '', roomURL(r));
  enterRoom(r);
}

ensureRoom(room);
enterRoom(room);

// For tests and the curious: the uid this page writes as.
window.hearthChat = { uid, ns, host, port, get room() { return room; } };
