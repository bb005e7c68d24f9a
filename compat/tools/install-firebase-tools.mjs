// Installs the pinned firebase-tools (the Firebase CLI) into .artifacts/firebase-tools-<version>
// for tools/firebase-tools.test.mjs, unless it is there already. scripts/test runs this in the
// background while Rust compiles; the test calls it too and then finds the copy in place.
//
//   node tools/install-firebase-tools.mjs
//
// Only what the CLI needs to run is installed: no optional dependencies and no install
// scripts (which build native modules the database commands never load). That takes about a
// minute from an empty npm cache (53 s on a busy 2-core machine) instead of ten. The install
// goes to a temporary directory first and is renamed into place when complete, so a test
// that starts meanwhile, or an install that was interrupted, never sees half of it.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const FIREBASE_TOOLS_VERSION = '15.34.2';

const ARTIFACTS_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '.artifacts');
export const FIREBASE_TOOLS_PREFIX = path.join(ARTIFACTS_DIR, `firebase-tools-${FIREBASE_TOOLS_VERSION}`);
export const FIREBASE_CLI = path.join(FIREBASE_TOOLS_PREFIX, 'node_modules', '.bin', 'firebase');
/** Written last: a copy without it is incomplete (or from before this script). */
const CLI_MARK = path.join(FIREBASE_TOOLS_PREFIX, 'installed');

/** Installs firebase-tools unless it is installed; returns the path of its `firebase`. */
export function installFirebaseTools({ stdio = 'inherit' } = {}) {
  if (fs.existsSync(CLI_MARK)) return FIREBASE_CLI;
  fs.mkdirSync(ARTIFACTS_DIR, { recursive: true });
  fs.rmSync(FIREBASE_TOOLS_PREFIX, { recursive: true, force: true });
  const staging = fs.mkdtempSync(`${FIREBASE_TOOLS_PREFIX}.partial-`);
  try {
    execFileSync('npm', ['install', '--no-save', '--no-audit', '--no-fund', '--loglevel=error',
      '--omit=optional', '--ignore-scripts', '--prefix', staging,
      `firebase-tools@${FIREBASE_TOOLS_VERSION}`], { stdio });
    fs.writeFileSync(path.join(staging, 'installed'), `${new Date().toISOString()}\n`);
    try {
      fs.renameSync(staging, FIREBASE_TOOLS_PREFIX);
    } catch (error) {
      // Another install finished first: its copy is as good as this one.
      if (!fs.existsSync(CLI_MARK)) throw error;
    }
  } finally {
    fs.rmSync(staging, { recursive: true, force: true });
  }
  return FIREBASE_CLI;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const started = Date.now();
  installFirebaseTools();
  console.log(`firebase-tools ${FIREBASE_TOOLS_VERSION} ready in ${((Date.now() - started) / 1000).toFixed(0)} s`);
}
