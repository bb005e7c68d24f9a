// Attack: ending another client's session through `ls` (the previous session a reconnect
// names). Ending a session runs its onDisconnect writes, so a stranger who could name one
// would flip the victim's presence and close its connection. Session ids are 128 random bits,
// and `ls` ends only a session of the database the new connection is for.
//
// Every case proves the victim is untouched by an event, not by waiting: the server handles
// `ls` before it sends the new connection's handshake, so once the attacker holds its
// handshake the damage would be done; the victim then answers a read, on its own connection,
// with its presence still online.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { useHearth, T } from '../../lib/harness.mjs';
import { RawClient } from '../../lib/raw.mjs';
import { nsOnShard } from '../rest/rest-client.mjs';

/** A connection with presence: `online` now, `offline` by onDisconnect. */
async function presentClient(h, ns) {
  const client = await RawClient.connect(h.server.wsURL(ns));
  h.defer(() => client.terminate());
  const { s: session } = await client.handshake();
  assert.equal((await client.request('o', { p: '/presence/me', d: 'offline' })).s, 'ok');
  assert.equal((await client.request('p', { p: '/presence/me', d: 'online' })).s, 'ok');
  return { client, session };
}

/** Connects naming `ls` and waits for the handshake, after which the server has acted on it. */
async function reconnectNaming(h, ns, session) {
  const client = await RawClient.connect(`${h.server.wsURL(ns)}&ls=${session}`);
  h.defer(() => client.terminate());
  await client.handshake();
  return client;
}

/** The victim still answers on its own connection, and its onDisconnect has not run. */
async function assertUntouched(victim) {
  const read = await victim.request('g', { p: '/presence/me', q: {} });
  assert.deepEqual(read, { s: 'ok', d: 'online' });
  assert.equal(victim.closed, null);
}

describe('attack: session takeover through ls', () => {
  // Two shards, as the harness starts them; the namespaces of each case share a shard, so
  // the session of one is visible from the other.
  const h = useHearth();

  it('session ids are 128 random bits in URL-safe base64', T, async () => {
    const ns = nsOnShard('ids', 0);
    const a = await presentClient(h, ns);
    const b = await presentClient(h, ns);
    assert.match(a.session, /^[A-Za-z0-9_-]{22}$/);
    assert.match(b.session, /^[A-Za-z0-9_-]{22}$/);
    assert.notEqual(a.session, b.session);
  });

  it('the id of a session of another database ends nothing', T, async () => {
    const victimNs = nsOnShard('victim', 0);
    const attackerNs = nsOnShard('attacker', 0);
    const { client: victim, session } = await presentClient(h, victimNs);
    // A stolen id, used from another database.
    await reconnectNaming(h, attackerNs, session);
    await assertUntouched(victim);
  });

  it('a guessed neighbour of an id ends nothing', T, async () => {
    const ns = nsOnShard('guess', 0);
    const attacker = await RawClient.connect(h.server.wsURL(ns));
    h.defer(() => attacker.terminate());
    const { s: own } = await attacker.handshake();
    const { client: victim } = await presentClient(h, ns);
    // Sequential ids (`h<start>s<shard>c<n>`) made the next connection's id the attacker's
    // own with the counter plus one; for a random id this is one more wrong guess.
    const guesses = [own.replace(/c(\d+)$/, (_, n) => `c${Number(n) + 1}`), `${own.slice(0, -1)}A`, `${own.slice(0, -1)}B`];
    for (const guess of guesses) await reconnectNaming(h, ns, guess);
    await assertUntouched(victim);
  });

  it('a reconnect with its own ls ends its old session before its first request', T, async () => {
    const ns = nsOnShard('own', 0);
    const { client: old, session } = await presentClient(h, ns);
    const fresh = await reconnectNaming(h, ns, session);
    const read = await fresh.request('g', { p: '/presence/me', q: {} });
    assert.deepEqual(read, { s: 'ok', d: 'offline' });
    const closed = await old.waitClose(5_000);
    assert.equal(closed.code, 1001);
  });
});
