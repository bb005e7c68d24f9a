// Hearth volatile paths over WebTransport datagrams, falling back to the official Firebase
// SDK's WebSocket where WebTransport is unavailable. No build step, no dependencies: an ES
// module for browsers (and Node, where it always falls back).
//
//   import { connect } from './index.js';
//   const live = await connect({
//     url: 'https://game.example.com:9443',   // hearth serve --webtransport-listen
//     namespace: 'my-app',
//     token: () => user.getIdToken(),         // optional: the credential rules see as `auth`
//     certificateHashes: ['3f…'],             // optional: pin a self-signed dev certificate
//     fallback: { database, ref, set, onValue }, // the SDK's own, used without WebTransport
//   });
//   const stop = live.listen('rooms/r1/cursors', (cursors) => draw(cursors));
//   live.set(`rooms/r1/cursors/${uid}`, { x, y });
//
// The wire format is in Hearth's docs/volatile.md ("WebTransport").

/** How long `connect` waits for the WebTransport session and its credential. */
export const CONNECT_TIMEOUT_MS = 5_000;
/** How long a write waits for its acknowledgement before its promise rejects (`lost`). */
export const ACK_TIMEOUT_MS = 3_000;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** `a/b/c` from `/a/b/c/`, `a/b/c` or `a//b`. */
export function normalize(path) {
  return String(path).split('/').filter(Boolean).join('/');
}

/** The segments of `path` below `base`, or null when `path` is not at or below `base`. */
function below(base, path) {
  if (base === '') return path === '' ? [] : path.split('/');
  if (path === base) return [];
  return path.startsWith(`${base}/`) ? path.slice(base.length + 1).split('/') : null;
}

/** `value` with the node at `segments` replaced by `node` (null removes it); never mutates. */
export function setAt(value, segments, node) {
  if (segments.length === 0) return node ?? null;
  const [head, ...rest] = segments;
  const object = value !== null && typeof value === 'object' ? { ...value } : {};
  const child = setAt(object[head] ?? null, rest, node);
  if (child === null) delete object[head];
  else object[head] = child;
  return Object.keys(object).length === 0 ? null : object;
}

/**
 * Applies one push (`d`: the value at `path`; `m`: children of `path`) to the value of a
 * listener of `base`. The server pushes a default listen only at or below its path.
 */
export function applyPush(value, base, action, path, data) {
  const at = below(base, normalize(path));
  if (at === null) return { value, changed: false };
  if (action === 'd') return { value: setAt(value, at, data), changed: true };
  let next = value;
  for (const [child, node] of Object.entries(data ?? {})) {
    next = setAt(next, [...at, ...normalize(child).split('/').filter(Boolean)], node);
  }
  return { value: next, changed: true };
}

function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(Object.assign(new Error(`${what}: timed out after ${ms} ms`), { code: 'timeout' })), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

