// A minimal raw client for the Firebase realtime WebSocket protocol (spec §2–§6),
// for tests that must see or send exact frames.

import WebSocket from 'ws';
import { deferred, withTimeout } from './util.mjs';

const MAX_CHUNK = 16384;

export class RawClient {
  /**
   * @param url ws://127.0.0.1:PORT/.ws?v=5&ns=NAME
   * @param opts.headers extra upgrade headers (e.g. { Host: 'x:1' })
   * @param opts.ws extra options of the `ws` client (e.g. { ca } for wss://)
   */
  constructor(url, opts = {}) {
    this.url = url;
    this.frames = []; // every incoming text frame, raw
    this.messages = []; // reassembled, parsed incoming messages (in order)
    this.parseErrors = [];
    this.listeners = []; // functions called with every parsed incoming message
    this.closed = null; // {code, reason} once closed
    this._waiters = new Set();
    this._nextR = 1;
    this._collect = null; // {remaining, parts} while receiving a split message
    this.ws = new WebSocket(url, { headers: opts.headers || {}, maxPayload: 512 * 1024 * 1024, perMessageDeflate: false, ...opts.ws });
    this.ws.on('message', (data, isBinary) => this._onFrame(isBinary ? data : data.toString('utf8'), isBinary));
    this.ws.on('close', (code, reason) => {
      this.closed = { code, reason: reason.toString() };
      this._check();
    });
    this.ws.on('error', (err) => {
      this.error = err;
      if (!this.closed) this.closed = { code: -1, reason: `error: ${err.message}` };
      this._check();
    });
    this.opened = new Promise((resolve, reject) => {
      this.ws.once('open', resolve);
      this.ws.once('error', reject);
      this.ws.once('close', () => reject(new Error('closed before open')));
    });
    this.opened.catch(() => {});
  }

  static async connect(url, opts) {
    const c = new RawClient(url, opts);
    await withTimeout(c.opened, 10_000, `ws open ${url}`);
    return c;
  }

  _onFrame(text, isBinary) {
    this.frames.push(isBinary ? { binary: true, length: text.length } : text);
    if (isBinary) return;
    if (this._collect) {
      this._collect.parts.push(text);
      if (--this._collect.remaining === 0) {
        const full = this._collect.parts.join('');
        this._collect = null;
        this._parse(full);
      }
      return;
    }
    // Same rule as the JS client: a frame of <= 6 chars that is a number starts a chunk run.
    if (text.length <= 6 && /^\d+$/.test(text)) {
      const n = Number(text);
      if (n > 0) {
        this._collect = { remaining: n, parts: [] };
        return;
      }
    }
    this._parse(text);
  }

  _parse(text) {
    try {
      const msg = JSON.parse(text);
      this.messages.push(msg);
      for (const l of this.listeners) l(msg);
    } catch (e) {
      this.parseErrors.push({ text: text.slice(0, 200), error: e.message });
    }
    this._check();
  }

  _check() {
    for (const w of [...this._waiters]) {
      let hit;
      try {
        hit = w.find();
      } catch (e) {
        this._waiters.delete(w);
        w.reject(e);
        continue;
      }
      if (hit !== undefined) {
        this._waiters.delete(w);
        w.resolve(hit);
      } else if (this.closed && !w.allowClose) {
        this._waiters.delete(w);
        w.reject(new Error(`connection closed (${this.closed.code} ${this.closed.reason}) while waiting for ${w.label}`));
      }
    }
  }

  /** Wait for the first message (from index `from`) satisfying pred; resolves {msg, index}. */
  waitMessage(pred, { from = 0, ms = 10_000, label = 'message' } = {}) {
    const d = deferred();
    let next = from; // scan incrementally: each message is tested once per waiter
    const w = {
      label,
      resolve: d.resolve,
      reject: d.reject,
      find: () => {
        for (; next < this.messages.length; next++) {
          if (pred(this.messages[next])) return { msg: this.messages[next], index: next };
        }
        return undefined;
      },
    };
    this._waiters.add(w);
    this._check();
    return withTimeout(d.promise, ms, label).finally(() => this._waiters.delete(w));
  }

