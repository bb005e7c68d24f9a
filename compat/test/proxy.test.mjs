// Hearth behind nginx and behind Caddy, configured exactly as docs/deploy-proxy.md says: the
// test reads each proxy's block out of that file, puts its own ports and certificate in, and
// runs the proxy with it (TLS terminated by the proxy, plain HTTP to Hearth). Through each it
// checks an SDK round trip over wss:// and an event stream that arrives event by event.

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

/** The program's path (Debian puts nginx in /usr/sbin, which not every PATH holds), if installed. */
function installed(name) {
  for (const dir of ['/usr/sbin', '/usr/bin']) {
    if (fs.existsSync(path.join(dir, name))) return path.join(dir, name);
  }
  try {
    execFileSync(name, ['-v'], { stdio: 'ignore' });
    return name;
  } catch {
    return null;
  }
}

// CI installs both (.ci/run); elsewhere a missing proxy is skipped with what to install.
const skipUnless = (bin, pkg) => !bin && !process.env.CI && `${pkg} is not installed (apt-get install ${pkg})`;

/** The documented block of `language` with each example replaced by the test's value. */
function documented(language, replacements) {
  const doc = fs.readFileSync(DOC, 'utf8');
  const blocks = [...doc.matchAll(new RegExp('```' + language + '\\n([\\s\\S]*?)```', 'g'))];
  assert.equal(blocks.length, 1, `docs/deploy-proxy.md has one ${language} block`);
  let config = blocks[0][1];
  for (const [example, actual] of replacements) {
    assert.equal(config.split(example).length, 2, `the ${language} block has "${example}" once`);
    config = config.replace(example, actual);
  }
  return config;
}

/**
 * Starts a proxy in front of the suite's server for its tests and stops it after them:
 * `start({ dir, hearthPort, proxyPort, cert, key })` returns the spawned process.
 */
function useProxy(h, name, start) {
  const state = { dir: fs.mkdtempSync(path.join(os.tmpdir(), `hearth-${name}-`)) };
  state.ca = makeCa(path.join(state.dir, 'certs'));
  state.caPem = fs.readFileSync(state.ca.cert);
  const site = makeServerCert(state.ca, 'proxy');
  before(async () => {
    state.port = await freePort();
    const proc = start({ dir: state.dir, hearthPort: h.port, proxyPort: state.port, cert: site.cert, key: site.key });
    state.proc = proc;
    let err = '';
    proc.stderr.on('data', (chunk) => (err += chunk));
    await waitFor(
      () => {
        if (proc.exitCode !== null) throw new Error(`${name} did not start: ${err}`);
        return canConnect(state.port, 200);
      },
      10_000,
      `${name} on port ${state.port}`,
    );
  });
  after(async () => {
    const proc = state.proc;
    if (proc && proc.exitCode === null) {
      const exited = new Promise((resolve) => proc.on('exit', resolve));
      proc.kill('SIGTERM');
      await withTimeout(exited, 5_000, `${name} exit`).catch(() => proc.kill('SIGKILL'));
    }
    fs.rmSync(state.dir, { recursive: true, force: true });
  });
  return state;
}

/** The checks every documented proxy must pass. */
function throughTheProxy(h, proxy, name) {
  it(`the web SDK makes a round trip over wss:// through ${name}`, T, async () => {
    const ns = h.ns('proxy');
    const child = await sdkRoundTrip(`https://127.0.0.1:${proxy.port}?ns=${ns}`, 'through/proxy', proxy.ca.cert, h.defer);
    assert.equal(child.code, 0, `the SDK child failed: ${child.err}`);
    assert.deepEqual(child.out, { seen: { text: 'over wss', n: 42 } });
    const direct = await fetch(`http://127.0.0.1:${h.port}/through/proxy.json?ns=${ns}`);
    assert.deepEqual(await direct.json(), { text: 'over wss', n: 42 });
  });

  it(`an event stream through ${name} arrives event by event, not buffered`, T, async () => {
    const ns = h.ns('proxy');
    const put = (value) => fetch(`http://127.0.0.1:${h.port}/feed.json?ns=${ns}`, { method: 'PUT', body: JSON.stringify(value) });
    await put({ n: 1 });
    // Each event is far smaller than a proxy's buffers: a buffering proxy would hold it until
    // the stream ends, and these waits would time out.
    const stream = httpsEventStream({ port: proxy.port, path: `/feed.json?ns=${ns}`, ca: proxy.caPem, defer: h.defer, label: `through ${name}` });
    await stream.until('event: put\ndata: {"path":"/","data":{"n":1}}\n\n');
    assert.match(stream.headers['content-type'], /^text\/event-stream/);
    await put({ n: 2 });
    await stream.until('event: put\ndata: {"path":"/","data":{"n":2}}\n\n');
  });
}

const NGINX = installed('nginx');

describe('behind nginx, as docs/deploy-proxy.md configures it', { skip: skipUnless(NGINX, 'nginx-light') }, () => {
  const h = useHearth();
  const proxy = useProxy(h, 'nginx', ({ dir, hearthPort, proxyPort, cert, key }) => {
    for (const temp of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) fs.mkdirSync(path.join(dir, temp));
    const site = documented('nginx', [
      ['server 127.0.0.1:9000;', `server 127.0.0.1:${hearthPort};`],
      ['listen 443 ssl;', `listen 127.0.0.1:${proxyPort} ssl;`],
      ['/etc/letsencrypt/live/db.example.com/fullchain.pem', cert],
      ['/etc/letsencrypt/live/db.example.com/privkey.pem', key],
    ]);
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
${site}
}
`;
    fs.writeFileSync(path.join(dir, 'nginx.conf'), main);
    return spawn(NGINX, ['-p', dir, '-e', path.join(dir, 'error.log'), '-c', path.join(dir, 'nginx.conf')], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
  });
  throughTheProxy(h, proxy, 'nginx');
});

const CADDY = installed('caddy');

describe('behind Caddy, as docs/deploy-proxy.md configures it', { skip: skipUnless(CADDY, 'caddy') }, () => {
  const h = useHearth();
  const proxy = useProxy(h, 'caddy', ({ dir, hearthPort, proxyPort, cert, key }) => {
    const site = documented('caddyfile', [
      ['db.example.com {', `https://127.0.0.1:${proxyPort} {\n    tls ${cert} ${key}`],
      ['reverse_proxy 127.0.0.1:9000', `reverse_proxy 127.0.0.1:${hearthPort}`],
    ]);
    // The test's own certificate instead of Let's Encrypt; no admin endpoint, no port 80.
    const global = `{\n  admin off\n  auto_https disable_redirects\n  storage file_system ${dir}/data\n  skip_install_trust\n}\n`;
    fs.writeFileSync(path.join(dir, 'Caddyfile'), global + site);
    return spawn(CADDY, ['run', '--adapter', 'caddyfile', '--config', path.join(dir, 'Caddyfile')], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, HOME: dir, XDG_DATA_HOME: dir, XDG_CONFIG_HOME: dir },
    });
  });
  throughTheProxy(h, proxy, 'Caddy');
});
