// Users' own Cloud Functions code on Hearth's changes: `firebase emulators:start --only
// database,functions` with Hearth as the suite's database emulator
// (DATABASE_EMULATOR_BINARY_PATH pointed at the launcher jar of scripts/emulator-jar), and an
// unmodified functions folder with v1 and v2 database triggers (firebase-functions and
// firebase-admin from npm, pinned below). Each function records what it saw (before, after,
// params) with the Admin SDK, which firebase-tools points at the database emulator: so a
// record proves the trigger's registration, its event's shape and the function's own write
// back to Hearth. Run: npm run test:functions-emulator.
//
// firebase-tools refuses to start a database emulator with a Java older than 21; where the
// machine has an older JDK (this repository's CI has 17), a `java` first on PATH says 21 to
// that check and runs the real one otherwise. The launcher itself runs on Java 11 and newer.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { hearthBinary } from '../lib/server.mjs';
import { FIREBASE_CLI, installFirebaseTools } from './install-firebase-tools.mjs';

const FUNCTIONS_VERSION = '7.4.0';
const ADMIN_VERSION = '13.10.0';
const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.join(HERE, '..', '..');
const ARTIFACTS = path.join(HERE, '..', '.artifacts');
const DEPS = path.join(ARTIFACTS, `functions-deps-${FUNCTIONS_VERSION}-${ADMIN_VERSION}`);
const PROJECT = 'demo-hearth';

/** firebase-functions and firebase-admin for the functions folder, installed once. */
function installFunctionDeps() {
  const mark = path.join(DEPS, 'installed');
  if (fs.existsSync(mark)) return;
  fs.rmSync(DEPS, { recursive: true, force: true });
  fs.mkdirSync(DEPS, { recursive: true });
  execFileSync('npm', ['install', '--no-save', '--no-audit', '--no-fund', '--loglevel=error',
    '--omit=optional', '--prefix', DEPS,
    `firebase-functions@${FUNCTIONS_VERSION}`, `firebase-admin@${ADMIN_VERSION}`], { stdio: 'inherit' });
  fs.writeFileSync(mark, `${new Date().toISOString()}\n`);
}

async function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** A `java` that passes firebase-tools' version check when the real one is older than 21. */
function javaShim(dir) {
  const real = execFileSync('sh', ['-c', 'command -v java'], { encoding: 'utf8' }).trim();
  const shim = path.join(dir, 'java');
  fs.writeFileSync(shim, `#!/bin/sh
for arg in "$@"; do
  if [ "$arg" = "-version" ]; then
    major=$("${real}" -version 2>&1 | sed -n 's/.*version "\\([0-9]*\\).*/\\1/p' | head -1)
    if [ "\${major:-0}" -lt 21 ]; then echo 'openjdk version "21.0.0" (shim over '"$major"')' >&2; exit 0; fi
  fi
done
exec "${real}" "$@"
`);
  fs.chmodSync(shim, 0o755);
}

const FUNCTIONS_SOURCE = `
const functions = require('firebase-functions/v1');
const { onValueWritten, onValueCreated, onValueDeleted } = require('firebase-functions/v2/database');
const admin = require('firebase-admin');
admin.initializeApp();

const record = (where, value) => admin.database().ref(where).set(value);

exports.v1write = functions.database.ref('/rooms/{room}/messages/{id}')
  .onWrite((change, context) => record(\`/seen/v1write/\${context.params.room}/\${context.params.id}\`, {
    before: change.before.val(), after: change.after.val(), type: context.eventType,
    authType: context.authType, uid: context.auth ? context.auth.uid : 'none',
  }));

exports.v1create = functions.database.ref('/rooms/{room}/messages/{id}')
  .onCreate((snap, context) => record(\`/seen/v1create/\${context.params.room}/\${context.params.id}\`, {
    value: snap.val(), path: snap.ref.toString().replace(/^.*?\\/\\/[^/]+/, '').split('?')[0],
  }));

exports.v2write = onValueWritten('/rooms/{room}/messages/{id}', (event) =>
  record(\`/seen/v2write/\${event.params.room}/\${event.params.id}\`, {
    before: event.data.before.val(), after: event.data.after.val(), ref: event.ref,
    authType: event.authType, authId: event.authId ?? 'none',
  }));

exports.v2create = onValueCreated('/rooms/{room}/messages/{id}', (event) =>
  record(\`/seen/v2create/\${event.params.room}/\${event.params.id}\`, { value: event.data.val() }));

exports.v2delete = onValueDeleted('/rooms/{room}/messages/{id}', (event) =>
  record(\`/seen/v2delete/\${event.params.room}/\${event.params.id}\`, { value: event.data.val() }));
`;

