// A writer process for the crash test: speaks the realtime protocol over a raw WebSocket,
// sends writes at a steady rate with several in flight, and prints one JSON line per
// acknowledged key on stdout as soon as its `ok` arrives. It stops when the connection drops
// (the server was killed) or after --seconds.
//
//   node crash-writer.mjs <ws-url> <client-id> <writes-per-second> <seconds>
//
// Values are a pure function of (client, n), so the test can also check that whatever is in
// the database after recovery is something a client really sent.

import WebSocket from 'ws';

const [url, client, rateText, secondsText] = process.argv.slice(2);
const rate = Number(rateText);
const stopAt = Date.now() + Number(secondsText) * 1000;

/** The value a client writes as its n-th key. */
export function valueOf(client, n) {
  return { c: client, n, pad: 'x'.repeat((n * 7919) % 2001) }; // 0 to 2000 bytes
}

const ws = new WebSocket(url, { perMessageDeflate: false });
const pending = new Map(); // request id -> [[key, value], ...]
let nextRequest = 1;
let n = 0;
let timer = null;

function send(action, body, keys) {
  const r = nextRequest++;
  pending.set(r, keys);
  ws.send(JSON.stringify({ t: 'd', d: { r, a: action, b: body } }));
}

function tick() {
  if (Date.now() > stopAt) return finish();
  n += 1;
  if (n % 5 === 0) {
    // A multi-path update of two fresh keys: both are acknowledged together.
    const first = `m${n}a`;
    const second = `m${n}b`;
    const data = { [first]: valueOf(client, n), [second]: valueOf(client, n + 0.5) };
    send('m', { p: `/crash/${client}`, d: data }, [
      [`${client}/${first}`, data[first]],
      [`${client}/${second}`, data[second]],
    ]);
  } else {
    const key = `k${n}`;
    const value = valueOf(client, n);
    send('p', { p: `/crash/${client}/${key}`, d: value }, [[`${client}/${key}`, value]]);
  }
}

function finish() {
  clearInterval(timer);
  process.stdout.write(JSON.stringify({ done: true }) + '\n', () => process.exit(0));
}

ws.on('message', (data) => {
  const text = data.toString('utf8');
  if (/^\d+$/.test(text)) return; // these writes never make split replies
  let message;
  try {
    message = JSON.parse(text);
  } catch {
    return;
  }
  if (message.t === 'c' && message.d?.t === 'h' && !timer) {
    timer = setInterval(tick, 1000 / rate);
    return;
  }
  const reply = message.t === 'd' ? message.d : null;
  if (!reply || reply.r === undefined) return;
  const keys = pending.get(reply.r);
  pending.delete(reply.r);
  if (!keys) return;
  if (reply.b?.s !== 'ok') {
    process.stdout.write(JSON.stringify({ refused: reply.b }) + '\n');
    return;
  }
  let lines = '';
  for (const [key, value] of keys) lines += JSON.stringify({ key, value }) + '\n';
  process.stdout.write(lines);
});

ws.on('close', finish);
ws.on('error', () => {});
