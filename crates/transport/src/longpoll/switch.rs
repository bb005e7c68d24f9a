//! A long-polling session after its move to a WebSocket, on the long-polling side: its polls
//! then get what waited and the close, and stay answered for [`LINGER`]. The switch itself
//! is the session's (`longpoll_session::switch_state`, which explains the move); the
//! WebSocket's side is `secondary`.

use std::time::Duration;

use crate::front::Front;
use crate::longpoll_session::LpSession;

/// How long a session that moved to a WebSocket still answers polls (with the close), after
/// its last one: the SDK may have a poll in flight when the close reaches it, and a poll
/// refused with 404 before it has read the `n` would make it drop the whole connection.
pub const LINGER: Duration = Duration::from_secs(30);

/// After the switch: the held poll and every later one get what waits at once, the one that
/// empties the mailbox with the close; the session stays known until the client's goodbye,
/// the server's shutdown, or [`LINGER`] without a poll.
pub(super) async fn linger(front: &Front, session: &LpSession) {
    session.answer_held();
    let mut shutdown = front.shutdown();
    loop {
        if session.ending().is_some() {
            return;
        }
        let quiet_until = session.last_request() + LINGER;
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = session.woken() => {}
            _ = tokio::time::sleep_until(quiet_until.into()) => {
                if session.last_request().elapsed() >= LINGER {
                    return;
                }
            }
        }
    }
}