async function until(what, ms, probe) {
  const end = Date.now() + ms;
  let last;
  while (Date.now() < end) {
    last = await probe();
    if (last) return last;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`timed out waiting for ${what}: last saw ${JSON.stringify(last)}`);
}

/** A project folder with the functions above, its ports, and what firebase needs to run. */
async function makeProject() {
  installFirebaseTools();
  installFunctionDeps();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-functions-'));
  const bin = path.join(dir, 'bin');
  fs.mkdirSync(bin);
  javaShim(bin);
  const jar = path.join(dir, 'hearth-database-emulator.jar');
  execFileSync(path.join(ROOT, 'scripts', 'emulator-jar'), [jar], { stdio: 'inherit' });

  const project = path.join(dir, 'project');
  fs.mkdirSync(path.join(project, 'functions'), { recursive: true });
  fs.writeFileSync(path.join(project, 'functions', 'index.js'), FUNCTIONS_SOURCE);
  fs.writeFileSync(path.join(project, 'functions', 'package.json'), JSON.stringify({
    name: 'functions', main: 'index.js', engines: { node: process.versions.node.split('.')[0] },
    dependencies: { 'firebase-functions': FUNCTIONS_VERSION, 'firebase-admin': ADMIN_VERSION },
  }));
  fs.symlinkSync(path.join(DEPS, 'node_modules'), path.join(project, 'functions', 'node_modules'));
  const [db, functions, hub, logging] = [await freePort(), await freePort(), await freePort(), await freePort()];
  fs.writeFileSync(path.join(project, 'firebase.json'), JSON.stringify({
    functions: { source: 'functions' },
    database: {},
    emulators: {
      database: { port: db, host: '127.0.0.1' },
      functions: { port: functions, host: '127.0.0.1' },
      hub: { port: hub, host: '127.0.0.1' },
      logging: { port: logging, host: '127.0.0.1' },
      ui: { enabled: false },
    },
  }));
  const env = {
    ...process.env,
    PATH: `${bin}:${process.env.PATH}`,
    DATABASE_EMULATOR_BINARY_PATH: jar,
    HEARTH_BIN: hearthBinary(),
    XDG_CONFIG_HOME: path.join(dir, 'config'),
    FIREBASE_CLI_DISABLE_UPDATE_CHECK: 'true',
  };
  return { dir, project, db, env };
}

