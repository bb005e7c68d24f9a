// Rules documents: PUT/GET /.settings/rules.json (--dev) and `hearth rules check FILE`.
// Invalid documents are refused with `line L, column C: reason` and leave the rules in force.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { get, set } from 'firebase/database';
import { useHearth, T } from '../../lib/harness.mjs';
import { expectDenied, getRules, putRules, putRulesRaw, runHearth, tempDir, writeTemp } from '../../lib/rules.mjs';

const LINE_COL = /^line (\d+), column (\d+): \S/;

const VALID_WITH_COMMENTS = `{
  /* Block comment. */
  "rules": {
    // Line comment, trailing commas, and a multi-line expression.
    "items": {
      ".read": true,
      "$id": {
        ".write": "auth != null
                   && newData.isString()",
      },
    },
  },
}
`;

describe('rules: documents', () => {
  const h = useHearth();

  it('a valid document with comments is accepted, enforced, and read back verbatim', T, async () => {
    const ns = h.ns('doc');
    await putRules(h.server, ns, VALID_WITH_COMMENTS);
    const got = await getRules(h.server, ns);
    assert.equal(got.status, 200);
    assert.equal(got.text, VALID_WITH_COMMENTS);
    const anon = h.client(ns);
    const alice = h.client(ns, { emulatorMockUserToken: { sub: 'alice', user_id: 'alice' } });
    await expectDenied(set(anon.ref('items/x'), 'anon'), 'anonymous write');
    await expectDenied(set(alice.ref('items/x'), 5), 'non-string write');
    await set(alice.ref('items/x'), 'ok');
    assert.equal((await get(anon.ref('items/x'))).val(), 'ok');
    await expectDenied(get(anon.ref('other')), 'read outside items');
  });

  it('an invalid document is refused with 400 and line/column; the old rules stay', T, async () => {
    const ns = h.ns('doc');
    await putRules(h.server, ns, { rules: { '.read': true, '.write': true } });
    const cases = [
      // [document, expected line (or null to only require one)]
      ['{"rules": {".read": "auth.uid =="}}', 1],
      ['{\n  "rules": {\n    ".read": true,\n    ".write": "auth.uid == "\n  }\n}', 4],
      ['{\n  "rules": {\n    ".read": "nosuchvariable == 1"\n  }\n}', 3],
      ['{\n  "rules": {\n    ".read": true\n  \n', null], // unterminated JSON
      ['{"rules": {".read": 5}}', 1],
      ['{"rules": {".bogus": true}}', 1],
      ['{"rulez": {}}', 1],
      ['{"rules": {".read": "newData.val() == 1"}}', 1], // newData is not defined for reads
      ['{"rules": {".write": "data.val() + 1"}}', 1], // not a boolean
    ];
    for (const [doc, line] of cases) {
      const r = await putRulesRaw(h.server, ns, doc);
      assert.equal(r.status, 400, `status for ${JSON.stringify(doc)}: ${r.text}`);
      assert.equal(typeof r.json?.error, 'string', `error body for ${JSON.stringify(doc)}: ${r.text}`);
      const m = LINE_COL.exec(r.json.error);
      assert.ok(m, `error without "line L, column C:" for ${JSON.stringify(doc)}: ${r.json.error}`);
      if (line !== null) assert.equal(Number(m[1]), line, `line for ${JSON.stringify(doc)}: ${r.json.error}`);
      assert.ok(Number(m[2]) >= 1, r.json.error);
    }
    // Still the open rules: clients read and write.
    const got = await getRules(h.server, ns);
    assert.deepEqual(JSON.parse(got.text), { rules: { '.read': true, '.write': true } });
    const c = h.client(ns);
    await set(c.ref('still/open'), true);
    assert.equal((await get(h.client(ns).ref('still/open'))).val(), true);
  });

  it('the column points at the offending spot', T, async () => {
    const ns = h.ns('doc');
    const doc = '{\n  "rules": {\n    ".read": "auth != null &&& true"\n  }\n}';
    const r = await putRulesRaw(h.server, ns, doc);
    assert.equal(r.status, 400, r.text);
    // The expression string starts at column 14; the third '&' is at column 30.
    assert.equal(r.json.error, 'line 3, column 30: bitwise operators are not part of the rules language');
  });

  it('only an admin may read or replace the rules', T, async () => {
    const ns = h.ns('doc');
    const alice = 'eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJzdWIiOiJhbGljZSIsInVzZXJfaWQiOiJhbGljZSIsImlhdCI6MH0.';
    for (const token of [null, alice, 'garbage']) {
      const put = await putRulesRaw(h.server, ns, { rules: { '.read': true } }, { token });
      assert.equal(put.status, 401, `PUT with ${token}: ${put.text}`);
      const got = await getRules(h.server, ns, { token });
      assert.equal(got.status, 401, `GET with ${token}: ${got.text}`);
    }
  });

  it('hearth rules check: exit 0 for a valid file, exit 1 with line and column for an invalid one', T, async () => {
    const dir = tempDir();
    const good = writeTemp(dir, 'good.rules.json', VALID_WITH_COMMENTS);
    const ok = await runHearth(['rules', 'check', good]);
    assert.equal(ok.code, 0, `valid file: code ${ok.code}\nstdout: ${ok.stdout}\nstderr: ${ok.stderr}`);

    const bad = writeTemp(dir, 'bad.rules.json', '{\n  "rules": {\n    ".read": true,\n    ".write": "auth.uid == "\n  }\n}\n');
    const ko = await runHearth(['rules', 'check', bad]);
    assert.equal(ko.code, 1, `invalid file: stdout ${ko.stdout} stderr ${ko.stderr}`);
    const output = ko.stdout + ko.stderr;
    assert.match(output, /line 4, column \d+:/, output);

    const missing = await runHearth(['rules', 'check', `${dir}/does-not-exist.json`]);
    assert.equal(missing.code, 1, 'missing file');
    assert.match(missing.stderr, /^cannot read .*does-not-exist\.json: No such file or directory/);
    const notJson = writeTemp(dir, 'broken.json', '{"rules": {".read": true');
    const broken = await runHearth(['rules', 'check', notJson]);
    assert.equal(broken.code, 1);
    assert.match(broken.stderr, /broken\.json: line 1, column \d+: invalid JSON: /);
  });
});
