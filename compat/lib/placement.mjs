// The static placement of the node-to-node link (`crates/server/src/peer/placement.rs`):
// each database is owned by the node whose rendezvous score for its name is highest. Tests
// use it to pick databases on a given node, or on none of a given set.

import { uniqueNs } from './harness.mjs';

const MASK = (1n << 64n) - 1n;

/** The rendezvous score of `node` for namespace `ns` (FNV-1a, then a 64-bit mix). */
export function score(node, ns) {
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

/** The node of `ids` that owns namespace `ns`. */
export function ownerOf(ids, ns) {
  let best = null;
  for (const id of [...ids].sort()) if (best === null || score(id, ns) > score(best, ns)) best = id;
  return best;
}

/** A fresh namespace that node `id` of `ids` owns. */
export function nsOwnedBy(ids, id, prefix = 'cl') {
  for (;;) {
    const ns = uniqueNs(prefix);
    if (ownerOf(ids, ns) === id) return ns;
  }
}