  /** Wait until the socket is closed; resolves {code, reason}. */
  waitClose(ms = 10_000) {
    const d = deferred();
    const w = { label: 'close', allowClose: true, resolve: d.resolve, reject: d.reject, find: () => this.closed || undefined };
    this._waiters.add(w);
    this._check();
    return withTimeout(d.promise, ms, 'close').finally(() => this._waiters.delete(w));
  }

  /** The handshake payload {ts, v, h, s}. */
  async handshake(ms = 10_000) {
    const { msg } = await this.waitMessage((m) => m && m.t === 'c' && m.d && m.d.t === 'h', { ms, label: 'handshake' });
    return msg.d.d;
  }

  sendRaw(text) {
    this.ws.send(text);
  }

  send(obj) {
    this.ws.send(JSON.stringify(obj));
  }

  /** Send a JSON message split into chunks the way the JS client does (count frame first). */
  sendSplit(obj, chunk = MAX_CHUNK) {
    return this.sendSplitText(JSON.stringify(obj), chunk);
  }

  /** Send message text split into chunks the way the JS client does (count frame first). */
  sendSplitText(text, chunk = MAX_CHUNK) {
    const parts = [];
    for (let i = 0; i < text.length; i += chunk) parts.push(text.slice(i, i + chunk));
    this.ws.send(String(parts.length));
    for (const p of parts) this.ws.send(p);
    return parts.length;
  }

  nextR() {
    return this._nextR++;
  }

  /** Send a data request; returns its r. */
  sendRequest(a, b, r = this.nextR()) {
    this.send({ t: 'd', d: { r, a, b } });
    return r;
  }

  /** Wait for the response to request r; resolves {msg, index, body}. */
  async response(r, ms = 10_000) {
    const res = await this.waitMessage((m) => m && m.t === 'd' && m.d && m.d.r === r && m.d.b !== undefined, { ms, label: `response r=${r}` });
    return { ...res, body: res.msg.d.b };
  }

  /** Send a request and wait for its response body {s, d}. */
  async request(a, b, ms = 10_000) {
    const r = this.sendRequest(a, b);
    return (await this.response(r, ms)).body;
  }

  /** Data pushes (a = d / m) received so far, optionally from index `from`. */
  pushes(from = 0) {
    return this.messages.slice(from).filter((m) => m && m.t === 'd' && m.d && m.d.r === undefined && typeof m.d.a === 'string');
  }

  close() {
    try {
      this.ws.close();
    } catch {
      /* ignore */
    }
  }

  terminate() {
    try {
      this.ws.terminate();
    } catch {
      /* ignore */
    }
  }
}

/**
 * Applies the untagged data pushes (a = "d" / "m") a RawClient receives to a local JSON
 * tree, so tests can assert on the resulting value without caring whether the server
 * chose overwrites, merges, or a different granularity. Values are kept in export form.
 */
export class PushModel {
  constructor(client, { tag } = {}) {
    this.root = null;
    this.tag = tag;
    this.count = 0;
    for (const m of client.messages) this._apply(m);
    client.listeners.push((m) => this._apply(m));
  }

  _apply(m) {
    if (!m || m.t !== 'd' || !m.d || m.d.r !== undefined || !m.d.b) return;
    const { a, b } = m.d;
    if (b.t !== this.tag) return;
    if (a === 'd') this.root = setAt(this.root, segs(b.p), b.d);
    else if (a === 'm') for (const [k, v] of Object.entries(b.d || {})) this.root = setAt(this.root, [...segs(b.p), ...segs(k)], v);
    else return;
    this.count++;
  }

  get(p) {
    let node = this.root;
    for (const s of segs(p)) {
      if (node === null || typeof node !== 'object') return null;
      node = s in node ? node[s] : null;
    }
    return node;
  }
}

function segs(p) {
  return String(p).split('/').filter(Boolean);
}

function setAt(node, path, value) {
  if (path.length === 0) return value === undefined ? null : value;
  const obj = node !== null && typeof node === 'object' ? { ...node } : {};
  const [head, ...rest] = path;
  const child = setAt(head in obj ? obj[head] : null, rest, value);
  if (child === null || (typeof child === 'object' && Object.keys(child).length === 0)) delete obj[head];
  else obj[head] = child;
  return Object.keys(obj).length ? obj : null;
}
