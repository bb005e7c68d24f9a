// Hearth behind nginx, configured exactly as docs/deploy-proxy.md says: the test reads the
// nginx block out of that file, puts its own ports and certificate in, and runs nginx with it
// (TLS terminated by nginx, plain HTTP to Hearth). Checks an SDK round trip over wss:// and
// an event stream that arrives event by event through the proxy.

import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { useHearth, T } from '../lib/harness.mjs';
import { makeCa, makeServerCert } from '../lib/certs.mjs';
import { httpsEventStream, sdkRoundTrip } from '../lib/tls-clients.mjs';
import { REPO_DIR, canConnect, freePort } from '../lib/server.mjs';
import { waitFor, withTimeout } from '../lib/util.mjs';

const DOC = path.join(REPO_DIR, 'docs', 'deploy-proxy.md');

// Debian puts it in /usr/sbin, which not every PATH holds.
const NGINX = fs.existsSync('/usr/sbin/nginx') ? '/usr/sbin/nginx' : 'nginx';

function hasNginx() {
  try {
    execFileSync(NGINX, ['-v'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

// CI installs nginx (.ci/run); elsewhere the test says what it needs instead of failing.
const skip = !hasNginx() && !process.env.CI && 'nginx is not installed (apt-get install nginx-light)';

/** The documented configuration with the test's ports and certificate in place of the examples. */
function documentedConfig({ hearthPort, proxyPort, cert, key }) {
  const doc = fs.readFileSync(DOC, 'utf8');
  const blocks = [...doc.matchAll(/```nginx\n([\s\S]*?)```/g)];
  assert.equal(blocks.length, 1, 'docs/deploy-proxy.md has one nginx block');
  let config = blocks[0][1];
  const replace = (example, actual) => {
    assert.equal(config.split(example).length, 2, `the nginx block has "${example}" once`);
    config = config.replace(example, actual);
  };
  replace('server 127.0.0.1:9000;', `server 127.0.0.1:${hearthPort};`);
  replace('listen 443 ssl;', `listen 127.0.0.1:${proxyPort} ssl;`);
  replace('/etc/letsencrypt/live/db.example.com/fullchain.pem', cert);
  replace('/etc/letsencrypt/live/db.example.com/privkey.pem', key);
  return config;
}

describe('behind nginx, as docs/deploy-proxy.md configures it', { skip }, () => {
  const h = useHearth();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-nginx-'));
  const ca = makeCa(path.join(dir, 'certs'));
  const site = makeServerCert(ca, 'proxy');
  const caPem = fs.readFileSync(ca.cert);
  let nginx;
  let proxyPort;

  before(async () => {
    proxyPort = await freePort();
    for (const temp of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) fs.mkdirSync(path.join(dir, temp));
    const main = `
daemon off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log info;
${process.getuid?.() === 0 ? 'user root;' : ''}
events { worker_connections 256; }
http {
  access_log ${dir}/access.log;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
${documentedConfig({ hearthPort: h.port, proxyPort, cert: site.cert, key: site.key })}
}
`;
    fs.writeFileSync(path.join(dir, 'nginx.conf'), main);
    nginx = spawn(NGINX, ['-p', dir, '-e', path.join(dir, 'error.log'), '-c', path.join(dir, 'nginx.conf')], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    nginx.stderr.on('data', (chunk) => (err += chunk));
    nginx.on('exit', (code) => {
      if (code) err += `\nnginx exited with ${code}`;
    });
    await waitFor(
      () => {
        if (nginx.exitCode !== null) throw new Error(`nginx did not start: ${err}`);
        return canConnect(proxyPort, 200);
      },
      10_000,
      `nginx on port ${proxyPort}`,
    );
  });

  after(async () => {
    if (nginx && nginx.exitCode === null) {
      const exited = new Promise((resolve) => nginx.on('exit', resolve));
      nginx.kill('SIGQUIT');
      await withTimeout(exited, 5_000, 'nginx exit').catch(() => nginx.kill('SIGKILL'));
    }
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('the web SDK makes a round trip over wss:// through the proxy', T, async () => {
    const ns = h.ns('proxy');
    const child = await sdkRoundTrip(`https://127.0.0.1:${proxyPort}?ns=${ns}`, 'through/nginx', ca.cert, h.defer);
    assert.equal(child.code, 0, `the SDK child failed: ${child.err}`);
    assert.deepEqual(child.out, { seen: { text: 'over wss', n: 42 } });
    const direct = await fetch(`http://127.0.0.1:${h.port}/through/nginx.json?ns=${ns}`);
    assert.deepEqual(await direct.json(), { text: 'over wss', n: 42 });
  });

  it('an event stream through the proxy arrives event by event, not buffered', T, async () => {
    const ns = h.ns('proxy');
    const put = (value) => fetch(`http://127.0.0.1:${h.port}/feed.json?ns=${ns}`, { method: 'PUT', body: JSON.stringify(value) });
    await put({ n: 1 });
    // Each event is far smaller than nginx's buffers: a buffering proxy would hold it until
    // the stream ends, and these waits would time out.
    const stream = httpsEventStream({ port: proxyPort, path: `/feed.json?ns=${ns}`, ca: caPem, defer: h.defer, label: 'through nginx' });
    await stream.until('event: put\ndata: {"path":"/","data":{"n":1}}\n\n');
    assert.match(stream.headers['content-type'], /^text\/event-stream/);
    await put({ n: 2 });
    await stream.until('event: put\ndata: {"path":"/","data":{"n":2}}\n\n');
  });
});
