// `npm test` entry point: checks the server binary, then runs every
// test/**/*.test.mjs file with node's built-in test runner, one file at a time
// (each file starts its own server; the fan-out test alone opens 500 connections).
//
//   npm test                       all files
//   npm test -- test/raw           only files under a directory / given files
//   HEARTH_BIN=/path/to/hearth npm test
//   HEARTH_COMPAT_VERBOSE=1        keep SDK log output

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ARTIFACTS_DIR, COMPAT_DIR, assertBinary, hearthBinary } from '../lib/server.mjs';

function collect(p, out) {
  const st = fs.statSync(p);
  if (st.isDirectory()) {
    for (const e of fs.readdirSync(p).sort()) collect(path.join(p, e), out);
  } else if (p.endsWith('.test.mjs')) {
    out.push(p);
  }
  return out;
}

const args = process.argv.slice(2);
const targets = args.length ? args.map((a) => path.resolve(a)) : [path.join(COMPAT_DIR, 'test')];
const files = targets.flatMap((t) => collect(t, []));
if (files.length === 0) {
  console.error(`no *.test.mjs files found under ${targets.join(', ')}`);
  process.exit(1);
}

try {
  assertBinary();
} catch (e) {
  console.error(`\n[compat] ERROR: ${e.message}\n`);
  process.exit(1);
}
console.error(`[compat] server binary: ${hearthBinary()}`);

// Keep only this run's server logs.
fs.mkdirSync(ARTIFACTS_DIR, { recursive: true });
for (const f of fs.readdirSync(ARTIFACTS_DIR)) {
  if (/^server-\d+\.log$/.test(f)) fs.rmSync(path.join(ARTIFACTS_DIR, f), { force: true });
}
console.error(`[compat] server logs: ${ARTIFACTS_DIR}/server-<port>.log`);

const nodeArgs = [
  '--test',
  '--test-concurrency=1',
  '--test-reporter=spec',
  // Safety net: never hang CI if some SDK handle keeps the event loop alive.
  '--test-force-exit',
  ...files.map((f) => path.relative(COMPAT_DIR, f)),
];
const res = spawnSync(process.execPath, nodeArgs, { cwd: COMPAT_DIR, stdio: 'inherit' });
if (res.error) {
  console.error(res.error);
  process.exit(1);
}
process.exit(res.status === null ? 1 : res.status);
