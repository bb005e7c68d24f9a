// `firebase database:set` and `database:get` of firebase-tools (the Firebase CLI) against Hearth
// through FIREBASE_DATABASE_EMULATOR_HOST, as a project using the emulator runs them.
//
// firebase-tools is installed on first use into .artifacts/firebase-tools-<version> (npm
// registry, about a minute, reused afterwards: tools/install-firebase-tools.mjs, which
// scripts/test starts in the background early), not as a dependency of the suite: it is
// large and only this file needs it. Run: npm run test:firebase-tools.
//
// Two quirks of firebase-tools 15 shape the test, not Hearth:
// * It asks for a signed-in account before any database command, even against an emulator,
//   and then talks to the emulator with the token `owner`. A fake account in a private
//   configuration directory stands for `firebase login`; its token is never sent anywhere
//   that answers (the machine has no route to Google, and the CLI goes on without it).
// * It builds the emulator's URL with `new URL(host)`, which fails for `127.0.0.1:PORT` and
//   works for `localhost:PORT`; and `database:get` drops the `?ns=` of `--instance`, so it
//   reads the server's default namespace (`default` in Hearth) whatever instance is named.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { useHearth } from '../lib/harness.mjs';
import { withTimeout } from '../lib/util.mjs';
import { FIREBASE_CLI as CLI, installFirebaseTools } from './install-firebase-tools.mjs';

/** A configuration directory holding a signed-in account, as `firebase login` leaves it. */
function fakeLogin() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-firebase-tools-'));
  fs.mkdirSync(path.join(dir, 'configstore'));
  fs.writeFileSync(path.join(dir, 'configstore', 'firebase-tools.json'), JSON.stringify({
    user: { email: 'hearth-test@example.com' },
    tokens: { access_token: 'not-a-token', refresh_token: 'not-a-token', expires_at: 4102444800000 },
  }));
  return dir;
}

