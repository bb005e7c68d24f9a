// The emulator's rules coverage report (`/.inspect/coverage.json?ns=` and the HTML page at
// `/.inspect/coverage?ns=`), after reads and writes of the official SDK with emulator mock
// users: which rule expressions ran, how often, and what they evaluated to. Kept in --dev only,
// fetched without a credential as the emulator's is, and started afresh with new rules.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { get, set } from 'firebase/database';
import { useHearth, T } from '../../lib/harness.mjs';
import { expectDenied, http, putRules, useRulesServer } from '../../lib/rules.mjs';

const RULES = `{
  // Anyone signed in reads; a room belongs to whoever created it.
  "rules": {
    "rooms": {
      "$room": {
        ".read": "auth != null",
        ".write": "auth != null && (!data.exists() || data.child('owner').val() === auth.uid)",
        "owner": {".validate": "newData.isString() && newData.val().length < 20"}
      }
    }
  }
}`;

/** `line:column` (1-based) of the first character of `text` in RULES, and of its last. */
function place(text) {
  const at = RULES.indexOf(text);
  assert.ok(at >= 0, text);
  const where = (offset) => {
    const before = RULES.slice(0, offset).split('\n');
    return `${before.length}:${before[before.length - 1].length + 1}`;
  };
  return [where(at), where(at + text.length - 1)];
}

/** The node of `tree` whose text is `text` (depth first). */
function find(tree, text) {
  if (tree.text === text) return tree;
  for (const child of tree.children ?? []) {
    const found = find(child, text);
    if (found) return found;
  }
  return undefined;
}

/** `{value: count}` of a node's values, whatever their order. */
function tally(node) {
  return Object.fromEntries(node.values.map((v) => [JSON.stringify(v.value ?? v.error), v.count]));
}

describe('rules coverage (--dev)', () => {
  const h = useHearth();
  const user = (ns, uid) => h.client(ns, { emulatorMockUserToken: { sub: uid, user_id: uid } });
  const coverage = async (ns, suffix = '.json') => {
    const r = await http(`http://127.0.0.1:${h.port}/.inspect/coverage${suffix}?ns=${ns}`);
    assert.equal(r.status, 200, r.text);
    return r;
  };

  it('counts what each expression evaluated to, at its place in the rules file', T, async () => {
    const ns = h.ns('cov');
    await putRules(h.server, ns, RULES);
    const alice = user(ns, 'alice');
    const bob = user(ns, 'bob');
    const anonymous = h.client(ns);

    await set(alice.ref('rooms/r1'), { owner: 'alice' }); // a new room: granted
    await expectDenied(set(bob.ref('rooms/r1'), { owner: 'bob' }), "bob takes alice's room");
    await set(alice.ref('rooms/r1'), { owner: 'alice', topic: 'x' }); // her own: granted
    assert.deepEqual((await get(alice.ref('rooms/r1'))).val(), { owner: 'alice', topic: 'x' });
    await expectDenied(get(anonymous.ref('rooms/r1')), 'an anonymous read');

    const report = (await coverage(ns)).json;
    assert.equal(report.rules, RULES);
    assert.deepEqual(
      report.exprs.map((e) => e.rule),
      ['/rules/rooms/$room/.read', '/rules/rooms/$room/.write', '/rules/rooms/$room/owner/.validate'],
    );
    const [read, write, validate] = report.exprs;

    assert.equal(read.text, 'auth != null');
    assert.deepEqual([read['location-start'], read['location-end']], place('auth != null'));
    assert.deepEqual(tally(read), { true: 1, false: 1 });

    const writeText = "auth != null && (!data.exists() || data.child('owner').val() === auth.uid)";
    assert.equal(write.text, writeText);
    assert.deepEqual([write['location-start'], write['location-end']], place(writeText));
    assert.deepEqual(tally(write), { true: 2, false: 1 });
    // Alice's first write found no data; bob's and her second found the room.
    assert.deepEqual(tally(find(write, '!data.exists()')), { true: 1, false: 2 });
    const owner = find(write, "data.child('owner').val()");
    assert.deepEqual([owner['location-start'], owner['location-end']], place("data.child('owner').val()"));
    assert.deepEqual(tally(owner), { '"alice"': 2 });
    assert.deepEqual(tally(find(write, "data.child('owner').val() === auth.uid")), { false: 1, true: 1 });

    // Validation ran for the two granted writes only.
    assert.deepEqual(tally(validate), { true: 2 });
    assert.deepEqual(tally(find(validate, 'newData.val().length')), { 5: 2 });

    const page = await coverage(ns, '');
    assert.match(page.headers.get('content-type'), /text\/html/);
    assert.ok(page.text.includes("data.child('owner').val()"), page.text.slice(0, 400));
    assert.ok(page.text.includes('/rules/rooms/$room/.write'));
  });

  it('starts afresh when the rules change; expressions that never ran have no values', T, async () => {
    const ns = h.ns('cov');
    await putRules(h.server, ns, RULES);
    await set(user(ns, 'carol').ref('rooms/r2'), { owner: 'carol' });
    assert.deepEqual(tally((await coverage(ns)).json.exprs[1]), { true: 1 });

    await putRules(h.server, ns, RULES);
    const report = (await coverage(ns)).json;
    for (const expr of report.exprs) assert.deepEqual(expr.values, [], expr.rule);
    assert.deepEqual(find(report.exprs[1], '!data.exists()').values, []);
  });

  it('reports no expressions for a database without a rules document', T, async () => {
    const report = (await coverage(h.ns('open'))).json;
    assert.deepEqual(report.exprs, []);
  });
});

describe('rules coverage outside --dev', () => {
  const h = useRulesServer({ dev: false, args: ['--admin-token', 'compat-admin-token-0123456789'] });

  it('is not kept: the endpoint answers 404', T, async () => {
    const r = await http(`http://127.0.0.1:${h.port}/.inspect/coverage.json?ns=${h.ns('cov')}`);
    assert.equal(r.status, 404, r.text);
    assert.match(r.json.error, /--dev/);
  });
});
