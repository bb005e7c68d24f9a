// The database commands of firebase-tools (the Firebase CLI) against Hearth: `database:set` and
// `database:get` through FIREBASE_DATABASE_EMULATOR_HOST, as a project using the emulator runs
// them; `database:profile`; `database:settings:get|set`; and the ruleset history
// (`database:rules:stage|list|get|release|canary`) through FIREBASE_REALTIME_URL and
// FIREBASE_RTDB_METADATA_URL, as a project runs them against its own database.
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
   * Starts a command without blocking the test's own requests; resolves with its exit code and
   * everything it printed. A command that warns that it "does not support running against the
   * Database Emulator" asks whether to go on, whatever `--non-interactive` or `--force` say
   * (its prompt takes neither): it is answered `y`, as a user would.
   */
  function answering(args, env, cwd) {
    const child = spawn(CLI, [...args, '--project', 'demo-hearth'], {
      cwd,
      env: { ...process.env, FIREBASE_CLI_DISABLE_UPDATE_CHECK: 'true', ...env },
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
    if (!env.FIREBASE_DATABASE_EMULATOR_HOST) child.stdin.end();
    return new Promise((resolve) => child.on('exit', (code) => resolve({ code, output })));
  }

  /** The profiler, which takes time, through the emulator variable. */
  function firebaseLater(config, args) {
    return answering(args, { XDG_CONFIG_HOME: config, FIREBASE_DATABASE_EMULATOR_HOST: `localhost:${h.port}` });
  }

  /**
   * Runs a command of the settings and ruleset history against Hearth as a project would run
   * it against its own database: the CLI reaches `<instance>.<FIREBASE_REALTIME_URL's host>`
   * (here `<instance>.hearth.localhost`, answered by localhost-names.cjs) and the metadata API
   * at FIREBASE_RTDB_METADATA_URL. The settings commands find the database's URL through the
   * emulator variable (the management API is out of reach), and so warn and ask, as the
   * profiler does.
   */
  function firebaseAgainst(config, args, { cwd, emulator = false } = {}) {
    const env = {
      XDG_CONFIG_HOME: config,
      FIREBASE_REALTIME_URL: `http://hearth.localhost:${h.port}`,
      FIREBASE_RTDB_METADATA_URL: `http://localhost:${h.port}`,
      // The ruleset commands are behind the CLI's `rtdbrules` experiment.
      FIREBASE_CLI_EXPERIMENTS: 'rtdbrules',
      NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --require ${path.join(import.meta.dirname, 'localhost-names.cjs')}`,
    };
    if (emulator) env.FIREBASE_DATABASE_EMULATOR_HOST = `localhost:${h.port}`;
    return withTimeout(answering(args, env, cwd), 120_000, `firebase ${args.join(' ')}`);
  }

  async function ok(config, args, options) {
    const run = await firebaseAgainst(config, args, options);
    assert.equal(run.code, 0, `firebase ${args.join(' ')}:\n${run.output}`);
    return run.output;
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
      const base = `http://127.0.0.1:${h.port}`;
      const owner = { authorization: 'Bearer owner' };
      const profile = async () => {
        const before = await openStreams();
        const text = firebaseLater(config, ['database:profile', '--duration', '20', '-o', report, '--instance', 'default']);
        const lines = firebaseLater(config, ['database:profile', '--duration', '20', '--raw', '-o', raw, '--instance', 'default']);
        // Both profilers are open before anything is done, and record for 20 s: what follows
        // takes a fraction of that even on a busy machine, and they end by themselves.
        await withTimeout((async () => {
          while ((await openStreams()) < before + 2) await new Promise((r) => setTimeout(r, 50));
        })(), 60_000, 'the profilers to connect');
        await fetch(`${base}/profiled/scores.json?ns=default`, { method: 'PUT', headers: owner, body: JSON.stringify({ a: { score: 3 }, b: { score: 1 } }) });
        await fetch(`${base}/profiled/scores.json?ns=default`, { method: 'PATCH', headers: owner, body: '{"c":{"score":2}}' });
        await fetch(`${base}/profiled/scores.json?ns=default`, { headers: owner });
        // A realtime client (the Admin SDK): a connect, a listen ordered by a child no
        // .indexOn declares, a write it hears and an unlisten.
        const client = h.admin('default');
        const query = client.ref('profiled/scores').orderByChild('score').limitToFirst(2);
        const seen = new Promise((resolve) => query.on('value', (snap) => { if (snap.exists()) resolve(); }));
        await seen;
        await client.ref('profiled/scores/d').set({ score: 0 });
        query.off();
        return Promise.all([text, lines]);
      };
      // firebase-tools ends a profile by aborting its request and treats the abort as an error
      // when Node's fetch reports it before the CLI looked (it checks an `e.type` that Node's
      // AbortError lacks): the run exits with 2 and that message, whatever the server did. A
      // run that failed that way, and only that way, is profiled again, once.
      const cliAbort = (run) => run.code !== 0 && /Unexpected error from response stream: This operation was aborted/.test(run.output);
      let [textRun, rawRun] = await profile();
      if (cliAbort(textRun) || cliAbort(rawRun)) [textRun, rawRun] = await profile();
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

  it('keeps a ruleset history: database:rules:stage, list, get, release, canary, and a rollback by release', { timeout: 900_000 }, async () => {
    installFirebaseTools();
    const config = fakeLogin();
    const project = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-firebase-tools-rules-'));
    try {
      const ns = 'demo-rules';
      fs.writeFileSync(path.join(project, 'firebase.json'), JSON.stringify({ database: { rules: 'rules.json' } }));
      const rules = (read) => fs.writeFileSync(path.join(project, 'rules.json'), JSON.stringify({ rules: { '.read': read, '.write': false } }, null, 2));
      const base = `http://127.0.0.1:${h.port}`;
      const owner = { authorization: 'Bearer owner' };
      await fetch(`${base}/doc.json?ns=${ns}`, { method: 'PUT', headers: owner, body: '{"a":1}' });
      const anonymousRead = async () => (await fetch(`${base}/doc.json?ns=${ns}`)).status;

      rules(true);
      assert.match(await ok(config, ['database:rules:stage', '--instance', ns], { cwd: project }), /staged ruleset 1/);
      rules(false);
      assert.match(await ok(config, ['database:rules:stage', '--instance', ns], { cwd: project }), /staged ruleset 2/);
      // Staged is not in effect: the database's rules are still the server's default.
      let labels = await (await fetch(`${base}/.settings/ruleset_labels.json?ns=${ns}`, { headers: owner })).json();
      assert.deepEqual(labels, {});

      const listed = await ok(config, ['database:rules:list', '--instance', ns]);
      assert.match(listed, /^1 {2}\d{4}-\d\d-\d\dT[\d:.]+Z/m);
      assert.match(listed, /^2 {2}/m);
      const got = await ok(config, ['database:rules:get', '1', '--instance', ns]);
      assert.match(got, /Ruleset 1 was created at \d{4}-/);
      assert.match(got, /"\.read": true/);

      await ok(config, ['database:rules:release', '1', '--instance', ns]);
      assert.equal(await anonymousRead(), 200, 'ruleset 1 lets anyone read');
      await ok(config, ['database:rules:canary', '2', '--instance', ns]);
      labels = await (await fetch(`${base}/.settings/ruleset_labels.json?ns=${ns}`, { headers: owner })).json();
      assert.deepEqual(labels, { stable: '1', canary: '2' });
      assert.equal(await anonymousRead(), 200, 'a canary is not served');
      await ok(config, ['database:rules:release', '2', '--instance', ns]);
      assert.equal(await anonymousRead(), 401, 'ruleset 2 refuses anonymous reads');
      const afterRelease = await ok(config, ['database:rules:list', '--instance', ns]);
      assert.match(afterRelease, /^2 {2}\S+ {2}stable,canary$/m);
      // The rollback: the earlier ruleset released again, in one command.
      await ok(config, ['database:rules:release', '1', '--instance', ns]);
      assert.equal(await anonymousRead(), 200);
      assert.equal(await (await fetch(`${base}/.settings/rules.json?ns=${ns}`, { headers: owner })).text(), JSON.stringify({ rules: { '.read': true, '.write': false } }, null, 2));
      const history = await (await fetch(`${base}/.settings/rulesets.json?ns=${ns}`, { headers: owner })).json();
      assert.deepEqual(history.releases.map((r) => [r.stable, r.canary ?? null]), [['1', null], ['1', '2'], ['2', '2'], ['1', '2']]);

      // Refusals the CLI shows as they are: an unknown ruleset, and a document that does not compile.
      const unknown = await firebaseAgainst(config, ['database:rules:release', '9', '--instance', ns]);
      assert.notEqual(unknown.code, 0);
      assert.match(unknown.output, /no ruleset 9/);
      fs.writeFileSync(path.join(project, 'rules.json'), '{"rules": {".read": "auth.uid =="}}');
      const broken = await firebaseAgainst(config, ['database:rules:stage', '--instance', ns], { cwd: project });
      assert.notEqual(broken.code, 0);
      assert.match(broken.output, /line 1, column/);
    } finally {
      fs.rmSync(config, { recursive: true, force: true });
      fs.rmSync(project, { recursive: true, force: true });
    }
  });

  it('reads and sets the settings: database:settings:get and database:settings:set', { timeout: 900_000 }, async () => {
    installFirebaseTools();
    const config = fakeLogin();
    try {
      // The CLI drops the instance's ?ns= and names it in the host only when FIREBASE_REALTIME_URL
      // is production's: against a custom URL it reaches the server's default database.
      const settings = (args) => ok(config, [...args, '--instance', 'default'], { emulator: true });
      assert.match(await settings(['database:settings:get', 'defaultWriteSizeLimit']), /defaultWriteSizeLimit = unlimited/);
      assert.match(await settings(['database:settings:get', 'strictTriggerValidation']), /strictTriggerValidation = true/);
      await settings(['database:settings:set', 'defaultWriteSizeLimit', 'small']);
      await settings(['database:settings:set', 'strictTriggerValidation', 'false']);
      assert.match(await settings(['database:settings:get', 'defaultWriteSizeLimit']), /defaultWriteSizeLimit = small/);
      assert.match(await settings(['database:settings:get', 'strictTriggerValidation']), /strictTriggerValidation = false/);

      // `small` is about 10 s of production's work: a REST write of 12 MiB is refused unless it
      // names a larger writeSizeLimit itself.
      const base = `http://127.0.0.1:${h.port}`;
      const owner = { authorization: 'Bearer owner' };
      const big = JSON.stringify(Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`k${i}`, 'x'.repeat(1 << 20)])));
      const refused = await fetch(`${base}/big.json?ns=default`, { method: 'PUT', headers: owner, body: big });
      assert.equal(refused.status, 413);
      assert.match((await refused.json()).error, /defaultWriteSizeLimit=small allows/);
      const allowed = await fetch(`${base}/big.json?ns=default&writeSizeLimit=medium`, { method: 'PUT', headers: owner, body: big });
      assert.equal(allowed.status, 200);
      await fetch(`${base}/.settings/defaultWriteSizeLimit.json?ns=default`, { method: 'PUT', headers: owner, body: '"unlimited"' });
      assert.equal((await fetch(`${base}/big.json?ns=default`, { method: 'DELETE', headers: owner })).status, 200);
    } finally {
      fs.rmSync(config, { recursive: true, force: true });
    }
  });
});
