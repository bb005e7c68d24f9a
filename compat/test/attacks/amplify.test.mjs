// Amplification by refused writes (issue 16, defect 3): a write that no rule could allow must
// be refused before its data is read or parsed. Before the fix, an anonymous 20 MB array PUT
// to a locked database cost about 1.5 GB of memory and 5 s of its shard, and every other
// database of that shard waited.
//
// Each server runs one shard (--threads 1), so the admin's database shares the attacked
// database's shard. Memory is the server's peak resident size (VmHWM), read from /proc.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { T } from '../../lib/harness.mjs';
import { RawClient } from '../../lib/raw.mjs';
import { http, tempDir, useRulesServer, writeTemp } from '../../lib/rules.mjs';

const ADMIN_TOKEN = 'compat-admin-token-amplify-0123456789';
const BEARER = { authorization: `Bearer ${ADMIN_TOKEN}` };
const DENIED_REST = { error: 'Permission denied' };
const DENIED_WS = { s: 'permission_denied', d: 'Permission denied' };

/** An array of `bytes / 2` ones: the densest JSON there is, about 20 MB. */
const HUGE_ARRAY = `[${'1,'.repeat(10_000_000 - 1)}1]`;
/** How much the server's peak memory may grow while it refuses (it holds nothing). */
const MAX_GROWTH_KB = 64 * 1024;
/**
 * A generous bound for the admin's write, as a safety check rather than a benchmark: before
 * the fixes it took 5-15 s; after them 0.3-0.65 s on a busy 2-core machine, where the log
 * record of a 20 MB write (about 0.35 s of the shard's CPU) is what remains.
 */
// 0.3-0.65 s measured alone when the bound was set; 1.0-2.2 s in the fresh-clone CI of
// 2026-11-26, where other test files run beside this one on the same two cores, and 3.01 s
// once in that of 2026-11-27 (the WebSocket update); the 20 MB writes were 7-15 s before
// they left the shard's thread, which this bound still catches.
const MAX_ADMIN_MS = 4000;
// On a machine so busy that the attack itself takes many seconds, the bound is half of the
// attack's own time, measured in the same test: a shard held for the whole of the large write
// (the defect) makes the slowest admin write about as long as the attack.
const adminBound = (attackMs) => Math.max(MAX_ADMIN_MS, attackMs / 2);
/** How long the client waits for a 20 MB write's answer: liveness, not speed. */
const ANSWER_WAIT_MS = 60_000;

function statusKb(pid, field) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = status.match(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm'));
  assert.ok(match, `no ${field} in /proc/${pid}/status`);
  return Number(match[1]);
}

/**
 * Runs `attack` while an admin writes to `otherNs` again and again (one write at a time, until
 * the attack has its answer and twice after); returns the attack's result and the slowest
 * admin write in ms.
 */
async function whileAdminWrites(server, otherNs, attack) {
  let done = false;
  let slowest = 0;
  let writes = 0;
  const admin = (async () => {
    let after = 0;
    while (after < 2) {
      if (done) after += 1;
      const started = performance.now();
      const put = await http(server.url(otherNs, 'counter'), { method: 'PUT', body: ++writes, headers: BEARER });
      slowest = Math.max(slowest, performance.now() - started);
      assert.equal(put.status, 200, put.text);
    }
  })();
  try {
    const started = performance.now();
    const result = await attack();
    const attackMs = performance.now() - started;
    done = true;
    await admin;
    return { result, slowest, attackMs };
  } finally {
    done = true;
    await admin.catch(() => {});
  }
}

function checkAfter(server, baseKb, { slowest, attackMs }, what) {
  const grownKb = statusKb(server.pid, 'VmHWM') - baseKb;
  assert.ok(grownKb < MAX_GROWTH_KB, `${what}: the server's peak memory grew by ${grownKb} kB`);
  assert.ok(slowest < adminBound(attackMs),
    `${what}: an admin write on the same shard took ${slowest.toFixed(0)} ms, the attack ${attackMs.toFixed(0)} ms`);
}

async function rawClient(server, ns) {
  const c = await RawClient.connect(server.wsURL(ns));
  await c.handshake();
  return c;
}

describe('attacks: refused writes cost nothing (locked server)', () => {
  const h = useRulesServer({ dev: false, threads: 1, args: ['--admin-token', ADMIN_TOKEN] });

  it('an anonymous 20 MB REST PUT is refused without being parsed', T, async () => {
    const [ns, other] = [h.ns('victim'), h.ns('other')];
    const baseKb = statusKb(h.server.pid, 'VmHWM');
    const { result, ...timing } = await whileAdminWrites(h.server, other, () =>
      http(h.server.url(ns, 'big'), { method: 'PUT', raw: true, body: HUGE_ARRAY }),
    );
    assert.equal(result.status, 401, result.text);
    assert.deepEqual(result.json, DENIED_REST);
    checkAfter(h.server, baseKb, timing, 'REST PUT');
    const stored = await http(h.server.url(ns, 'big'), { headers: BEARER });
    assert.equal(stored.text, 'null');
  });

  it('an anonymous 20 MB WebSocket put and update are refused without being parsed', T, async () => {
    const [ns, other] = [h.ns('victim'), h.ns('other')];
    const c = await rawClient(h.server, ns);
    h.defer(() => c.terminate());
    const baseKb = statusKb(h.server.pid, 'VmHWM');
    for (const [a, p, d] of [
      ['p', '/big', HUGE_ARRAY],
      ['m', '/', `{"big":${HUGE_ARRAY}}`],
    ]) {
      const { result, ...timing } = await whileAdminWrites(h.server, other, async () => {
        const r = c.nextR();
        c.sendSplitText(`{"t":"d","d":{"r":${r},"a":"${a}","b":{"p":"${p}","d":${d}}}}`);
        return (await c.response(r, ANSWER_WAIT_MS)).body;
      });
      assert.deepEqual(result, DENIED_WS, a);
      checkAfter(h.server, baseKb, timing, `WebSocket ${a}`);
    }
    assert.equal(c.closed, null, 'the connection stays open');
    const get = await http(h.server.url(ns, 'big'), { headers: BEARER });
    assert.equal(get.text, 'null');
  });
});

