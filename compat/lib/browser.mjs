// Headless Chromium for the compat suite's browser tests (compat/browser): Debian's chromium
// driven by playwright-core, never a browser download. (examples/chat keeps its own copy in
// test/browser.mjs, so that a copy of the example stands alone.)
import assert from 'node:assert/strict';
import fs from 'node:fs';

export const CHROMIUM = process.env.CHROMIUM_BIN || '/usr/bin/chromium';

export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-default-apps',
  '--disable-extensions',
];

/** Run fn with a hard time limit so a hung browser or server can never stall the suite. */
export function within(ms, what, fn) {
  let timer;
  return Promise.race([
    Promise.resolve().then(fn),
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: timed out after ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * Launches the system Chromium through `chromium`, the browser type of the caller's own
 * playwright-core. launch() (not launchPersistentContext) always runs Chromium with a fresh,
 * empty --user-data-dir that Playwright creates in the OS temp dir and deletes on close().
 */
export function launchChromium(chromium) {
  assert.ok(
    fs.existsSync(CHROMIUM),
    `Chromium not found at ${CHROMIUM}. Install it (Debian: apt-get update && apt-get install -y chromium) or set CHROMIUM_BIN.`,
  );
  return within(30_000, 'launching chromium', () =>
    chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS, timeout: 30_000 }),
  );
}
