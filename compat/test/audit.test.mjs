// The audit trail (docs/audit.md) against the real binary: every acknowledged write of an
// audited database traced once with who, how, from where and which rule allowed it, from the
// SDK and REST; nothing traced that was refused; each traced exactly once across a SIGKILL in
// the middle of writes; erasure of a user complete and lasting; retention applied.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { get, set, update, onDisconnect, runTransaction } from 'firebase/database';
import { useHearth, T } from '../lib/harness.mjs';
import { waitFor } from '../lib/util.mjs';
import { OWNER, baseURL, rest, restURL } from './rest/rest-client.mjs';

const RULES = {
  rules: {
    '.read': true,
    rooms: { $room: { '.write': 'auth != null' } },
    open: { '.write': true },
  },
};

describe('audit trail', () => {
  const h = useHearth();
  const settings = (ns, file) => `${baseURL(h.server)}/.settings/${file}?ns=${ns}`;
  const admin = (url, init = {}) => rest(url, { ...init, headers: OWNER });
  const trail = async (ns, params = {}) => {
    const q = new URLSearchParams({ ns, ...params });
    const answer = await admin(`${baseURL(h.server)}/.settings/auditTrail.json?${q}`);
    assert.equal(answer.status, 200, answer.text);
    return answer.text.split('\n').filter(Boolean).map((line) => JSON.parse(line));
  };
  const audited = async (ns, retentionDays) => {
    const body = retentionDays ? { enabled: true, retentionDays } : { enabled: true };
    const on = await admin(settings(ns, 'audit.json'), { method: 'PUT', body });
    assert.equal(on.status, 200, on.text);
    assert.equal((await admin(settings(ns, 'rules.json'), { method: 'PUT', body: RULES })).status, 200);
  };

  it('is off unless asked, and only admins reach it', T, async () => {
    const ns = h.ns('off');
    assert.deepEqual((await admin(settings(ns, 'audit.json'))).json, { enabled: false, retentionDays: 30 });
    await admin(restURL(h.server, ns, 'open/a'), { method: 'PUT', body: 1 });
    assert.deepEqual(await trail(ns), []);
    assert.equal((await rest(`${baseURL(h.server)}/.settings/auditTrail.json?ns=${ns}`)).status, 401);
    assert.equal((await rest(settings(ns, 'audit.json'), { method: 'PUT', body: { enabled: true } })).status, 401);
    for (const body of [{ retentionDays: 0 }, { retentionDays: 100000 }, { enabled: 'yes' }, true, { other: 1 }]) {
      const refused = await admin(settings(ns, 'audit.json'), { method: 'PUT', body });
      assert.equal(refused.status, 400, JSON.stringify(body));
    }
    for (const query of ['limit=0', 'since=yesterday', 'uid=']) {
      assert.equal((await admin(`${baseURL(h.server)}/.settings/auditTrail.json?ns=${ns}&${query}`)).status, 400, query);
    }
  });

  it('traces each acknowledged write with its writer, transport, address and rule, and no refused one', T, async () => {
    const ns = h.ns('who');
    await audited(ns);
    const ada = h.client(ns, { emulatorMockUserToken: { sub: 'ada', user_id: 'ada' } });
    const anonymous = h.client(ns);
    await set(ada.ref('rooms/r1/m1'), 'hello');
    await update(ada.ref('rooms/r1'), { m2: 'a', 'm3/x': 'b' });
    await runTransaction(ada.ref('rooms/r1/count'), (n) => (n ?? 0) + 1);
    await onDisconnect(ada.ref('rooms/r1/online')).set(false);
    await assert.rejects(set(anonymous.ref('rooms/r1/m4'), 'nope'), /permission_denied/i);
    await set(anonymous.ref('open/x'), 1);
    assert.equal((await rest(restURL(h.server, ns, 'rooms/r2'), { method: 'PUT', body: 1 })).status, 401);
    await admin(restURL(h.server, ns, 'rooms/r2'), { method: 'PUT', body: 2 });
    await ada.dispose();
    await waitFor(async () => (await get(anonymous.ref('rooms/r1/online'))).val() === false, 10_000);

    const entries = await waitFor(async () => {
      const now = await trail(ns);
      return now.length >= 6 ? now : null;
    }, 10_000);
    const summary = entries.map((e) => [e.op, e.path, e.uid, e.transport, e.rules.join(',')]);
    assert.deepEqual(summary, [
      ['set', '/rooms/r1/m1', 'ada', 'websocket', '/rooms/$room/.write'],
      ['update', '/rooms/r1', 'ada', 'websocket', '/rooms/$room/.write'],
      ['transaction', '/rooms/r1/count', 'ada', 'websocket', '/rooms/$room/.write'],
      ['set', '/open/x', null, 'websocket', '/open/.write'],
      ['set', '/rooms/r2', null, 'rest', 'admin'],
      ['onDisconnect', '/rooms/r1/online', 'ada', 'websocket', '/rooms/$room/.write'],
    ]);
    assert.deepEqual(entries[1].paths, ['/rooms/r1/m2', '/rooms/r1/m3/x']);
    assert.ok(entries.every((e) => e.address === '127.0.0.1'), JSON.stringify(entries));
    assert.equal(typeof entries[0].provider, 'string');
    assert.equal(entries[4].provider, 'admin');
    assert.ok(entries.every((e, i) => i === 0 || e.seq > entries[i - 1].seq), 'in log order');
    // The filters.
    assert.equal((await trail(ns, { uid: 'ada' })).length, 4);
    assert.deepEqual((await trail(ns, { path: '/rooms/r1/m3' })).map((e) => e.op), ['update']);
    assert.deepEqual((await trail(ns, { path: '/open' })).map((e) => e.path), ['/open/x']);
    assert.equal((await trail(ns, { since: String(entries[3].time + 1) })).every((e) => e.time > entries[3].time), true);
    assert.deepEqual((await trail(ns, { after: String(entries[4].seq) })).map((e) => e.op), ['onDisconnect']);
    assert.equal((await trail(ns, { limit: '2' })).length, 2);
    const metrics = (await admin(`${baseURL(h.server)}/metrics`)).text;
    assert.match(metrics, /hearth_audit_entries_total\{stage="written"\} [1-9]/);
  });

  it('traces every acknowledged write exactly once across a SIGKILL in the middle of writes', { timeout: 60_000 }, async () => {
    const ns = h.ns('crash');
    await audited(ns);
    const acked = new Set();
    let stop = false;
    const writers = Array.from({ length: 8 }, async (_, w) => {
      for (let i = 0; !stop; i++) {
        const key = `k${w}-${i}`;
        try {
          const answer = await admin(restURL(h.server, ns, `open/${key}`), { method: 'PUT', body: i });
          if (answer.status === 200) acked.add(`/open/${key}`);
        } catch {
          return; // the server is gone
        }
      }
    });
    await waitFor(() => acked.size >= 300, 20_000);
    await h.server.kill('SIGKILL');
    stop = true;
    await Promise.all(writers);
    // As if the crash came before the trail's thread wrote its last entries: the log still
    // has them, and the start copies them.
    const files = path.join(h.server.dataDir, 'audit', ns);
    const newest = path.join(files, fs.readdirSync(files).sort().at(-1));
    const lines = fs.readFileSync(newest, 'utf8').split('\n').filter(Boolean);
    assert.ok(lines.length > 100, `${lines.length} lines`);
    fs.writeFileSync(newest, lines.slice(0, -50).join('\n') + '\n{"seq":9999999,"ti');
    await h.server.start();
    const entries = [];
    for (let after = 0; ;) {
      const page = await trail(ns, { after: String(after), limit: '10000' });
      if (page.length === 0) break;
      entries.push(...page);
      after = page.at(-1).seq;
    }
    const seen = new Map();
    for (const e of entries) seen.set(e.path, (seen.get(e.path) ?? 0) + 1);
    for (const written of acked) assert.equal(seen.get(written), 1, `${written} traced once`);
    for (const [at, count] of seen) assert.equal(count, 1, `${at} traced ${count} times`);
    // What was traced and not acknowledged was written (the data has it): nothing invented.
    const data = (await admin(restURL(h.server, ns, 'open'))).json ?? {};
    for (const at of seen.keys()) assert.ok(at.slice('/open/'.length) in data, `${at} traced but not in the data`);
  });

  it('erases a user\'s entries for good, and applies the retention', T, async () => {
    const ns = h.ns('erase');
    await audited(ns);
    const ada = h.client(ns, { emulatorMockUserToken: { sub: 'ada', user_id: 'ada' } });
    const bob = h.client(ns, { emulatorMockUserToken: { sub: 'bob', user_id: 'bob' } });
    await set(ada.ref('rooms/a/1'), 1);
    await set(bob.ref('rooms/b/1'), 1);
    await set(ada.ref('rooms/a/2'), 2);
    await waitFor(async () => (await trail(ns)).length === 3, 10_000);
    const erased = await admin(`${baseURL(h.server)}/.settings/auditTrail.json?ns=${ns}&uid=ada`, { method: 'DELETE' });
    assert.deepEqual(erased.json, { erased: 2 });
    assert.deepEqual((await trail(ns)).map((e) => e.uid), ['bob']);
    assert.deepEqual(await trail(ns, { uid: 'ada' }), []);
    // The log still holds ada's entries until it is truncated: a restart must not bring
    // them back.
    await h.server.kill('SIGKILL');
    await h.server.start();
    assert.deepEqual((await trail(ns)).map((e) => e.uid), ['bob']);
    const files = path.join(h.server.dataDir, 'audit', ns);
    assert.ok(!fs.readdirSync(files).some((f) => fs.readFileSync(path.join(files, f), 'utf8').includes('"ada"')));

    // An old day's file goes once the database's retention is set.
    const old = path.join(files, '2001-01-01.jsonl');
    fs.writeFileSync(old, '{"seq":0,"time":978307200000,"op":"set","path":"/x"}\n');
    const kept = await admin(settings(ns, 'audit.json'), { method: 'PUT', body: { enabled: true, retentionDays: 7 } });
    assert.deepEqual(kept.json, { enabled: true, retentionDays: 7 });
    await waitFor(() => !fs.existsSync(old), 10_000);
    assert.equal((await trail(ns)).length, 1, 'today\'s entries stay');
  });
});
