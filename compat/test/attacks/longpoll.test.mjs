// Long polling (/.lp) spoken by hand over HTTP: the protocol the web SDK's script tags use
// (start, polls carrying base64 segments, numbered answers), and what a hostile client tries
// against it: scripts injected through the callback number, oversized or far-ahead segments,
// guessed session ids and passwords. Each answer is asserted exactly.
// Then the move of a session onto a WebSocket (`/.ws?s=<handshake session id>`) by hand,
// message for message as the SDK does it, and the WebSockets that must not get a session:
// unknown ids, a session's public id with its poll password but not its secret, another
// database, a session already moving or moved. Four cores, so that the WebSockets land on
// other cores than their sessions.

import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { T } from '../../lib/harness.mjs';
import { RawClient } from '../../lib/raw.mjs';
import { HearthServer } from '../../lib/server.mjs';

const ns = 'lp-attack';

describe('attack: long polling', () => {
  let server;
  before(async () => {
    server = await HearthServer.start({ threads: 4, extraArgs: ['--metrics-public'] });
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

  /** Every numbered answer and the close of an answer's script: `{ answers: [[n, msgs]], close }`. */
  function script(text) {
    const answers = [];
    let close;
    for (const line of text.split('\n').filter(Boolean)) {
      const data = line.match(/^parent\.pRTLPCB\d+\((\d+),(\[.*\])\);$/s);
      const closing = line.match(/^parent\.pLPCommand\d+\("close"(?:,(\d+))?\);$/);
      if (data) answers.push([Number(data[1]), JSON.parse(data[2])]);
      else if (closing) close = closing[1] === undefined ? null : Number(closing[1]);
      else assert.fail(`unexpected script line ${line}`);
    }
    return { answers, close };
  }

  const ws = (query, namespace = ns) =>
    new RawClient(`ws://127.0.0.1:${server.port}/.ws?v=5&ns=${namespace}&${query}`);

  const REFUSED = 'no long-polling session to move onto this WebSocket';

  /** A WebSocket that must be refused: a reset first, then the close, and nothing else. */
  async function refused(client) {
    const closed = await client.waitClose().catch((e) => {
      throw new Error(`${e.message}: ${client.url} got ${JSON.stringify(client.messages)}`);
    });
    assert.deepEqual(
      { code: closed.code, reason: closed.reason },
      { code: 1008, reason: REFUSED },
    );
    assert.equal(client.messages.length, 1, JSON.stringify(client.messages));
    assert.equal(client.messages[0].t, 'c');
    assert.equal(client.messages[0].d.t, 'r');
  }

  const refusedCount = async () => {
    const text = await (await fetch(`http://127.0.0.1:${server.port}/metrics`)).text();
    const m = text.match(/hearth_websocket_connections_closed_total\{cause="upgrade_refused"\} (\d+)/);
    return m ? Number(m[1]) : 0;
  };

  const value = async (p) => (await fetch(`http://127.0.0.1:${server.port}${p}.json?ns=${ns}`)).json();

  it('a WebSocket naming no session it may take over is refused with a reset, counted, and the session is untouched', T, async () => {
    const { id, pw, first } = await start();
    const s = first[0].d.d.s;
    assert.match(s, /^\d+-\d+\.[\w-]{22}$/, 'the public id, then 128 random bits');
    assert.ok(s.startsWith(`${id}.`));
    const before = await refusedCount();
    const offByOne = (secret) => (secret[0] === 'A' ? 'B' : 'A') + secret.slice(1);
    const tries = [
      's=0-999999.AAAAAAAAAAAAAAAAAAAAAA', // no such session
      `s=77-1.${s.split('.')[1]}`, // no such core
      'abc=1&s=garbage',
      `s=${id}`, // the public id (in every poll's URL) alone
      `s=${id}.${pw}`, // the poll's password is not the secret
      `s=${id}.${offByOne(s.split('.')[1])}`, // one character off
    ];
    for (const query of tries) await refused(ws(query));
    // The secret, but on another database.
    await refused(ws(`s=${s}`, 'lp-attack-other'));
    assert.equal(await refusedCount(), before + tries.length + 1);
    // The session goes on polling, and can still move.
    const res = await lp(`id=${id}&pw=${pw}&ser=1${segments([{ t: 'd', d: { r: 1, a: 'p', b: { p: '/untouched', d: 1 } } }], 0)}`);
    assert.equal(res.status, 200);
    const client = ws(`s=${s}`);
    const ack = await client.waitMessage((m) => m.t === 'c');
    assert.equal(ack.msg.d.t, 'a');
    client.close();
  });

  it('moves a session onto its WebSocket without losing, repeating or reordering a message', T, async () => {
    // Several sessions, so that their WebSockets land on other cores than theirs too.
    for (let round = 0; round < 6; round++) {
      const { id, pw, first } = await start(3);
      const s = first[0].d.d.s;
      let seg = 0;
      let ser = 1;
      const lpAnswers = []; // every numbered answer the polls brought
      let closeAfter;
      const poll = async (messages = []) => {
        const res = await lp(`id=${id}&pw=${pw}&ser=${ser++}${segments(messages, seg)}`);
        assert.equal(res.status, 200);
        for (const m of messages) seg += Buffer.from(JSON.stringify(m)).toString('base64url').match(/.{1,1840}/g).length;
        const { answers, close } = script(await res.text());
        lpAnswers.push(...answers);
        if (close !== undefined) closeAfter = close;
        return answers;
      };
      const put = (r, p, d) => ({ t: 'd', d: { r, a: 'p', b: { p, d } } });
      // Over long polling: presence with onDisconnect, and a listener.
      await poll([{ t: 'd', d: { r: 1, a: 'o', b: { p: `/presence/${round}`, d: null } } }, put(2, `/presence/${round}`, true)]);
      await poll([{ t: 'd', d: { r: 3, a: 'q', b: { p: `/m/${round}`, h: '' } } }]);
      // The WebSocket naming the session: acknowledged, pinged healthy.
      const client = ws(`s=${s}`);
      const ack = await client.waitMessage((m) => m.t === 'c');
      assert.deepEqual(ack.msg, { t: 'c', d: { t: 'a', d: {} } });
      for (let i = 0; i < 2; i++) {
        const from = client.messages.length;
        client.send({ t: 'c', d: { t: 'p', d: {} } });
        const pong = await client.waitMessage(() => true, { from });
        assert.equal(pong.msg.d.t, 'o');
      }
      // Another WebSocket naming it now is refused: one move at a time.
      await refused(ws(`s=${s}`));
      // The switch, as the SDK makes it: `a` here, then its `n` on the long poll, and from then
      // on it writes here. A write on each side around the switch.
      const held = lp(`id=${id}&pw=${pw}&ser=${ser++}`); // the poll the SDK keeps open
      client.send({ t: 'c', d: { t: 'a', d: {} } });
      const wsFrom = client.messages.length;
      client.send(put(5, `/m/${round}`, 'over the WebSocket'));
      await poll([put(4, `/m/${round}`, 'over long polling'), { t: 'c', d: { t: 'n', d: {} } }]);
      const heldAnswer = script(await (await held).text());
      lpAnswers.push(...heldAnswer.answers);
      if (heldAnswer.close !== undefined) closeAfter = heldAnswer.close;
      // The SDK reads the answers by their numbers, whatever order they came in.
      lpAnswers.sort((x, y) => x[0] - y[0]);
      assert.deepEqual(lpAnswers.map(([n]) => n), lpAnswers.map((_, i) => i + 1), 'numbered without a gap');
      const lpMessages = lpAnswers.flatMap(([, msgs]) => msgs);
      // The long poll ends with `n`, then the close after its last answer.
      assert.equal(closeAfter, lpAnswers.length, 'the close names the last answer');
      assert.deepEqual(lpMessages[lpMessages.length - 1], { t: 'c', d: { t: 'n', d: {} } });
      await client.response(5);
      // What the client reads: the long poll up to its `n`, then the WebSocket. (A reply to
      // a write that came by the polls may come by either, as the owner answers it before
      // or after the switch.) Every reply once, in order; the two writes in order.
      const merged = [...lpMessages, ...client.messages.slice(wsFrom)];
      const replies = merged.filter((m) => m.t === 'd' && m.d.r !== undefined).map((m) => m.d.r);
      assert.deepEqual(replies, [1, 2, 3, 4, 5]);
      const pushes = merged.filter((m) => m.t === 'd' && m.d.a === 'd' && m.d.b.p === `/m/${round}`).map((m) => m.d.b.d);
      assert.deepEqual(pushes.slice(-2), ['over long polling', 'over the WebSocket']);
      assert.equal(await value(`/m/${round}`), 'over the WebSocket');
      // Late polls get the close again (not a 404, which would end the SDK's connection); the
      // goodbye of the old transport does not end the session.
      const late = script(await (await lp(`id=${id}&pw=${pw}&ser=${ser++}`)).text());
      assert.deepEqual(late, { answers: [], close: closeAfter });
      assert.equal((await fetch(`http://127.0.0.1:${server.port}/.lp?disconn=t&id=${id}&pw=${pw}`, { method: 'POST' })).status, 204);
      assert.equal(await value(`/presence/${round}`), true, 'no onDisconnect during the move');
      // The session lives on the WebSocket: requests, the listener, its credentials.
      assert.equal((await client.request('p', { p: `/m/${round}`, d: 'later' })).s, 'ok');
      await client.waitMessage((m) => m.t === 'd' && m.d.a === 'd' && m.d.b.d === 'later');
      // Its secret, now in a URL, moves nothing again.
      await refused(ws(`s=${s}`));
      // The WebSocket closes: the session ends, its onDisconnect runs.
      client.close();
      const deadline = Date.now() + 5000;
      while ((await value(`/presence/${round}`)) !== null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      assert.equal(await value(`/presence/${round}`), null, 'onDisconnect when the session ends');
    }
  });

  it('a WebSocket that never switches is closed, and the session stays on long polling', T, async () => {
    const { id, pw, first } = await start();
    const s = first[0].d.d.s;
    const client = ws(`s=${s}`);
    await client.waitMessage((m) => m.t === 'c' && m.d.t === 'a');
    for (let i = 0; i < 9; i++) client.send({ t: 'c', d: { t: 'p', d: {} } });
    const closed = await client.waitClose();
    assert.deepEqual({ code: closed.code, reason: closed.reason }, { code: 1002, reason: 'too many pings before the switch' });
    assert.equal(client.messages.filter((m) => m.d.t === 'o').length, 8);
    // Its place is free again; a data message before the switch is refused too.
    const second = ws(`s=${s}`);
    await second.waitMessage((m) => m.t === 'c' && m.d.t === 'a');
    second.send({ t: 'd', d: { r: 1, a: 'p', b: { p: '/early', d: 1 } } });
    assert.equal((await second.waitClose()).code, 1002);
    assert.equal(await value('/early'), null);
    // The long poll goes on.
    const res = await lp(`id=${id}&pw=${pw}&ser=1${segments([{ t: 'd', d: { r: 1, a: 'p', b: { p: '/still', d: 'polling' } } }], 0)}`);
    assert.equal(res.status, 200);
    assert.equal(await value('/still'), 'polling');
    // The session ends (its page goes) while a WebSocket waits: that WebSocket is refused.
    const third = ws(`s=${s}`);
    await third.waitMessage((m) => m.t === 'c' && m.d.t === 'a');
    assert.equal((await fetch(`http://127.0.0.1:${server.port}/.lp?disconn=t&id=${id}&pw=${pw}`, { method: 'POST' })).status, 204);
    const ended = await third.waitClose();
    assert.deepEqual({ code: ended.code, reason: ended.reason }, { code: 1008, reason: REFUSED });
  });
});
