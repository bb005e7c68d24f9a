// The cluster placement's rendezvous score (`crates/server/src/peer/placement.rs`), so that
// tests can pick databases owned and followed by given nodes. Pinned on the Rust side too.

const MASK = (1n << 64n) - 1n;

/** The score of node `node` for database `ns`: FNV-1a of id, 0xff, name, then mixed. */
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

/** `ids` from the highest score for `ns` down (the owner, then the follower); ties: smaller id. */
export function ranked(ids, ns) {
  return [...ids].sort().sort((x, y) => {
    const [sx, sy] = [score(x, ns), score(y, ns)];
    return sy > sx ? 1 : sy < sx ? -1 : 0;
  });
}