describe('firebase-tools database commands', () => {
  const h = useHearth();

  function firebase(config, args, input) {
    const run = spawnSync(CLI, [...args, '--project', 'demo-hearth', '--non-interactive'], {
      input,
      encoding: 'utf8',
      timeout: 120_000,
      env: {
        ...process.env,
        XDG_CONFIG_HOME: config,
        FIREBASE_DATABASE_EMULATOR_HOST: `localhost:${h.port}`,
        FIREBASE_CLI_DISABLE_UPDATE_CHECK: 'true',
      },
    });
    assert.equal(run.status, 0, `firebase ${args.join(' ')}:\n${run.stdout}\n${run.stderr}`);
    return run.stdout;
  }

  /**
   * Runs a command that takes time (the profiler) without blocking the test's own requests.
   * The profiler warns that it "does not support running against the Database Emulator" and
   * asks whether to go on, whatever `--non-interactive` or `--force` say (its prompt takes
   * neither): it is answered `y`, as a user would.
   */
  function firebaseLater(config, args) {
    const child = spawn(CLI, [...args, '--project', 'demo-hearth'], {
      env: {
        ...process.env,
        XDG_CONFIG_HOME: config,
        FIREBASE_DATABASE_EMULATOR_HOST: `localhost:${h.port}`,
        FIREBASE_CLI_DISABLE_UPDATE_CHECK: 'true',
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    h.defer(() => child.kill('SIGKILL'));
    let output = '';
    let answered = false;
    const read = (chunk) => {
      output += chunk;
      if (!answered && /Do you want to continue/.test(output)) {
        answered = true;
        child.stdin.end('y\n');
      }
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    return new Promise((resolve) => child.on('exit', (code) => resolve({ code, output })));
  }

  /** Event streams open on the server (the profiler is one), from its metrics. */
  async function openStreams() {
    const m = await (await fetch(`http://127.0.0.1:${h.port}/metrics`, { headers: { authorization: 'Bearer owner' } })).text();
    return [...m.matchAll(/^hearth_event_streams(?:\{[^}]*\})? (\d+)/gm)].reduce((sum, x) => sum + Number(x[1]), 0);
  }

  async function rest(ns, p) {
    const response = await fetch(`http://127.0.0.1:${h.port}${p}.json?ns=${ns}`);
    assert.equal(response.status, 200);
    return response.json();
  }

  it('sets and gets data', { timeout: 900_000 }, async () => {
    installFirebaseTools();
    const config = fakeLogin();
    try {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-firebase-tools-data-'));
      const file = path.join(dir, 'value.json');
      const value = { a: 1, b: { c: 'x' }, n: 9007199254740991, list: [1, 2] };
      fs.writeFileSync(file, JSON.stringify(value));

      // database:set keeps ?ns= of --instance: the data lands in that database.
      const said = firebase(config, ['database:set', '/t', file, '--instance', 'demo-other', '-f']);
      assert.match(said, /Data persisted successfully/);
      assert.deepEqual(await rest('demo-other', '/t'), value);

      firebase(config, ['database:set', '/t', file, '--instance', 'default', '-f']);
      assert.deepEqual(await rest('default', '/t'), value);
      const out = firebase(config, ['database:get', '/t', '--instance', 'default']);
      assert.deepEqual(JSON.parse(out.slice(out.indexOf('{'))), value);
      const shallow = firebase(config, ['database:get', '/t', '--instance', 'default', '--shallow']);
      assert.deepEqual(JSON.parse(shallow.slice(shallow.indexOf('{'))), { a: true, b: true, n: true, list: true });
    } finally {
      fs.rmSync(config, { recursive: true, force: true });
    }
  });

  it('profiles the database: database:profile reports its reads, writes and unindexed queries', { timeout: 900_000 }, async () => {
    installFirebaseTools();
    const config = fakeLogin();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-firebase-tools-profile-'));
    try {
      const report = path.join(dir, 'report.txt');
      const raw = path.join(dir, 'raw.json');
      const before = await openStreams();
      const text = firebaseLater(config, ['database:profile', '--duration', '20', '-o', report, '--instance', 'default']);
      const lines = firebaseLater(config, ['database:profile', '--duration', '20', '--raw', '-o', raw, '--instance', 'default']);
      // Both profilers are open before anything is done, and record for 20 s: what follows
      // takes a fraction of that even on a busy machine, and they end by themselves.
      await withTimeout((async () => {
        while ((await openStreams()) < before + 2) await new Promise((r) => setTimeout(r, 50));
      })(), 60_000, 'the profilers to connect');
      const base = `http://127.0.0.1:${h.port}`;
      const owner = { authorization: 'Bearer owner' };
      await fetch(`${base}/profiled/scores.json?ns=default`, { method: 'PUT', headers: owner, body: JSON.stringify({ a: { score: 3 }, b: { score: 1 } }) });
      await fetch(`${base}/profiled/scores.json?ns=default`, { method: 'PATCH', headers: owner, body: '{"c":{"score":2}}' });
      await fetch(`${base}/profiled/scores.json?ns=default`, { headers: owner });
      // A realtime client (the Admin SDK): a connect, a listen ordered by a child no .indexOn
      // declares, a write it hears and an unlisten.
      const client = h.admin('default');
      const query = client.ref('profiled/scores').orderByChild('score').limitToFirst(2);
      const seen = new Promise((resolve) => query.on('value', (snap) => { if (snap.exists()) resolve(); }));
      await seen;
      await client.ref('profiled/scores/d').set({ score: 0 });
      query.off();
      const [textRun, rawRun] = await Promise.all([text, lines]);
      assert.equal(textRun.code, 0, textRun.output);
      assert.equal(rawRun.code, 0, rawRun.output);
      const records = fs.readFileSync(raw, 'utf8').trim().split('\n').map((line) => JSON.parse(line));
      const names = new Set(records.map((r) => r.name));
      for (const name of ['rest-write', 'rest-update', 'rest-read', 'concurrent-connect', 'listener-listen', 'realtime-write', 'listener-broadcast']) {
        assert.ok(names.has(name), `${name} in ${[...names]}`);
      }
      const write = records.find((r) => r.name === 'rest-write');
      assert.deepEqual(write.path, ['profiled', 'scores']);
      assert.equal(write.allowed, true);
      assert.ok(write.bytes > 0 && typeof write.millis === 'number' && write.timestamp > 0, JSON.stringify(write));
      const listen = records.find((r) => r.name === 'listener-listen');
      assert.equal(listen.unIndexed, true, JSON.stringify(listen));
      assert.deepEqual(listen.querySet[0].index, { path: ['score'] });
      const said = fs.readFileSync(report, 'utf8');
      assert.match(said, /Speed Report/);
      assert.match(said, /\/profiled\/scores/);
      // The unindexed query's row: its path and the index that would serve it.
      assert.match(said, /Unindexed Queries[\s\S]*\/profiled\/scores[\s\S]*\/score/);
    } finally {
      fs.rmSync(config, { recursive: true, force: true });
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
