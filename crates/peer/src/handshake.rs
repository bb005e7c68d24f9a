//! The link's handshake: each side proves it knows the cluster's shared secret
//! (`--cluster-secret-file`) without sending it, and names itself. Anyone who can reach the
//! link's port could otherwise open sessions as any client and read every push, so a peer
//! that is not listed, names the wrong node or cannot prove the secret is refused before a
//! single message is read.
//!
//! The dialing node sends `HELLO` with its id, the id it expects to reach and a fresh random
//! nonce; the listening node answers with its own nonce and an HMAC-SHA256 over both nonces
//! and both ids; the dialer checks it and sends its own HMAC (a different label, so that one
//! side's proof cannot be played back as the other's). Fresh nonces on both sides make a
//! recorded handshake useless. With TLS (`link_tls`) this runs inside the encrypted stream,
//! after both certificates were checked: a stolen certificate alone, or the secret alone,
//! opens no link.

use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::placement::MAX_NODE_ID_BYTES;

/// How long a handshake may take before the connection is dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// The link's name and version: `L2` since an opening, a forwarded request and a forwarded
/// stream carry the client's address, `L3` since replication carries audit records (log
/// format 4); nodes of different versions refuse each other at the handshake rather than
/// misread every message.
const MAGIC: &[u8; 8] = b"HEARTHL3";
const NONCE_BYTES: usize = 32;
const MAC_BYTES: usize = 32;

/// Why a handshake failed.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("not a Hearth node link")]
    Magic,
    #[error("node `{0}` is not a node of this cluster (--cluster-peers, or live in etcd)")]
    Unknown(String),
    #[error("the peer expected node `{0}`, this is another")]
    WrongTarget(String),
    #[error("the peer does not know the cluster secret")]
    Secret,
    #[error("no randomness: {0}")]
    Random(String),
    #[error("a node id is malformed")]
    Id,
    #[error("the handshake took too long")]
    Timeout,
    #[error("TLS handshake failed: {0}")]
    Tls(std::io::Error),
    #[error("certificate refused: {0}")]
    Certificate(String),
}

/// The dialing side: reaches node `peer` and proves this is node `me`.
pub async fn dial<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    me: &str,
    peer: &str,
    secret: &[u8],
) -> Result<(), HandshakeError> {
    let me = me.as_bytes();
    let them = peer.as_bytes();
    let mine = nonce()?;
    let mut hello = Vec::with_capacity(8 + NONCE_BYTES + 2 * (1 + MAX_NODE_ID_BYTES));
    hello.extend_from_slice(MAGIC);
    hello.extend_from_slice(&mine);
    put_id(&mut hello, me);
    put_id(&mut hello, them);
    stream.write_all(&hello).await?;
    let mut theirs = [0; NONCE_BYTES];
    stream.read_exact(&mut theirs).await?;
    let mut proof = [0; MAC_BYTES];
    stream.read_exact(&mut proof).await?;
    let expected = mac(secret, b"listener", &mine, &theirs, me, them);
    if !bool::from(expected.ct_eq(&proof)) {
        return Err(HandshakeError::Secret);
    }
    let answer = mac(secret, b"dialer", &mine, &theirs, me, them);
    stream.write_all(&answer).await?;
    stream.flush().await?;
    Ok(())
}

