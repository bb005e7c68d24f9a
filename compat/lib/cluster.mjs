// Helpers of the tests of a static cluster (`--cluster-peers`, docs/cluster-link.md).

import { uniqueNs } from './harness.mjs';

// The static placement's rendezvous score (`peer/placement.rs`), to pick databases owned and
// followed by given nodes. Pinned on the Rust side too.
const MASK = (1n << 64n) - 1n;
function score(node, ns) {
  let h = 0xcbf29ce484222325n;
  for (const byte of [...Buffer.from(node), 0xff, ...Buffer.from(ns)]) {
    h ^= BigInt(byte);
    h = (h * 0x100000001b3n) & MASK;
  }
  h ^= h >> 33n;
  h = (h * 0xff51afd7ed558ccdn) & MASK;
  h ^= h >> 33n;
  h = (h * 0xc4ceb9fe1a85ec53n) & MASK;
  return h ^ (h >> 33n);
}

/** `ids` from the highest score for `ns` down (the owner, then the follower); ties: smaller id. */
export function ranked(ids, ns) {
  return [...ids].sort().sort((x, y) => {
    const [sx, sy] = [score(x, ns), score(y, ns)];
    return sy > sx ? 1 : sy < sx ? -1 : 0;
  });
}

/** The id among `ids` of the node that owns `ns`. */
export function ownerOf(ids, ns) {
  return ranked(ids, ns)[0] ?? null;
}

/** A fresh namespace that node `id` of `ids` owns. */
export function nsOwnedBy(ids, id, prefix = 'cl') {
  for (;;) {
    const ns = uniqueNs(prefix);
    if (ownerOf(ids, ns) === id) return ns;
  }
}

/**
 * Resolves once the server's log, past its first `from` characters, has a line matching
 * `pattern` (polled: a barrier).
 */
export async function logShows(server, pattern, label, { from = 0, ms = 15_000 } = {}) {
  const deadline = Date.now() + ms;
  while (!pattern.test(server.log().slice(from))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${label}\n${server.logTail(20)}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
