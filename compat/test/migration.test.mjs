// docs/migrating-from-firebase.md, followed end to end on a small app: the project's
// firebase.json and database.rules.json as they come from a Firebase project, a database
// exported from Firebase with priorities (REST `format=export`, or `firebase database:get /
// --export`), imported into a running server with `hearth import`, then the app's official
// SDK with only its databaseURL changed: it reads the data, its queries by priority and by an
// indexed child work, and the project's rules refuse what they refused on Firebase.

import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { initializeApp, deleteApp } from 'firebase/app';
import { getDatabase, ref, get, set, query, orderByPriority, orderByChild, limitToLast } from 'firebase/database';
import { HearthServer } from '../lib/server.mjs';
import { withTimeout } from '../lib/util.mjs';

const ADMIN_TOKEN = 'a-migration-admin-token-of-this-test';
const NS = 'blog-prod';

// What a Firebase project directory holds.
const FIREBASE_JSON = { database: { rules: 'database.rules.json' } };
const RULES = {
  rules: {
    posts: { '.read': true, '.write': 'auth != null', '.indexOn': ['likes'] },
    users: { $uid: { '.read': 'auth != null && auth.uid === $uid', '.write': 'auth != null && auth.uid === $uid' } },
  },
};
// A database as Firebase exports it with priorities.
const EXPORT = {
  posts: {
    p1: { '.priority': 3, title: 'Third by priority', likes: 10 },
    p2: { '.priority': 1, title: 'First by priority', likes: 30 },
    p3: { '.priority': 2, title: 'Second by priority', likes: 20 },
  },
  users: { ada: { name: 'Ada', '.priority': 'a' } },
};

describe('migrating from Firebase (docs/migrating-from-firebase.md)', { timeout: 60_000 }, () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-migration-'));
  let server;
  let app;
  after(async () => {
    if (app) await deleteApp(app);
    if (server) await server.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('imports an export, serves it to the unchanged SDK, and applies the project rules', async () => {
    fs.writeFileSync(path.join(dir, 'firebase.json'), JSON.stringify(FIREBASE_JSON));
    fs.writeFileSync(path.join(dir, 'database.rules.json'), JSON.stringify(RULES));
    fs.writeFileSync(path.join(dir, 'export.json'), JSON.stringify(EXPORT));

    // Step 2 of the page: the server, with the project's rules and an admin token.
    server = await HearthServer.start({
      dev: false,
      extraArgs: ['--firebase-json', path.join(dir, 'firebase.json'), '--admin-token', ADMIN_TOKEN],
    });
    const url = `http://127.0.0.1:${server.port}`;

    // Step 3: the data.
    execFileSync(server.bin, ['import', '--quiet', '--url', url, '--ns', NS, '--admin-token', ADMIN_TOKEN,
      path.join(dir, 'export.json')], { stdio: ['ignore', 'ignore', 'pipe'] });

    // Step 4: the app, with only its databaseURL changed.
    app = initializeApp({ databaseURL: `${url}?ns=${NS}`, apiKey: 'unused', projectId: 'blog' }, 'migrated');
    const db = getDatabase(app);
    const posts = await withTimeout(get(ref(db, 'posts')), 10_000, 'reading posts');
    assert.deepEqual(Object.keys(posts.val()).sort(), ['p1', 'p2', 'p3']);

    const byPriority = await get(query(ref(db, 'posts'), orderByPriority()));
    const titles = [];
    byPriority.forEach((child) => { titles.push(child.val().title); });
    assert.deepEqual(titles, ['First by priority', 'Second by priority', 'Third by priority']);

    const mostLiked = await get(query(ref(db, 'posts'), orderByChild('likes'), limitToLast(1)));
    assert.deepEqual(Object.keys(mostLiked.val()), ['p2']);

    // The project's rules: nobody signed in may not write posts nor read a user.
    await assert.rejects(set(ref(db, 'posts/p4'), { title: 'spam' }), /permission_denied/i);
    await assert.rejects(get(ref(db, 'users/ada')), /permission/i);

    // An admin (the export's whole form, priorities included) sees exactly what was imported.
    const exported = execFileSync(server.bin, ['export', '--quiet', '--url', url, '--ns', NS,
      '--admin-token', ADMIN_TOKEN], { encoding: 'utf8' });
    assert.deepEqual(JSON.parse(exported), EXPORT);
  });
});
