// Clients survive a server restart on the same port (data is memory-only for now, so
// nothing written before the restart is expected to survive it).

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { set, get } from 'firebase/database';
import { useHearth } from '../lib/harness.mjs';
import { recordValues } from '../lib/util.mjs';

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
});