function hexBytes(hex) {
  const clean = hex.replace(/[^0-9a-f]/gi, '');
  const bytes = new Uint8Array(clean.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(clean.slice(i * 2, i * 2 + 2), 16);
  return bytes;
}

/** A refusal from the server, with its status (`permission_denied`, ...) as `code`. */
function refusal(body) {
  const error = new Error(typeof body?.d === 'string' && body.d ? body.d : body?.s ?? 'refused');
  error.code = body?.s ?? 'error';
  return error;
}

/**
 * Connects to Hearth's WebTransport endpoint, or falls back to the official SDK. Resolves to
 * `{ transport, set, listen, close }`; `transport` is `'webtransport'` or `'websocket'`.
 */
export async function connect(options) {
  const { fallback } = options;
  const available = typeof globalThis.WebTransport === 'function';
  if (available && options.url) {
    try {
      return await withTimeout(
        openWebTransport(options),
        options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS,
        'WebTransport connect',
      );
    } catch (error) {
      if (!fallback) throw error;
      options.onFallback?.(error);
    }
  } else if (!fallback) {
    throw new Error('WebTransport is unavailable here and no fallback was given');
  }
  return sdkVolatile(fallback);
}

/** The fallback: the same interface on the official SDK (WebSocket, the ordinary protocol). */
function sdkVolatile({ database, ref, set, onValue }) {
  return {
    transport: 'websocket',
    set: (path, value) => set(ref(database, normalize(path)), value),
    listen: (path, callback, onError) =>
      onValue(ref(database, normalize(path)), (snapshot) => callback(snapshot.val()), onError),
    close: () => {},
  };
}

async function openWebTransport(options) {
  const namespace = encodeURIComponent(options.namespace ?? '');
  const base = options.url.replace(/\/+$/, '');
  const init = {};
  if (options.certificateHashes?.length) {
    init.serverCertificateHashes = options.certificateHashes.map((hash) => ({
      algorithm: 'sha-256',
      value: typeof hash === 'string' ? hexBytes(hash) : hash,
    }));
  }
  const transport = new WebTransport(`${base}/.wt?ns=${namespace}`, init);
  try {
    await transport.ready;
    const session = new Session(transport, options);
    await session.start();
    return session.api();
  } catch (error) {
    try {
      transport.close();
    } catch {
      // Already closed.
    }
    throw error;
  }
}

class Session {
  constructor(transport, options) {
    this.transport = transport;
    this.options = options;
    this.nextRequest = 1;
    this.pending = new Map(); // request number -> { resolve, reject, timer }
    this.listens = new Map(); // path -> { value, callbacks: Set, errors: Set, ready }
    this.closed = false;
    this.ackTimeoutMs = options.ackTimeoutMs ?? ACK_TIMEOUT_MS;
  }

  async start() {
    const stream = await this.transport.createBidirectionalStream();
    this.stream = stream.writable.getWriter();
    this.datagrams = this.transport.datagrams.writable.getWriter();
    this.readLines(stream.readable);
    this.readDatagrams(this.transport.datagrams.readable);
    this.transport.closed.then(() => this.end('closed'), (error) => this.end(error?.message ?? 'closed'));
    const token = typeof this.options.token === 'function' ? await this.options.token() : this.options.token;
    if (token) await this.request('auth', { cred: token }, { datagram: false, ack: true });
  }

  api() {
    return {
      transport: 'webtransport',
      set: (path, value) => this.request('p', { p: `/${normalize(path)}`, d: value }, { datagram: true }),
      update: (path, children) => this.request('m', { p: `/${normalize(path)}`, d: children }, { datagram: true }),
      listen: (path, callback, onError) => this.listen(normalize(path), callback, onError),
      close: () => this.close(),
    };
  }

  /** Sends a request; resolves with the reply's data on `ok`, rejects with its refusal. */
  request(action, body, { datagram = false } = {}) {
    if (this.closed) return Promise.reject(Object.assign(new Error('session closed'), { code: 'closed' }));
    const r = this.nextRequest++;
    const text = JSON.stringify({ t: 'd', d: { r, a: action, b: body } });
    const bytes = encoder.encode(text);
    const reply = new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(r);
        reject(Object.assign(new Error(`no acknowledgement for request ${r}`), { code: 'lost' }));
      }, this.ackTimeoutMs);
      this.pending.set(r, { resolve, reject, timer });
    });
    const max = this.transport.datagrams.maxDatagramSize ?? 0;
    const sent = datagram && bytes.length <= max ? this.datagrams.write(bytes) : this.stream.write(encoder.encode(`${text}\n`));
    sent.catch(() => {});
    return reply;
  }

  listen(path, callback, onError) {
    let listen = this.listens.get(path);
    if (!listen) {
      listen = { value: null, callbacks: new Set(), errors: new Set(), ready: false };
      this.listens.set(path, listen);
      this.request('q', { p: `/${path}`, h: '' }).then(
        () => {
          listen.ready = true;
          for (const cb of listen.callbacks) cb(listen.value);
        },
        (error) => {
          this.listens.delete(path);
          for (const cb of listen.errors) cb(error);
        },
      );
    } else if (listen.ready) {
      callback(listen.value);
    }
    listen.callbacks.add(callback);
    if (onError) listen.errors.add(onError);
    return () => {
      listen.callbacks.delete(callback);
      if (onError) listen.errors.delete(onError);
      if (listen.callbacks.size === 0 && this.listens.get(path) === listen) {
        this.listens.delete(path);
        if (!this.closed) this.request('n', { p: `/${path}` }).catch(() => {});
      }
    };
  }

  onPush(action, body) {
    for (const [path, listen] of this.listens) {
      const { value, changed } = applyPush(listen.value, path, action, body.p ?? '', body.d ?? null);
      if (!changed) continue;
      listen.value = value;
      // Before the listen's `ok`, the data is its first value; it is delivered with the ok.
      if (listen.ready) for (const cb of listen.callbacks) cb(value);
    }
  }

  onMessage(message) {
    if (message?.t !== 'd') return; // the handshake and other control messages
    const data = message.d ?? {};
    if (data.r !== undefined) {
      const pending = this.pending.get(data.r);
      if (!pending) return;
      this.pending.delete(data.r);
      clearTimeout(pending.timer);
      if (data.b?.s === 'ok') pending.resolve(data.b.d);
      else pending.reject(refusal(data.b));
      return;
    }
    if (data.a === 'd' || data.a === 'm') this.onPush(data.a, data.b ?? {});
    else if (data.a === 'c') {
      const path = normalize(data.b?.p ?? '');
      const listen = this.listens.get(path);
      if (listen) {
        this.listens.delete(path);
        for (const cb of listen.errors) cb(Object.assign(new Error('listen revoked'), { code: 'permission_denied' }));
      }
    }
  }

  async readLines(readable) {
    const reader = readable.getReader();
    let buffered = '';
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffered += decoder.decode(value, { stream: true });
        let newline;
        while ((newline = buffered.indexOf('\n')) >= 0) {
          const line = buffered.slice(0, newline);
          buffered = buffered.slice(newline + 1);
          if (line) this.onMessage(JSON.parse(line));
        }
      }
    } catch {
      // The session ended.
    }
    this.end('stream closed');
  }

  async readDatagrams(readable) {
    const reader = readable.getReader();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        const text = decoder.decode(value);
        const action = text[0];
        if (action === 'd' || action === 'm') this.onPush(action, JSON.parse(text.slice(1)));
      }
    } catch {
      // The session ended.
    }
  }

  end(why) {
    if (this.closed) return;
    this.closed = true;
    for (const [, pending] of this.pending) {
      clearTimeout(pending.timer);
      pending.reject(Object.assign(new Error(`session closed: ${why}`), { code: 'closed' }));
    }
    this.pending.clear();
    this.options.onClose?.(why);
  }

  close() {
    this.end('closed by the client');
    try {
      this.transport.close();
    } catch {
      // Already closed.
    }
  }
}
