// Lone UTF-16 surrogates (issue 16, defect 7). `'😀'.slice(0, 1)` is half a surrogate pair;
// JSON.stringify writes it as the escape "\ud800", which a strict UTF-8 JSON parser refuses.
// Firebase accepts such strings; Hearth stores each lone half as U+FFFD (a Rust string cannot
// hold the unit) and must never close the connection over it.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ref, set, update, onValue, runTransaction } from 'firebase/database';
import { useHearth, T, uniqueNs } from '../../lib/harness.mjs';
import { RawClient } from '../../lib/raw.mjs';
import { withTimeout, deferred } from '../../lib/util.mjs';
import { rest, restURL } from '../rest/rest-client.mjs';

const HIGH = '😀'.slice(0, 1); // '\ud83d'
const LOW = '😀'.slice(1); // '\ude00'
const REPLACEMENT = '\ufffd';

/** Resolves with the first value at `r` that satisfies `pred`. */
function valueWhere(r, pred, ms = 10_000) {
  const d = deferred();
  const off = onValue(r, (snap) => {
    if (pred(snap.val())) d.resolve(snap.val());
  });
  return withTimeout(d.promise, ms, 'listener value').finally(off);
}

describe('attacks: lone surrogates', () => {
  const h = useHearth();

  it('the SDK set of half an emoji settles, is stored as U+FFFD, and later writes arrive', T, async () => {
    const ns = h.ns();
    const [writer, reader] = h.clients(2, ns);
    const seen = valueWhere(reader.ref('s/v'), (v) => v !== null);
    await withTimeout(set(writer.ref('s/v'), HIGH), 5_000, 'set of a lone surrogate');
    assert.equal(await seen, REPLACEMENT);

    // A lone half in a key and in an update, from the same client.
    const keyed = valueWhere(reader.ref('s/k'), (v) => v !== null);
    await withTimeout(set(writer.ref('s/k'), { [`a${LOW}`]: `x${HIGH}y` }), 5_000, 'set with a lone key');
    assert.deepEqual(await keyed, { [`a${REPLACEMENT}`]: `x${REPLACEMENT}y` });
    await withTimeout(update(writer.ref('s'), { u: LOW }), 5_000, 'update of a lone surrogate');

    // The same client's later writes still reach the server and other clients.
    const later = valueWhere(reader.ref('s/after'), (v) => v === 42);
    await withTimeout(set(writer.ref('s/after'), 42), 5_000, 'later set');
    assert.equal(await later, 42);
    const all = await valueWhere(reader.ref('s'), (v) => v && v.u !== undefined && v.after === 42);
    assert.deepEqual(all, {
      v: REPLACEMENT,
      k: { [`a${REPLACEMENT}`]: `x${REPLACEMENT}y` },
      u: REPLACEMENT,
      after: 42,
    });
  });

  it('transactions that write lone halves commit against the stored value', T, async () => {
    const ns = h.ns();
    const [client, reader] = h.clients(2, ns);
    const r = client.ref('t');
    for (let i = 0; i < 2; i++) {
      const result = await withTimeout(
        runTransaction(r, (v) => (v ?? '') + HIGH),
        5_000,
        `transaction ${i}`,
      );
      assert.equal(result.committed, true);
    }
    assert.equal(await valueWhere(reader.ref('t'), (v) => v !== null && v.length === 2), REPLACEMENT + REPLACEMENT);
  });

  it('a raw frame with "\\ud800" is answered ok and the connection stays open', T, async () => {
    const c = await RawClient.connect(h.server.wsURL(uniqueNs()));
    h.defer(() => c.terminate());
    await c.handshake();
    const r = c.nextR();
    c.sendRaw(`{"t":"d","d":{"r":${r},"a":"p","b":{"p":"/raw","d":{"k\\udc00":"\\ud800","pair":"\\ud83d\\ude00","not":"\\\\ud800"}}}}`);
    const put = await c.response(r);
    assert.deepEqual(put.body, { s: 'ok', d: '' });
    const got = await c.request('g', { p: '/raw', q: {} });
    assert.deepEqual(got, {
      s: 'ok',
      d: { [`k${REPLACEMENT}`]: REPLACEMENT, pair: '😀', not: '\\ud800' },
    });
    assert.equal(c.closed, null, 'the connection is still open');
  });

  it('a REST PUT body with a lone surrogate is stored as U+FFFD', T, async () => {
    const ns = uniqueNs();
    const url = restURL(h.server, ns, 'r');
    // JSON.stringify writes the lone half as the escape "\ud800".
    const put = await rest(url, { method: 'PUT', body: { v: HIGH } });
    assert.equal(put.status, 200);
    assert.deepEqual(put.json, { v: REPLACEMENT });
    const got = await rest(url);
    assert.deepEqual(got.json, { v: REPLACEMENT });
  });
});
