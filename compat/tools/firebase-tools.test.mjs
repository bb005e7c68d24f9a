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
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { useHearth } from '../lib/harness.mjs';
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
});
