//! Session ids: the secret a WebSocket client gets in its handshake (`s`) and names again as
//! `ls` when it reconnects, so that the server ends its previous session at once instead of
//! waiting for the idle timeout.
//!
//! Ending a session runs its onDisconnect writes, so an id must not be guessable: it is 128
//! bits from the operating system's random source, never derived from a counter or the clock,
//! and never written to the log. A reconnect may only end a session of its own database (see
//! [`may_replace`]).

use base64::Engine;

/// Random bytes in a session id: 128 bits, beyond guessing even with many attempts per second
/// for the life of the server.
pub const SESSION_ID_BYTES: usize = 16;

/// A new session id: [`SESSION_ID_BYTES`] random bytes in unpadded URL-safe base64 (22
/// characters of `A-Z a-z 0-9 - _`). The SDKs put the id into the reconnect URL without
/// escaping it, so it must need none.
pub fn new_session_id() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; SESSION_ID_BYTES];
    getrandom::fill(&mut bytes)?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// Whether a new connection to `namespace` may end the previous session it named, which is
/// open on `previous_namespace`. A client reconnects to the database it was connected to; a
/// session of another database is left alone, and the new connection is not told why (it
/// learns nothing about which ids exist).
pub fn may_replace(previous_namespace: &str, namespace: &str) -> bool {
    previous_namespace == namespace
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_are_random_and_url_safe() {
        let first = new_session_id().expect("random source");
        let second = new_session_id().expect("random source");
        assert_eq!(first.len(), 22);
        assert!(first
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        assert_ne!(first, second);
    }

    #[test]
    fn only_a_session_of_the_same_database_is_replaced() {
        assert!(may_replace("chat", "chat"));
        assert!(!may_replace("chat", "other"));
    }
}
