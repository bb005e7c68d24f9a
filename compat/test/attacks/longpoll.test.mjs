// Long polling (/.lp) spoken by hand over HTTP: the protocol the web SDK's script tags use
// (start, polls carrying base64 segments, numbered answers), and what a hostile client tries
// against it: scripts injected through the callback number, oversized or far-ahead segments,
// guessed session ids and passwords. Each answer is asserted exactly.

import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { T } from '../../lib/harness.mjs';
import { HearthServer } from '../../lib/server.mjs';

const ns = 'lp-attack';

describe('attack: long polling', () => {
  let server;
  before(async () => {
    server = await HearthServer.start();
  });
  after(async () => {
    await server?.stop();
  });

  const lp = (query) => fetch(`http://127.0.0.1:${server.port}/.lp?${query}&ns=${ns}`);

  /** A new session: its id, password and the first answer's messages. */
  async function start(cb = 1) {
    const res = await lp(`start=t&ser=123&cb=${cb}&v=5`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type'), /javascript/);
    const text = await res.text();
    const started = text.match(/^parent\.pLPCommand(\d+)\("start","([\w-]+)","([\w-]+)"\);\n/);
    assert.ok(started, text);
    assert.equal(started[1], String(cb));
    const first = text.slice(started[0].length).match(/^parent\.pRTLPCB\d+\(0,(\[.*\])\);\n$/s);
    assert.ok(first, text);
    return { id: started[2], pw: started[3], first: JSON.parse(first[1]) };
  }

  /** The segments of `messages` as the SDK numbers them from `from`. */
  function segments(messages, from) {
    let n = from;
    let out = '';
    let i = 0;
    for (const message of messages) {
      const data = Buffer.from(JSON.stringify(message)).toString('base64url');
      const pieces = data.match(/.{1,1840}/g);
      for (const piece of pieces) {
        out += `&seg${i}=${n}&ts${i}=${pieces.length}&d${i}=${piece}`;
        n++;
        i++;
      }
    }
    return out;
  }

  /** Messages of an answer: `[number, messages]`, or null for an empty answer. */
  function answer(text) {
    if (text === '') return null;
    const m = text.match(/^parent\.pRTLPCB\d+\((\d+),(\[.*\])\);\n/s);
    assert.ok(m, text);
    return [Number(m[1]), JSON.parse(m[2])];
  }

  it('speaks the protocol: handshake, a write in segments, its answer numbered', T, async () => {
    const { id, pw, first } = await start(7);
    assert.equal(first[0].t, 'c');
    assert.equal(first[0].d.t, 'h');
    assert.equal(first[0].d.d.v, '5');
    const put = { t: 'd', d: { r: 1, a: 'p', b: { p: '/x', d: 'y'.repeat(3000) } } };
    // Two segments; the poll that carries them is answered with the write's reply.
    const res = await lp(`id=${id}&pw=${pw}&ser=1${segments([put], 0)}`);
    assert.equal(res.status, 200);
    const [number, messages] = answer(await res.text());
    assert.equal(number, 1);
    assert.deepEqual(messages, [{ t: 'd', d: { r: 1, b: { s: 'ok', d: '' } } }]);
    const stored = await fetch(`http://127.0.0.1:${server.port}/x.json?ns=${ns}`);
    assert.equal((await stored.json()).length, 3000);
    // The goodbye ends the session: its next poll is unknown.
    assert.equal((await fetch(`http://127.0.0.1:${server.port}/.lp?disconn=t&id=${id}&pw=${pw}`, { method: 'POST' })).status, 204);
    assert.equal((await lp(`id=${id}&pw=${pw}&ser=2`)).status, 404);
  });

  it('a callback number that is not a number is refused, never written into a script', T, async () => {
    const res = await lp('start=t&ser=1&cb=1;alert(document.cookie)&v=5');
    assert.equal(res.status, 400);
    assert.doesNotMatch(await res.text(), /alert/);
  });

  it('guessed ids and wrong passwords get the same 404', T, async () => {
    const { id, pw } = await start();
    const wrong = await lp(`id=${id}&pw=${pw}x&ser=1`);
    const unknown = await lp(`id=0-999999&pw=${pw}&ser=1`);
    const nowhere = await lp(`id=77-1&pw=${pw}&ser=1`);
    assert.deepEqual(
      [wrong.status, unknown.status, nowhere.status],
      [404, 404, 404],
    );
    assert.equal(await wrong.text(), await unknown.text());
  });

  it('oversized segments and segments far ahead are refused and end the session', T, async () => {
    const { id, pw } = await start();
    const long = 'A'.repeat(4097);
    assert.equal((await lp(`id=${id}&pw=${pw}&ser=1&seg0=0&ts0=1&d0=${long}`)).status, 400);
    // Far ahead: the server would have to hold everything before it.
    const ahead = await lp(`id=${id}&pw=${pw}&ser=2&seg0=100000&ts0=1&d0=AAAA`);
    assert.equal(ahead.status, 400);
    assert.match(await ahead.text(), /too far ahead/);
    assert.equal((await lp(`id=${id}&pw=${pw}&ser=3`)).status, 404);
  });
});
