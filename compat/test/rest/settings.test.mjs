// A database's settings and ruleset history (docs/settings.md) over REST: what each endpoint
// answers and refuses, that a deploy of rules is kept as a stable ruleset, that the labels put
// the stable ruleset in effect and a rollback is recorded too, and that all of it survives a
// SIGKILL and a SIGTERM of the server. (firebase-tools' own commands against these endpoints
// are in compat/tools/firebase-tools.test.mjs.)

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { useHearth, T } from '../../lib/harness.mjs';
import { OWNER, baseURL, rest, restURL } from './rest-client.mjs';

describe('settings and ruleset history', () => {
  const h = useHearth();
  const settings = (ns, file) => `${baseURL(h.server)}/.settings/${file}?ns=${ns}`;
  const admin = (url, init = {}) => rest(url, { ...init, headers: OWNER });
  const rules = (read) => JSON.stringify({ rules: { '.read': read, '.write': true } });
  const anonymousRead = async (ns) => (await rest(restURL(h.server, ns, 'doc'))).status;

  it('answers the defaults, takes valid values and refuses others', T, async () => {
    const ns = h.ns('settings');
    assert.deepEqual((await admin(settings(ns, 'defaultWriteSizeLimit.json'))).json, 'unlimited');
    assert.deepEqual((await admin(settings(ns, 'strictTriggerValidation.json'))).json, true);
    for (const [file, body] of [['defaultWriteSizeLimit.json', 'tiny'], ['defaultWriteSizeLimit.json', 5], ['strictTriggerValidation.json', 'yes']]) {
      const refused = await admin(settings(ns, file), { method: 'PUT', body });
      assert.equal(refused.status, 400, `${file} ${body}: ${refused.text}`);
    }
    const set = await admin(settings(ns, 'defaultWriteSizeLimit.json'), { method: 'PUT', body: 'large' });
    assert.equal(set.status, 200);
    assert.deepEqual(set.json, 'large');
    // Admins only, and only the methods each takes.
    assert.equal((await rest(settings(ns, 'defaultWriteSizeLimit.json'))).status, 401);
    assert.equal((await rest(settings(ns, 'rulesets.json'))).status, 401);
    assert.equal((await rest(`${baseURL(h.server)}/namespaces/${ns}/rulesets`)).status, 401);
    assert.equal((await admin(settings(ns, 'defaultWriteSizeLimit.json'), { method: 'POST', body: 'small' })).status, 405);
    assert.equal((await admin(settings(ns, 'rulesets/1.json'), { method: 'PUT', body: {} })).status, 405);
    assert.equal((await admin(settings(ns, 'rulesets/no%20such.json'))).status, 404);
    assert.equal((await admin(settings(ns, 'other.json'))).status, 404);
    const huge = await admin(settings(ns, 'strictTriggerValidation.json'), { method: 'PUT', body: ' '.repeat(4096) + 'true', raw: true });
    assert.equal(huge.status, 413);
  });

  it('keeps deploys and staged rulesets; the labels put the stable one in effect', T, async () => {
    const ns = h.ns('history');
    await admin(restURL(h.server, ns, 'doc'), { method: 'PUT', body: 1 });
    assert.equal((await admin(settings(ns, 'rules.json'), { method: 'PUT', body: rules(true), raw: true })).status, 200);
    const staged = await admin(settings(ns, 'rulesets.json'), { method: 'POST', body: rules(false), raw: true });
    assert.deepEqual(staged.json, { id: '2' });
    assert.equal(await anonymousRead(ns), 200, 'staging is not releasing');
    const broken = await admin(settings(ns, 'rulesets.json'), { method: 'POST', body: '{"rules": {".read": "auth.uid =="}}', raw: true });
    assert.equal(broken.status, 400);
    assert.match(broken.json.error, /line 1, column/);

    assert.equal((await admin(settings(ns, 'ruleset_labels.json'), { method: 'PUT', body: { stable: '7' } })).status, 404);
    assert.equal((await admin(settings(ns, 'ruleset_labels.json'), { method: 'PUT', body: { canary: '1' } })).status, 400);
    const moved = await admin(settings(ns, 'ruleset_labels.json'), { method: 'PUT', body: { stable: '2', canary: '1' } });
    assert.deepEqual(moved.json, { stable: '2', canary: '1' });
    assert.equal(await anonymousRead(ns), 401);
    assert.equal((await admin(settings(ns, 'rules.json'))).text, rules(false));
    // Each change is recorded with where it came from.
    const recorded = (await admin(settings(ns, 'rulesets.json'))).json;
    assert.ok(recorded.rulesets.every((r) => r.by === 'an admin, over REST, from 127.0.0.1'), JSON.stringify(recorded));
    assert.equal(recorded.releases.at(-1).by, 'an admin, over REST, from 127.0.0.1');

    const one = await admin(`${baseURL(h.server)}/namespaces/${ns}/rulesets/1`);
    assert.equal(one.json.source, rules(true));
    assert.match(one.json.createdAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    const labels = await admin(`${baseURL(h.server)}/namespaces/${ns}/ruleset_labels`);
    assert.deepEqual(labels.json, { stable: '2', canary: '1' });
    const list = (await admin(`${baseURL(h.server)}/namespaces/${ns}/rulesets`)).json;
    assert.deepEqual(list.rulesets.map((r) => r.id), ['1', '2']);
    assert.deepEqual(list.releases.map((r) => r.stable), ['1', '2']);
  });

  for (const signal of ['SIGKILL', 'SIGTERM']) {
    it(`keeps the settings, the history and the rules in effect across a ${signal}`, T, async () => {
      const ns = h.ns('kept');
      await admin(restURL(h.server, ns, 'doc'), { method: 'PUT', body: 1 });
      await admin(settings(ns, 'rules.json'), { method: 'PUT', body: rules(false), raw: true });
      await admin(settings(ns, 'rules.json'), { method: 'PUT', body: rules(true), raw: true });
      await admin(settings(ns, 'ruleset_labels.json'), { method: 'PUT', body: { stable: '1' } });
      await admin(settings(ns, 'defaultWriteSizeLimit.json'), { method: 'PUT', body: 'medium' });
      await admin(settings(ns, 'strictTriggerValidation.json'), { method: 'PUT', body: false });
      const before = (await admin(settings(ns, 'rulesets.json'))).json;
      await h.server.restart({ signal });
      assert.deepEqual((await admin(settings(ns, 'rulesets.json'))).json, before);
      assert.deepEqual((await admin(settings(ns, 'defaultWriteSizeLimit.json'))).json, 'medium');
      assert.deepEqual((await admin(settings(ns, 'strictTriggerValidation.json'))).json, false);
      assert.equal(await anonymousRead(ns), 401, 'the rolled-back rules are the ones in effect');
      // The history goes on with new ids.
      const staged = await admin(settings(ns, 'rulesets.json'), { method: 'POST', body: rules(true), raw: true });
      assert.deepEqual(staged.json, { id: '3' });
    });
  }
});

// Triggers are in effect where they are delivered: to a Functions emulator (one that is not
// there will do, its deliveries fail and are counted; nothing here waits for them).
describe('strictTriggerValidation', () => {
  const h = useHearth({ extraArgs: ['--functions-emulator', '127.0.0.1:9'] });
  const settings = (ns, file) => `${baseURL(h.server)}/.settings/${file}?ns=${ns}`;
  const admin = (url, init = {}) => rest(url, { ...init, headers: OWNER });

  it('strictTriggerValidation refuses a write past the triggers\' limits until it is turned off', T, async () => {
    const ns = h.ns('strict');
    const registered = await admin(settings(ns, 'functionTriggers.json'), {
      method: 'POST',
      body: { name: 'projects/demo/locations/_/functions/count', path: '/items/{id}', event: 'providers/google.firebase.database/eventTypes/ref.write', topic: 'projects/demo/topics/count' },
    });
    assert.equal(registered.status, 200, registered.text);
    const many = Object.fromEntries(Array.from({ length: 1001 }, (_, i) => [`i${i}`, i]));
    const refused = await admin(restURL(h.server, ns, 'items'), { method: 'PUT', body: many });
    assert.equal(refused.status, 400);
    assert.match(refused.json.error, /1001 functions.*strictTriggerValidation/);
    assert.equal((await admin(restURL(h.server, ns, 'items/i0'))).json, null, 'nothing of it applied');
    const oneEvent = await admin(restURL(h.server, ns, 'items/big'), { method: 'PUT', body: 'x'.repeat(1100 * 1024) });
    assert.equal(oneEvent.status, 400);
    // Within both limits, and with the setting off, writes go through.
    assert.equal((await admin(restURL(h.server, ns, 'items'), { method: 'PUT', body: { a: 1 } })).status, 200);
    await admin(settings(ns, 'strictTriggerValidation.json'), { method: 'PUT', body: false });
    assert.equal((await admin(restURL(h.server, ns, 'items'), { method: 'PUT', body: many })).status, 200);
    assert.equal((await admin(restURL(h.server, ns, 'items/i1000'))).json, 1000);
  });
});
