// Clients survive a server restart on the same port and data directory: they reconnect and
// resync by themselves, and everything written before the restart (data and rules) is still
// there, after a graceful stop (SIGTERM) and after a crash (SIGKILL).

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { set, get } from 'firebase/database';
import { useHearth } from '../lib/harness.mjs';
import { recordAdminValues, recordValues } from '../lib/util.mjs';

const RT = { timeout: 45_000 };

describe('restart', () => {
  const h = useHearth();

  it('a listener reconnects after SIGTERM restart and sees a new write', RT, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    const conn = recordValues(b.ref('.info/connected'));
    const rec = recordValues(b.ref('r/v'));
    await rec.first();
    await set(a.ref('r/v'), 'before');
    await rec.untilVal('before');
    await conn.untilVal(true);
    const nConn = conn.snaps.length;

    await h.server.restart();

    // b notices the drop, then reconnects.
    await conn.until((s, r) => r.snaps.length > nConn && s.val() === true && r.values.slice(nConn).includes(false), 20_000, 'disconnect + reconnect');
    await set(a.ref('r/v'), 'after');
    await rec.untilVal('after', 20_000);
    assert.equal((await get(h.client(ns).ref('r/v'))).val(), 'after');
    conn.off();
    rec.off();
  });

  it('clients reconnect after a SIGKILL crash + start on the same port', RT, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    const rec = recordValues(b.ref('crash'));
    await rec.first();
    await set(a.ref('crash'), 1);
    await rec.untilVal(1);

    await h.server.kill('SIGKILL');
    await h.server.start({ retryOnEarlyExit: true });

    await set(a.ref('crash'), 2);
    await rec.untilVal(2, 20_000);
    rec.off();
  });

  it('a write made while the server is down is delivered after it comes back', RT, async () => {
    const ns = h.ns();
    const [a, b] = h.clients(2, ns);
    const rec = recordValues(b.ref('down'));
    await rec.first();
    const aConn = recordValues(a.ref('.info/connected'));
    await aConn.untilVal(true);

    await h.server.stop();
    await aConn.untilVal(false, 10_000);
    const pending = set(a.ref('down'), 'queued while down');
    await h.server.start({ retryOnEarlyExit: true });

    await pending; // acknowledged once a has reconnected and re-sent it
    await rec.untilVal('queued while down', 20_000);
    aConn.off();
    rec.off();
  });

  for (const [how, restart] of [
    ['a graceful restart (SIGTERM)', (server) => server.restart()],
    [
      'a crash (SIGKILL)',
      async (server) => {
        await server.kill('SIGKILL');
        await server.start({ retryOnEarlyExit: true });
      },
    ],
  ]) {
    it(`data and rules survive ${how}; SDK clients reconnect and resync`, RT, async () => {
      const ns = h.ns();
      const writer = h.client(ns);
      const admin = h.admin(ns);
      const listener = h.client(ns);
      const tree = { title: 'kept', list: { a: 1, b: { c: [true, 'x'] } }, n: 1.5 };
      await set(writer.ref('doc'), tree);
      await set(writer.ref('counter'), 41);
      const rules = '{"rules": {".read": true, ".write": true, "frozen": {".validate": false}}}';
      const put = await fetch(`http://127.0.0.1:${h.port}/.settings/rules.json?ns=${ns}`, {
        method: 'PUT',
        headers: { authorization: 'Bearer owner' },
        body: rules,
      });
      assert.equal(put.status, 200);
      const seen = recordValues(listener.ref('doc'));
      await seen.untilVal(tree);
      const adminSeen = recordAdminValues(admin.ref('counter'));
      await adminSeen.untilVal(41);
      const conn = recordValues(listener.ref('.info/connected'));
      await conn.untilVal(true);
      const nConn = conn.snaps.length;

      await restart(h.server);

      // The listener reconnects by itself and still holds the data; a change made after the
      // restart by the admin SDK reaches it, on top of the recovered tree.
      await conn.until(
        (s, r) => r.snaps.length > nConn && s.val() === true && r.values.slice(nConn).includes(false),
        20_000,
        'disconnect + reconnect',
      );
      await admin.ref('doc/n').set(2.5);
      await seen.untilVal({ ...tree, n: 2.5 }, 20_000);
      await adminSeen.untilVal(41);
      // A fresh client after the restart reads everything from the server.
      const fresh = h.client(ns);
      assert.deepEqual((await get(fresh.ref('doc'))).val(), { ...tree, n: 2.5 });
      assert.equal((await get(fresh.ref('counter'))).val(), 41);
      // The rules set through the API came back too.
      const got = await fetch(`http://127.0.0.1:${h.port}/.settings/rules.json?ns=${ns}`, {
        headers: { authorization: 'Bearer owner' },
      });
      assert.equal(await got.text(), rules);
      await assert.rejects(set(fresh.ref('frozen'), 1), /permission/i, 'the recovered rules apply');
      conn.off();
      seen.off();
      adminSeen.off();
    });
  }
});
