// Helpers for the REST tests: fetch wrappers, a server-sent-events client on node:http, and a
// raw TCP client for requests that fetch cannot make (lying Content-Length, several requests on
// one kept-alive connection, bodies cut short).

import http from 'node:http';
import net from 'node:net';
import { deferred, withTimeout } from '../../lib/util.mjs';

export const OWNER = { authorization: 'Bearer owner' };

/** Base URL of the server, e.g. http://127.0.0.1:PORT */
export function baseURL(server) {
  return `http://127.0.0.1:${server.port}`;
}

/** `/path.json?ns=...&extra` on the server. */
export function restURL(server, ns, path, params = {}) {
  const clean = path.replace(/^\/+/, '');
  const q = new URLSearchParams({ ns, ...params });
  return `${baseURL(server)}/${clean}.json?${q}`;
}

/**
 * fetch, returning { status, headers, text, json } (json is undefined when the body is not JSON).
 * `body` may be any JSON value (serialized) or a string passed as is with `raw: true`.
 */
export async function rest(url, { method = 'GET', body, raw = false, headers = {} } = {}) {
  const init = { method, headers: { ...headers } };
  if (body !== undefined) {
    init.body = raw ? body : JSON.stringify(body);
    init.headers['content-type'] = init.headers['content-type'] || 'application/json';
  }
  const res = await fetch(url, init);
  const text = await res.text();
  let json;
  try {
    json = text === '' ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

/**
 * The shard of a namespace, as the server computes it (crates/ground/src/namespace.rs):
 * FNV-1a, then the 64-bit MurmurHash3 finalizer, modulo the shard count.
 */
export function ownerShard(ns, shards) {
  const M = 0xffffffffffffffffn;
  let h = 0xcbf29ce484222325n;
  for (const b of Buffer.from(ns, 'utf8')) {
    h ^= BigInt(b);
    h = (h * 0x100000001b3n) & M;
  }
  h ^= h >> 33n;
  h = (h * 0xff51afd7ed558ccdn) & M;
  h ^= h >> 33n;
  h = (h * 0xc4ceb9fe1a85ec53n) & M;
  h ^= h >> 33n;
  return Number(h % BigInt(shards));
}

/** A fresh namespace owned by `shard` (of `shards`). */
export function nsOnShard(prefix, shard, shards = 2) {
  for (let i = 0; ; i++) {
    const ns = `${prefix}-${i}-${Math.random().toString(36).slice(2, 8)}`;
    if (ownerShard(ns, shards) === shard) return ns;
  }
}

/**
 * A server-sent-events stream: GET url with Accept: text/event-stream.
 *   events: [{ event, data }] with data parsed as JSON when possible
 *   await s.until(pred) / s.untilCount(n) / s.close()
 */
export class SseStream {
  constructor(url, { headers = {} } = {}) {
    this.url = url;
    this.events = [];
    this.status = null;
    this.headers = null;
    this.ended = false;
    this.error = null;
    this._buffer = '';
    this._waiters = new Set();
    this.opened = deferred();
    this.opened.promise.catch(() => {});
    const u = new URL(url);
    this.req = http.get(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname + u.search,
        agent: false,
        headers: { accept: 'text/event-stream', 'cache-control': 'no-cache', ...headers },
      },
      (res) => {
        this.res = res;
        this.status = res.statusCode;
        this.headers = res.headers;
        this.opened.resolve(res);
        res.setEncoding('utf8');
        res.on('data', (chunk) => this._onData(chunk));
        res.on('end', () => {
          this.ended = true;
          this._check();
        });
        res.on('error', (e) => this._fail(e));
      },
    );
    this.req.on('error', (e) => {
      this.opened.reject(e);
      this._fail(e);
    });
  }

  _fail(e) {
    if (!this.error) this.error = e;
    this.ended = true;
    this._check();
  }

  _onData(chunk) {
    this._buffer += chunk;
    let at;
    while ((at = this._buffer.indexOf('\n\n')) >= 0) {
      const block = this._buffer.slice(0, at);
      this._buffer = this._buffer.slice(at + 2);
      const event = { event: 'message', data: '', raw: block };
      for (const line of block.split('\n')) {
        const colon = line.indexOf(':');
        const name = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (name === 'event') event.event = value;
        else if (name === 'data') event.data = event.data ? `${event.data}\n${value}` : value;
      }
      try {
        event.data = JSON.parse(event.data);
      } catch {
        /* keep the text */
      }
      this.events.push(event);
    }
    this._check();
  }

  /** Data events only (put and patch). */
  get dataEvents() {
    return this.events.filter((e) => e.event === 'put' || e.event === 'patch');
  }

  _check() {
    for (const w of [...this._waiters]) {
      let ok = false;
      try {
        ok = w.pred(this);
      } catch (e) {
        this._waiters.delete(w);
        w.reject(e);
        continue;
      }
      if (ok) {
        this._waiters.delete(w);
        w.resolve(this);
      } else if (this.ended && !w.allowEnd) {
        this._waiters.delete(w);
        w.reject(new Error(`stream ended (${this.error ? this.error.message : 'eof'}) before ${w.what}; events=${JSON.stringify(this.events).slice(0, 1500)}`));
      }
    }
  }

  until(pred, ms = 10_000, what = 'condition', { allowEnd = false } = {}) {
    const d = deferred();
    const w = { pred, resolve: d.resolve, reject: d.reject, what, allowEnd };
    this._waiters.add(w);
    this._check();
    return withTimeout(d.promise, ms, `${this.url}: ${what}`).catch((e) => {
      this._waiters.delete(w);
      throw new Error(`${e.message}; events=${JSON.stringify(this.events).slice(0, 1500)}`);
    });
  }

  /** Wait until `n` data events (put/patch) arrived. */
  untilData(n, ms = 10_000) {
    return this.until((s) => s.dataEvents.length >= n, ms, `${n} data events`);
  }

  /** Wait for the stream to end (the server closed it). */
  untilEnd(ms = 10_000) {
    return this.until((s) => s.ended, ms, 'end of stream', { allowEnd: true });
  }

  close() {
    this.req.destroy();
  }
}

/**
 * A raw HTTP/1.1 connection: write bytes, read responses (Content-Length bodies) in order.
 */
export class RawHttp {
  static async connect(port) {
    const c = new RawHttp(port);
    await withTimeout(c.connected, 5_000, 'raw connect');
    return c;
  }

  constructor(port) {
    this.socket = net.connect({ host: '127.0.0.1', port });
    this.connected = new Promise((resolve, reject) => {
      this.socket.once('connect', resolve);
      this.socket.once('error', reject);
    });
    this.connected.catch(() => {});
    this.buffer = Buffer.alloc(0);
    this.closed = false;
    this._waiters = new Set();
    this.socket.on('data', (d) => {
      this.buffer = Buffer.concat([this.buffer, d]);
      this._check();
    });
    this.socket.on('close', () => {
      this.closed = true;
      this._check();
    });
    this.socket.on('error', () => {});
  }

  write(data) {
    return new Promise((resolve) => {
      if (this.socket.destroyed) return resolve(false);
      this.socket.write(data, (err) => resolve(!err));
    });
  }

  /** One complete response (status line, headers, Content-Length body). */
  _take() {
    const end = this.buffer.indexOf('\r\n\r\n');
    if (end < 0) return null;
    const head = this.buffer.subarray(0, end).toString('latin1');
    const [statusLine, ...lines] = head.split('\r\n');
    const headers = {};
    for (const line of lines) {
      const i = line.indexOf(':');
      headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
    }
    const length = Number(headers['content-length'] || 0);
    if (this.buffer.length < end + 4 + length) return null;
    const body = this.buffer.subarray(end + 4, end + 4 + length).toString('utf8');
    this.buffer = this.buffer.subarray(end + 4 + length);
    return { status: Number(statusLine.split(' ')[1]), headers, body };
  }

  _check() {
    for (const w of [...this._waiters]) {
      const r = this._take();
      if (r) {
        this._waiters.delete(w);
        w.resolve(r);
      } else if (this.closed) {
        this._waiters.delete(w);
        w.reject(new Error('connection closed before a complete response'));
      }
    }
  }

  response(ms = 5_000) {
    const d = deferred();
    const w = { resolve: d.resolve, reject: d.reject };
    this._waiters.add(w);
    this._check();
    return withTimeout(d.promise, ms, 'raw HTTP response').finally(() => this._waiters.delete(w));
  }

  /** Resolves once the server closed the connection. */
  untilClosed(ms = 5_000) {
    const d = deferred();
    const check = () => (this.closed ? d.resolve() : setTimeout(check, 10));
    check();
    return withTimeout(d.promise, ms, 'raw HTTP close');
  }

  close() {
    this.socket.destroy();
  }
}

/** A request head (and optional body) as raw bytes. */
export function rawRequest(method, target, headers = {}, body) {
  const lines = [`${method} ${target} HTTP/1.1`, 'Host: 127.0.0.1'];
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  if (body !== undefined && !Object.keys(headers).some((k) => /^(content-length|transfer-encoding)$/i.test(k))) {
    lines.push(`Content-Length: ${Buffer.byteLength(body)}`);
  }
  return `${lines.join('\r\n')}\r\n\r\n${body ?? ''}`;
}