/// The listening side, node `me`: the index of the node that proved who it is, which
/// `index_of` gives for the ids of the nodes that may link to this one (an error for others:
/// an unknown node, or with TLS a certificate that names another).
pub async fn accept<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    me: &str,
    secret: &[u8],
    index_of: impl FnOnce(&str) -> Result<usize, HandshakeError>,
) -> Result<usize, HandshakeError> {
    let mut magic = [0; 8];
    stream.read_exact(&mut magic).await?;
    if &magic != MAGIC {
        return Err(HandshakeError::Magic);
    }
    let mut theirs = [0; NONCE_BYTES];
    stream.read_exact(&mut theirs).await?;
    let dialer = read_id(stream).await?;
    let target = read_id(stream).await?;
    if target != me {
        return Err(HandshakeError::WrongTarget(target));
    }
    if dialer == me {
        return Err(HandshakeError::Unknown(dialer));
    }
    let peer = index_of(&dialer)?;
    let mine = nonce()?;
    let proof = mac(
        secret,
        b"listener",
        &theirs,
        &mine,
        dialer.as_bytes(),
        me.as_bytes(),
    );
    let mut answer = Vec::with_capacity(NONCE_BYTES + MAC_BYTES);
    answer.extend_from_slice(&mine);
    answer.extend_from_slice(&proof);
    stream.write_all(&answer).await?;
    stream.flush().await?;
    let mut theirs_proof = [0; MAC_BYTES];
    stream.read_exact(&mut theirs_proof).await?;
    let expected = mac(
        secret,
        b"dialer",
        &theirs,
        &mine,
        dialer.as_bytes(),
        me.as_bytes(),
    );
    if !bool::from(expected.ct_eq(&theirs_proof)) {
        return Err(HandshakeError::Secret);
    }
    Ok(peer)
}

fn nonce() -> Result<[u8; NONCE_BYTES], HandshakeError> {
    let mut nonce = [0; NONCE_BYTES];
    getrandom::fill(&mut nonce).map_err(|error| HandshakeError::Random(error.to_string()))?;
    Ok(nonce)
}

fn put_id(out: &mut Vec<u8>, id: &[u8]) {
    out.push(id.len() as u8);
    out.extend_from_slice(id);
}

async fn read_id<S: AsyncRead + Unpin>(stream: &mut S) -> Result<String, HandshakeError> {
    let length = stream.read_u8().await? as usize;
    if length == 0 || length > MAX_NODE_ID_BYTES {
        return Err(HandshakeError::Id);
    }
    let mut id = vec![0; length];
    stream.read_exact(&mut id).await?;
    String::from_utf8(id).map_err(|_| HandshakeError::Id)
}

/// The proof of one side: the label says which, the nonces and ids in the dialer's order.
fn mac(
    secret: &[u8],
    label: &[u8],
    dialer_nonce: &[u8],
    listener_nonce: &[u8],
    dialer: &[u8],
    listener: &[u8],
) -> [u8; MAC_BYTES] {
    // An HMAC takes a key of any length.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
        return [0; MAC_BYTES];
    };
    for part in [label, dialer_nonce, listener_nonce, dialer, listener] {
        mac.update(&(part.len() as u32).to_be_bytes());
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The nodes `a` and `b`, numbered as a static list would.
    fn index_of(id: &str) -> Result<usize, HandshakeError> {
        ["a", "b"]
            .iter()
            .position(|node| *node == id)
            .ok_or_else(|| HandshakeError::Unknown(id.to_owned()))
    }

    async fn run(dial_secret: &[u8], accept_secret: &[u8]) -> (bool, Option<usize>) {
        let (left, mut right) = tokio::io::duplex(1024);
        // Each side drops its end when it is done, as a socket closes: the other side's
        // read then fails instead of waiting.
        let dialing = async move {
            let mut left = left;
            dial(&mut left, "a", "b", dial_secret).await.is_ok()
        };
        let accepting = async {
            let accepted = accept(&mut right, "b", accept_secret, index_of).await.ok();
            drop(right);
            accepted
        };
        tokio::join!(dialing, accepting)
    }

    #[tokio::test]
    async fn the_secret_is_proved_both_ways() {
        assert_eq!(run(b"secret", b"secret").await, (true, Some(0)));
        let (dialed, accepted) = run(b"secret", b"other").await;
        assert!(!dialed && accepted.is_none());
    }

    #[tokio::test]
    async fn an_unlisted_node_is_refused() {
        let (mut left, mut right) = tokio::io::duplex(1024);
        let mut hello = MAGIC.to_vec();
        hello.extend_from_slice(&[0; NONCE_BYTES]);
        put_id(&mut hello, b"z");
        put_id(&mut hello, b"b");
        left.write_all(&hello).await.expect("write");
        let refused = accept(&mut right, "b", b"secret", index_of).await;
        assert!(matches!(refused, Err(HandshakeError::Unknown(id)) if id == "z"));
    }
}
