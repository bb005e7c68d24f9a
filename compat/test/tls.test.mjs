// TLS on the realtime port (--tls-cert, --tls-key): the official SDK over wss://, REST and
// event streams over https://, plain HTTP refused, and certificates reloaded on SIGHUP while
// connections opened before go on.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { useHearth, T } from '../lib/harness.mjs';
import { makeCa, makeServerCert } from '../lib/certs.mjs';
import { cleanEnv, hearthBinary } from '../lib/server.mjs';
import { RawClient } from '../lib/raw.mjs';
import { httpsEventStream, sdkRoundTrip } from '../lib/tls-clients.mjs';
import { waitFor, withTimeout } from '../lib/util.mjs';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-tls-'));
process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
const ca = makeCa(dir);
const first = makeServerCert(ca, 'first');
const second = makeServerCert(ca, 'second');
const stranger = makeServerCert(ca, 'stranger');
// The files the server is given; the reload test replaces their contents.
const certFile = path.join(dir, 'cert.pem');
const keyFile = path.join(dir, 'key.pem');
fs.copyFileSync(first.cert, certFile);
fs.copyFileSync(first.key, keyFile);
const caPem = fs.readFileSync(ca.cert);

/** One HTTPS request trusting the test's authority: { status, headers, body }. */
function request(port, method, target, body) {
  return withTimeout(
    new Promise((resolve, reject) => {
      const req = https.request({ host: '127.0.0.1', port, method, path: target, ca: caPem, agent: false }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: text }));
      });
      req.on('error', reject);
      req.end(body === undefined ? undefined : JSON.stringify(body));
    }),
    10_000,
    `${method} ${target}`,
  );
}

/** The SHA-256 fingerprint of the certificate a new TLS connection is shown. */
function presented(port) {
  return withTimeout(
    new Promise((resolve, reject) => {
      const socket = tls.connect({ host: '127.0.0.1', port, ca: caPem }, () => {
        const fingerprint = socket.getPeerCertificate().fingerprint256;
        socket.end();
        resolve(fingerprint);
      });
      socket.on('error', reject);
    }),
    10_000,
    'a TLS handshake',
  );
}

/** Resolves once the server's log has `text` in it (the log is written as the server acts). */
function logged(server, text, after = 0) {
  return waitFor(() => fs.readFileSync(server.logPath, 'utf8').indexOf(text, after) >= 0, 10_000, `log: ${text}`);
}

