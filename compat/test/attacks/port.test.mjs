// Attack: a second server started on a port that a Hearth server holds. Every shard listens
// with SO_REUSEPORT, which once let the second process join the port silently and take half
// of the new connections (with its own, different data). It must fail to start, naming the
// address, and the first must go on serving every connection.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { request } from 'node:http';
import { useHearth, T } from '../../lib/harness.mjs';
import { HearthServer, cleanEnv } from '../../lib/server.mjs';
import { withTimeout } from '../../lib/util.mjs';
import { baseURL, rest } from '../rest/rest-client.mjs';

/** Runs `bin args` until it exits; resolves { code, stderr }. */
function runToExit(bin, args, ms) {
  const proc = spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'], env: cleanEnv() });
  let stderr = '';
  proc.stderr.setEncoding('utf8').on('data', (chunk) => (stderr += chunk));
  const exited = new Promise((resolve) => proc.once('exit', (code) => resolve({ code, stderr })));
  return withTimeout(exited, ms, `${bin} to exit`).finally(() => proc.kill('SIGKILL'));
}

/** A GET on a connection of its own (no pooling), so each one is a new accept. */
function getOnNewConnection(url) {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: false, headers: { connection: 'close' } }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (chunk) => (body += chunk));
      res.on('end', () => resolve(body));
    });
    req.on('error', reject).end();
  });
}

describe('attack: the port claimed twice', () => {
  const h = useHearth();

  it('a second server on the port fails with address in use; the first serves every connection', T, async () => {
    const ns = h.ns('port');
    const url = `${baseURL(h.server)}/owner.json?ns=${ns}`;
    assert.equal((await rest(url, { method: 'PUT', body: 'first' })).status, 200);

    // Same port, its own data directory: only the port can conflict.
    const second = new HearthServer({ port: h.port, bin: h.server.bin });
    const { code, stderr } = await runToExit(second.bin, second.args, 10_000);
    assert.equal(code, 1);
    assert.ok(
      stderr.includes(
        `cannot listen on [127.0.0.1:${h.port}]: Address already in use: another Hearth server listens on 127.0.0.1:${h.port}`,
      ),
      stderr,
    );

    for (let i = 0; i < 20; i++) assert.equal(await getOnNewConnection(url), '"first"');
  });
});