describe('Cloud Functions code on Hearth (firebase emulators, Hearth as the database emulator)', () => {
  it('runs v1 and v2 database triggers with their before, after and params', { timeout: 900_000 }, async () => {
    const { dir, project, db, env } = await makeProject();
    const suite = spawn(FIREBASE_CLI, ['emulators:start', '--only', 'database,functions', '--project', PROJECT], {
      cwd: project,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    suite.stdout.on('data', (d) => { output += d; });
    suite.stderr.on('data', (d) => { output += d; });
    const exited = new Promise((resolve) => suite.once('exit', (code, signal) => resolve({ code, signal })));
    const base = `http://127.0.0.1:${db}`;
    const owner = { authorization: 'Bearer owner' };
    const read = async (p) => {
      const response = await fetch(`${base}${p}.json?ns=${PROJECT}`, { headers: owner });
      return response.ok ? response.json() : null;
    };
    const write = async (method, p, value) => {
      const response = await fetch(`${base}${p}.json?ns=${PROJECT}`, {
        method, headers: owner, body: value === undefined ? undefined : JSON.stringify(value),
      });
      assert.equal(response.status, 200, `${method} ${p}: ${await response.text()}`);
    };
    try {
      // Every function registered its trigger (five, one request each).
      await until('the five triggers', 180_000, async () => {
        if (suite.exitCode !== null) throw new Error(`firebase exited:\n${output}`);
        try {
          const response = await fetch(`${base}/.settings/functionTriggers.json`, { headers: owner });
          const triggers = response.ok ? await response.json() : [];
          return triggers.length >= 5 && output.includes('All emulators ready') ? triggers : null;
        } catch {
          return null;
        }
      });

      await write('PUT', '/rooms/r1/messages/m1', { text: 'hello', by: 'ada' });
      await write('PATCH', '/rooms/r1/messages/m1', { text: 'hello again' });
      // A set that drops a child: the event's delta must say so, or the SDK keeps it.
      await write('PUT', '/rooms/r1/messages/m1', { text: 'replaced' });
      // A write above the pattern changes each message under it.
      await write('PATCH', '/rooms', { 'r2/messages/m2': { text: 'two' }, 'r2/messages/m3': { text: 'three' } });
      await write('DELETE', '/rooms/r2/messages/m3');
      // A signed-in user's write (the emulator's unsigned token): the functions see who.
      const token = (claims) => `${Buffer.from('{"alg":"none","typ":"JWT"}').toString('base64url')}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.`;
      const asAda = await fetch(`${base}/rooms/r3/messages/m4.json?ns=${PROJECT}`, {
        method: 'PUT', headers: { authorization: `Bearer ${token({ sub: 'ada', user_id: 'ada', iat: 1 })}` },
        body: JSON.stringify({ text: 'from ada' }),
      });
      assert.equal(asAda.status, 200, await asAda.text());

      const seen = await until('every function\'s record', 120_000, async () => {
        const all = await read('/seen');
        const done = all?.v1write?.r2?.m3 && all?.v2write?.r2?.m3?.after === undefined
          && all?.v2delete?.r2?.m3 && all?.v1write?.r1?.m1?.after?.text === 'replaced'
          && all?.v2write?.r1?.m1?.after?.text === 'replaced' && all?.v1create?.r2?.m2
          && all?.v2create?.r2?.m3 && all?.v1write?.r3?.m4 && all?.v2write?.r3?.m4;
        return done ? all : null;
      });

      // The SDK names the legacy event type it was given in its newer form.
      assert.deepEqual(seen.v1write.r1.m1, {
        before: { text: 'hello again', by: 'ada' },
        after: { text: 'replaced' },
        type: 'google.firebase.database.ref.write',
        authType: 'ADMIN',
        uid: 'none',
      });
      assert.deepEqual(seen.v2write.r1.m1, {
        before: { text: 'hello again', by: 'ada' },
        after: { text: 'replaced' },
        ref: 'rooms/r1/messages/m1',
        authType: 'admin',
        authId: 'none',
      });
      assert.deepEqual(seen.v1create.r1.m1, { value: { text: 'hello', by: 'ada' }, path: '/rooms/r1/messages/m1' });
      assert.deepEqual(seen.v1create.r2.m2, { value: { text: 'two' }, path: '/rooms/r2/messages/m2' });
      assert.deepEqual(seen.v2create.r2.m3, { value: { text: 'three' } });
      // The delete: before is the message, after is nothing (absent from the record).
      assert.deepEqual(seen.v1write.r2.m3, {
        before: { text: 'three' }, type: 'google.firebase.database.ref.write', authType: 'ADMIN', uid: 'none',
      });
      assert.deepEqual(seen.v2write.r2.m3, {
        before: { text: 'three' }, ref: 'rooms/r2/messages/m3', authType: 'admin', authId: 'none',
      });
      assert.deepEqual(seen.v1write.r3.m4, {
        after: { text: 'from ada' }, type: 'google.firebase.database.ref.write', authType: 'USER', uid: 'ada',
      });
      assert.deepEqual(seen.v2write.r3.m4, {
        after: { text: 'from ada' }, ref: 'rooms/r3/messages/m4', authType: 'app_user', authId: 'ada',
      });
      assert.deepEqual(seen.v2delete.r2.m3, { value: { text: 'three' } });
      // Operators see it: every event so far delivered, none failed or dropped.
      const metrics = await (await fetch(`${base}/metrics`, { headers: owner })).text();
      const outcome = (name) => Number(metrics.match(new RegExp(`hearth_trigger_events_total\\{outcome="${name}"\\} (\\d+)`))?.[1]);
      assert.ok(outcome('delivered') >= 20, metrics);
      assert.equal(outcome('failed'), 0);
      assert.equal(outcome('dropped'), 0);
      assert.match(metrics, /hearth_triggers_registered 5/);
      // An update is no creation: the first message was created once.
      assert.equal(Object.keys(seen.v2create.r1 ?? {}).length, 1);
    } finally {
      suite.kill('SIGINT');
      const end = await Promise.race([exited, new Promise((r) => setTimeout(() => r(null), 30_000))]);
      if (end === null) suite.kill('SIGKILL');
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('exports its databases on exit and imports them without triggering', { timeout: 900_000 }, async () => {
    const { dir, project, db, env } = await makeProject();
    const exported = path.join(dir, 'exported');
    const base = `http://127.0.0.1:${db}`;
    try {
      const writer = path.join(dir, 'write.mjs');
      fs.writeFileSync(writer, `
        const put = (ns, value) => fetch('${base}/rooms.json?ns=' + ns, {
          method: 'PUT', headers: { authorization: 'Bearer owner' }, body: JSON.stringify(value),
        }).then((r) => { if (r.status !== 200) throw new Error('PUT ' + r.status); });
        await put('${PROJECT}', { r1: { messages: { m1: { text: 'kept' } } } });
        await put('other-db', { r9: { messages: { m9: { text: 'also kept' } } } });
      `);
      const firebase = (args) => spawnSync(FIREBASE_CLI, [...args, '--project', PROJECT], {
        cwd: project, env, encoding: 'utf8', timeout: 300_000,
      });
      const first = firebase(['emulators:exec', '--only', 'database', '--export-on-exit', exported, `node ${writer}`]);
      assert.equal(first.status, 0, `${first.stdout}\n${first.stderr}`);
      const file = (ns) => JSON.parse(fs.readFileSync(path.join(exported, 'database_export', `${ns}.json`), 'utf8'));
      assert.deepEqual(file(PROJECT), { rooms: { r1: { messages: { m1: { text: 'kept' } } } } });
      assert.deepEqual(file('other-db'), { rooms: { r9: { messages: { m9: { text: 'also kept' } } } } });

      const checker = path.join(dir, 'check.mjs');
      fs.writeFileSync(checker, `
        const get = (ns, p) => fetch('${base}' + p + '.json?ns=' + ns, { headers: { authorization: 'Bearer owner' } }).then((r) => r.json());
        const rooms = await get('${PROJECT}', '/rooms');
        if (rooms?.r1?.messages?.m1?.text !== 'kept') throw new Error('not imported: ' + JSON.stringify(rooms));
        // Time for a trigger to have run, had the import fired one.
        await new Promise((r) => setTimeout(r, 3000));
        const seen = await get('${PROJECT}', '/seen');
        if (seen !== null) throw new Error('the import triggered functions: ' + JSON.stringify(seen));
      `);
      const second = firebase(['emulators:exec', '--only', 'database,functions', '--import', exported, `node ${checker}`]);
      assert.equal(second.status, 0, `${second.stdout}\n${second.stderr}`);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
