// Headless Chromium for this example's test: the system's Chromium (Debian's `chromium`)
// driven by playwright-core, never a browser download. Kept inside the example so that a copy
// of examples/chat runs its test on its own.
import assert from 'node:assert/strict';
import fs from 'node:fs';

export const CHROMIUM = process.env.CHROMIUM_BIN || '/usr/bin/chromium';

const ARGS = [
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

/** Runs fn with a time limit, so that a hung browser or server never stalls the test. */
export function within(ms, what, fn) {
  let timer;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: timed out after ${ms} ms`)), ms);
  });
  return Promise.race([Promise.resolve().then(fn), limit]).finally(() => clearTimeout(timer));
}

/** Launches the system Chromium with a fresh profile that Playwright deletes on close(). */
export function launchChromium(chromium) {
  assert.ok(
    fs.existsSync(CHROMIUM),
    `Chromium not found at ${CHROMIUM}: install it (Debian: apt-get install -y chromium) or set CHROMIUM_BIN.`,
  );
  return within(30_000, 'launching chromium', () =>
    chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS, timeout: 30_000 }),
  );
}
