// A listener process for the crash test: speaks the realtime protocol over a raw WebSocket,
// listens at the given paths (the writers' /crash/<client> paths of one round) and prints one
// JSON line per key that a data push showed it, as soon as the push arrives. With
// --durability strict nobody may see a write before it is durable, so every key printed here
// must survive the crash. It stops when the connection drops (the server was killed) or after
// --seconds.
//
//   node crash-watcher.mjs <ws-url> <path,path,...> <seconds>

import WebSocket from 'ws';

const [url, pathsText, secondsText] = process.argv.slice(2);
const paths = pathsText.split(',').map((p) => p.replace(/^\/+|\/+$/g, ''));
const timer = setTimeout(finish, Number(secondsText) * 1000);

const ws = new WebSocket(url, { perMessageDeflate: false });
let chunks = null; // {remaining, parts} while a message arrives in several frames
let finished = false;

function finish() {
  if (finished) return;
  finished = true;
  clearTimeout(timer);
  try {
    ws.terminate();
  } catch {
    /* ignore */
  }
  process.stdout.write(JSON.stringify({ done: true }) + '\n', () => process.exit(0));
}

/** Prints every /crash/<client>/<key> that `data` at `path` shows. */
function report(path, data) {
  const keys = path.replace(/^\/+|\/+$/g, '').split('/').filter(Boolean);
  if (keys[0] !== 'crash' || data === null || data === undefined) return;
  let lines = '';
  const emit = (client, key, value) => {
    if (value !== null) lines += JSON.stringify({ seen: `${client}/${key}`, value }) + '\n';
  };
  if (keys.length === 3) {
    emit(keys[1], keys[2], data);
  } else if (keys.length === 2 && typeof data === 'object') {
    for (const [child, value] of Object.entries(data)) {
      // A merge's members may be deeper paths ("k5/pad"); this test's writers never make those.
      if (!child.includes('/')) emit(keys[1], child, value);
    }
  }
  if (lines) process.stdout.write(lines);
}

function handle(text) {
  let message;
  try {
    message = JSON.parse(text);
  } catch {
    return;
  }
  if (message.t === 'c' && message.d?.t === 'h') {
    paths.forEach((p, i) => ws.send(JSON.stringify({ t: 'd', d: { r: i + 1, a: 'q', b: { p: `/${p}`, h: '' } } })));
    return;
  }
  const body = message.t === 'd' ? message.d : null;
  if (!body || body.r !== undefined) return; // replies carry no data for us
  if (body.a === 'd' || body.a === 'm') report(body.b?.p ?? '', body.b?.d);
}

ws.on('message', (data) => {
  const text = data.toString('utf8');
  if (chunks) {
    chunks.parts.push(text);
    if (--chunks.remaining === 0) {
      const whole = chunks.parts.join('');
      chunks = null;
      handle(whole);
    }
    return;
  }
  if (text.length <= 6 && /^\d+$/.test(text)) {
    const n = Number(text);
    if (n > 0) {
      chunks = { remaining: n, parts: [] };
      return;
    }
  }
  handle(text);
});

ws.on('close', finish);
ws.on('error', () => {});