// A large allowed write is parsed, converted into the tree and answered off the shard's
// thread: only its commit and log record stay on it. Before, the admin's small writes next
// door waited seconds (7-15 s for 20 MB on a loaded 2-core machine).
describe('attacks: large allowed writes do not stall their shard', () => {
  const h = useRulesServer({ dev: false, threads: 1, args: ['--admin-token', ADMIN_TOKEN] });

  // Three 20 MB writes take seconds each on a loaded machine: a bound of its own.
  it('an admin 20 MB write does not hold up the other databases of its shard for long', { timeout: 120_000 }, async () => {
    const [ns, other] = [h.ns('big'), h.ns('other')];
    // The client's own work stays out of the measured window, which would otherwise count it
    // as the server's: the 20 MB answer is compared as text, never parsed, and the WebSocket
    // message is split into frames before the admin starts writing.
    const rest = await whileAdminWrites(h.server, other, async () => {
      const res = await fetch(h.server.url(ns, 'rest'), { method: 'PUT', body: HUGE_ARRAY, headers: BEARER });
      return { status: res.status, text: await res.text() };
    });
    assert.equal(rest.result.status, 200, rest.result.text.slice(0, 200));
    assert.ok(rest.result.text === HUGE_ARRAY, 'the answer repeats the value written');
    const c = await rawClient(h.server, ns);
    h.defer(() => c.terminate());
    assert.equal((await c.request('auth', { cred: ADMIN_TOKEN })).s, 'ok');
    const slowest = { REST: rest };
    for (const [a, p, d, written] of [
      ['p', '/ws', HUGE_ARRAY, 'ws'],
      ['m', '/', `{"upd":${HUGE_ARRAY}}`, 'upd'],
    ]) {
      const r = c.nextR();
      const message = `{"t":"d","d":{"r":${r},"a":"${a}","b":{"p":"${p}","d":${d}}}}`;
      const frames = [];
      for (let i = 0; i < message.length; i += 16384) frames.push(message.slice(i, i + 16384));
      const ws = await whileAdminWrites(h.server, other, async () => {
        c.ws.send(String(frames.length));
        for (const frame of frames) c.ws.send(frame);
        return (await c.response(r, ANSWER_WAIT_MS)).body;
      });
      assert.deepEqual(ws.result, { s: 'ok', d: '' }, a);
      const last = await http(h.server.url(ns, `${written}/9999999`), { headers: BEARER });
      assert.equal(last.text, '1', a);
      slowest[`WebSocket ${a}`] = ws;
    }
    const times = Object.fromEntries(Object.entries(slowest).map(([what, t]) => [what, [Math.round(t.slowest), Math.round(t.attackMs)]]));
    console.log('slowest admin write, the large write (ms):', JSON.stringify(times));
    for (const [what, { slowest: ms, attackMs }] of Object.entries(slowest)) {
      assert.ok(ms < adminBound(attackMs), `${what}: an admin write took ${ms.toFixed(0)} ms, the large write ${attackMs.toFixed(0)} ms`);
    }
  });
});

describe('attacks: refused writes cost nothing (rules)', () => {
  const rules = { rules: { users: { $uid: { '.write': 'auth != null && auth.uid === $uid' } } } };
  const h = useRulesServer(() => ({
    dev: false,
    threads: 1,
    args: ['--admin-token', ADMIN_TOKEN, '--rules', writeTemp(tempDir(), 'rules.json', JSON.stringify(rules))],
  }));

  it('a large anonymous write where only signed-in owners may write is refused early', T, async () => {
    const [ns, other] = [h.ns('victim'), h.ns('other')];
    const c = await rawClient(h.server, ns);
    h.defer(() => c.terminate());
    const baseKb = statusKb(h.server.pid, 'VmHWM');
    const { result, ...timing } = await whileAdminWrites(h.server, other, async () => {
      const r = c.nextR();
      c.sendSplitText(`{"t":"d","d":{"r":${r},"a":"m","b":{"p":"/users","d":{"alice":${HUGE_ARRAY}}}}}`);
      return (await c.response(r, ANSWER_WAIT_MS)).body;
    });
    assert.deepEqual(result, DENIED_WS);
    const rest = await http(h.server.url(ns, 'users/alice'), { method: 'PUT', raw: true, body: HUGE_ARRAY });
    assert.equal(rest.status, 401, rest.text);
    assert.deepEqual(rest.json, DENIED_REST);
    checkAfter(h.server, baseKb, timing, 'rules');
  });
});
