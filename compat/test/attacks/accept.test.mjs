// Attack: exhausting the server's file descriptors. While accepting fails the server must keep
// serving what it has and come back when descriptors free up, without flooding its log (it
// once wrote about 40 lines a second per listener): one line when the failures start, then at
// most one every 10 s.

import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import { T } from '../../lib/harness.mjs';
import { HearthServer, freePort } from '../../lib/server.mjs';
import { sleep, waitFor } from '../../lib/util.mjs';

/** One shard, so there is exactly one accept loop to count. */
class OneShardServer extends HearthServer {
  get args() {
    const args = super.args;
    args[args.indexOf('--threads') + 1] = '1';
    return args;
  }
}

const failures = (server) => server.log().split('\n').filter((line) => line.includes('accept failed')).length;

describe('attack: file descriptors exhausted', () => {
  let server;
  const sockets = [];
  before(async () => {
    server = new OneShardServer({ port: await freePort() });
    await server.start();
  });
  after(async () => {
    for (const socket of sockets) socket.destroy();
    await server?.stop();
  });

  it('accept failures back off and are logged once', { ...T, timeout: 30_000 }, async () => {
    // Leave the server a few descriptors more than it holds now, then connect past them.
    const open = fs.readdirSync(`/proc/${server.pid}/fd`).length;
    execFileSync('prlimit', [`--pid=${server.pid}`, `--nofile=${open + 4}:${open + 4}`]);
    for (let i = 0; i < 30; i++) {
      const socket = net.connect(server.port, '127.0.0.1');
      socket.on('error', () => {});
      sockets.push(socket);
    }
    await waitFor(() => failures(server) > 0, 10_000, 'the first accept failure in the log');
    // The subject is a rate: count the lines over a window well inside the 10 s interval.
    await sleep(3_000);
    assert.equal(failures(server), 1);

    // Descriptors free up: the server accepts again and answers.
    for (const socket of sockets.splice(0)) socket.destroy();
    const res = await fetch(`http://127.0.0.1:${server.port}/.json?ns=back`);
    assert.equal(res.status, 200);
  });
});