describe('TLS', () => {
  const h = useHearth({ extraArgs: ['--tls-cert', certFile, '--tls-key', keyFile] });

  it('the web SDK makes a round trip over wss://, trusting the authority through NODE_EXTRA_CA_CERTS', T, async () => {
    const ns = h.ns('tls');
    const child = await sdkRoundTrip(`https://127.0.0.1:${h.port}?ns=${ns}`, 'rooms/r1', ca.cert, h.defer);
    assert.equal(child.code, 0, `the SDK child failed: ${child.err}`);
    assert.deepEqual(child.out, { seen: { text: 'over wss', n: 42 } });
    // What the SDK wrote is there for REST too.
    const read = await request(h.port, 'GET', `/rooms/r1.json?ns=${ns}`);
    assert.deepEqual(JSON.parse(read.body), { text: 'over wss', n: 42 });
  });

  it('REST reads and writes over https://', T, async () => {
    const ns = h.ns('tls');
    const put = await request(h.port, 'PUT', `/a/b.json?ns=${ns}`, { x: 1 });
    assert.equal(put.status, 200);
    assert.deepEqual(JSON.parse(put.body), { x: 1 });
    const got = await request(h.port, 'GET', `/a.json?ns=${ns}`);
    assert.equal(got.status, 200);
    assert.deepEqual(JSON.parse(got.body), { b: { x: 1 } });
  });

  it('an event stream over https:// delivers its events as they happen', T, async () => {
    const ns = h.ns('tls');
    await request(h.port, 'PUT', `/feed.json?ns=${ns}`, { n: 1 });
    const stream = httpsEventStream({ port: h.port, path: `/feed.json?ns=${ns}`, ca: caPem, defer: h.defer });
    await stream.until('event: put\ndata: {"path":"/","data":{"n":1}}\n\n');
    await request(h.port, 'PUT', `/feed/n.json?ns=${ns}`, 2);
    await stream.until('event: put\ndata: {"path":"/n","data":2}\n\n');
  });

  it('the hearth command reaches the server over https:// with --ca-cert', T, async () => {
    const ns = h.ns('tls');
    const hearth = (...args) =>
      execFileSync(hearthBinary(), ['data', ...args, '--url', `https://127.0.0.1:${h.port}`, '--ns', ns, '--ca-cert', ca.cert, '--admin-token', 'owner'], {
        encoding: 'utf8',
        env: cleanEnv(),
        timeout: 10_000,
      });
    hearth('set', '/tools', '{"via":"https"}');
    assert.deepEqual(JSON.parse(hearth('get', '/tools')), { via: 'https' });
    assert.deepEqual(JSON.parse((await request(h.port, 'GET', `/tools.json?ns=${ns}`)).body), { via: 'https' });
  });

  it('a long-polling session moves onto a wss:// WebSocket, whichever core the WebSocket lands on', T, async () => {
    const ns = h.ns('tls-lp');
    const segment = (n, message) => `&seg0=${n}&ts0=1&d0=${Buffer.from(JSON.stringify(message)).toString('base64url')}`;
    // Several sessions: their WebSockets land on the other core too, and move there with
    // their TLS sessions.
    for (let round = 0; round < 10; round++) {
      const start = await request(h.port, 'GET', `/.lp?start=t&ser=1&cb=1&v=5&ns=${ns}`);
      const started = start.body.match(/pLPCommand1\("start","([\w-]+)","([\w-]+)"\);\nparent\.pRTLPCB1\(0,(\[.*\])\);/s);
      assert.ok(started, start.body);
      const [, id, pw, firstAnswer] = started;
      const s = JSON.parse(firstAnswer)[0].d.d.s;
      const ws = new RawClient(`wss://127.0.0.1:${h.port}/.ws?v=5&ns=${ns}&s=${s}`, { ws: { ca: caPem } });
      h.defer(() => ws.terminate());
      await ws.waitMessage((m) => m.t === 'c' && m.d.t === 'a');
      for (let i = 0; i < 2; i++) {
        const from = ws.messages.length;
        ws.send({ t: 'c', d: { t: 'p', d: {} } });
        await ws.waitMessage((m) => m.t === 'c' && m.d.t === 'o', { from });
      }
      ws.send({ t: 'c', d: { t: 'a', d: {} } });
      const poll = await request(h.port, 'GET', `/.lp?id=${id}&pw=${pw}&ser=2${segment(0, { t: 'c', d: { t: 'n', d: {} } })}`);
      assert.match(poll.body, /\{"t":"c","d":\{"t":"n","d":\{\}\}\}\]\);\nparent\.pLPCommand1\("close",1\);\n$/);
      assert.equal((await ws.request('p', { p: `/moved/${round}`, d: true })).s, 'ok');
      assert.equal(JSON.parse((await request(h.port, 'GET', `/moved/${round}.json?ns=${ns}`)).body), true);
      ws.close();
    }
  });

  it('plain HTTP on the TLS port gets a 400 that says to use https', T, async () => {
    const answer = await withTimeout(
      new Promise((resolve, reject) => {
        http
          .get({ host: '127.0.0.1', port: h.port, path: '/.json', agent: false }, (res) => {
            let body = '';
            res.setEncoding('utf8');
            res.on('data', (chunk) => (body += chunk));
            res.on('end', () => resolve({ status: res.statusCode, body }));
          })
          .on('error', reject);
      }),
      10_000,
      'plain http',
    );
    assert.equal(answer.status, 400);
    assert.match(JSON.parse(answer.body).error, /This port speaks HTTPS/);
  });

  it('a client that does not trust the certificate fails the handshake', T, async () => {
    const failure = await new Promise((resolve) => {
      const socket = tls.connect({ host: '127.0.0.1', port: h.port }, () => resolve(null));
      socket.on('error', resolve);
    });
    assert.ok(failure, 'the handshake failed');
    assert.match(failure.code, /SELF_SIGNED|UNABLE_TO_GET_ISSUER|UNABLE_TO_VERIFY/);
  });

  it('SIGHUP serves a new certificate to new connections; connections opened before go on', T, async () => {
    assert.equal(await presented(h.port), first.fingerprint);
    const ns = h.ns('tls');
    const before = await RawClient.connect(`wss://127.0.0.1:${h.port}/.ws?v=5&ns=${ns}`, { ws: { ca: caPem } });
    h.defer(() => before.close());
    await before.handshake();
    assert.equal(before.ws._socket.getPeerCertificate().fingerprint256, first.fingerprint);
    const listened = before.sendRequest('q', { p: '/live', h: '' });
    await before.response(listened);

    const logStart = fs.statSync(h.server.logPath).size;
    fs.copyFileSync(second.key, keyFile);
    fs.copyFileSync(second.cert, certFile);
    h.server.proc.kill('SIGHUP');
    await logged(h.server, 'TLS certificate reloaded', logStart);
    assert.equal(await presented(h.port), second.fingerprint);

    // The connection opened before keeps its session and gets what is written after.
    const put = await request(h.port, 'PUT', `/live.json?ns=${ns}`, 'after the reload');
    assert.equal(put.status, 200);
    await before.waitMessage((m) => m?.d?.a === 'd' && m.d.b?.d === 'after the reload', { label: 'push after reload' });
    assert.deepEqual((await before.request('p', { p: '/live', d: 'from before' })).s, 'ok');
    assert.equal(before.ws._socket.getPeerCertificate().fingerprint256, first.fingerprint);

    // A key that does not belong to the certificate is refused, and the one in force stays.
    const failedAt = fs.statSync(h.server.logPath).size;
    fs.copyFileSync(stranger.key, keyFile);
    h.server.proc.kill('SIGHUP');
    await logged(h.server, 'TLS certificate not reloaded', failedAt);
    assert.equal(await presented(h.port), second.fingerprint);
    assert.equal(JSON.parse((await request(h.port, 'GET', `/live.json?ns=${ns}`)).body), 'from before');
  });
});

describe('TLS flags', () => {
  it('the server refuses to start with a key of another certificate, naming both files', T, async () => {
    const child = spawn(
      hearthBinary(),
      ['serve', '--dev', '--durability', 'none', '--listen', '127.0.0.1:0', '--tls-cert', first.cert, '--tls-key', second.key],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let err = '';
    child.stderr.on('data', (chunk) => (err += chunk));
    const code = await withTimeout(new Promise((resolve) => child.on('exit', resolve)), 10_000, 'exit');
    assert.notEqual(code, 0);
    assert.ok(err.includes(second.key) && err.includes(first.cert), err);
  });
});
