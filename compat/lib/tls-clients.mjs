// Clients of a server behind TLS that trust a test's own authority (see certs.mjs): the web
// SDK in a child process, and an event stream over https.

import { spawn } from 'node:child_process';
import https from 'node:https';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { withTimeout } from './util.mjs';

const CHILD = path.join(path.dirname(fileURLToPath(import.meta.url)), 'tls-sdk-child.mjs');

/**
 * Runs the web SDK's set/on round trip (tls-sdk-child.mjs) on `databaseURL` at `at`, in a
 * child that trusts the authority in `caFile` through NODE_EXTRA_CA_CERTS:
 * { code, out (the child's JSON line, parsed when it exited with 0), err }.
 */
export async function sdkRoundTrip(databaseURL, at, caFile, defer) {
  const child = spawn(process.execPath, [CHILD, databaseURL, at], {
    env: { ...process.env, NODE_EXTRA_CA_CERTS: caFile },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  defer(() => child.kill('SIGKILL'));
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk) => (out += chunk));
  child.stderr.on('data', (chunk) => (err += chunk));
  const code = await new Promise((resolve) => child.on('exit', resolve));
  return { code, out: code === 0 ? JSON.parse(out) : out, err };
}

/**
 * An event stream (GET with Accept: text/event-stream) over https, trusting `ca` (PEM):
 * `until(text)` resolves once the body so far holds `text`; `headers` once the answer came.
 */
export function httpsEventStream({ port, path: target, ca, defer, label = 'event stream' }) {
  const stream = { text: '', headers: null };
  const more = [];
  const req = https.get(
    { host: '127.0.0.1', port, path: target, ca, agent: false, headers: { accept: 'text/event-stream' } },
    (res) => {
      stream.headers = res.headers;
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        stream.text += chunk;
        for (const waiter of more.splice(0)) waiter();
      });
    },
  );
  defer(() => req.destroy());
  stream.until = (needle) =>
    withTimeout(
      (async () => {
        while (!stream.text.includes(needle)) await new Promise((resolve) => more.push(resolve));
      })(),
      10_000,
      `${label}: ${needle}`,
    );
  return stream;
}
