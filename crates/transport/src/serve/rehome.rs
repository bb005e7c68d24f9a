//! A WebSocket connection whose database's owner changed keeps its socket: its task stops
//! reading the client, waits for the database's next owner (a node that claimed it, or the
//! node placement names, which claims it on first use), opens a session there under a new
//! id, answers the requests the old owner left unanswered and replays what the session
//! needs (`edge::upstream`). The client sees no disconnect; its listens get the current data.
//!
//! Only where that can work: a WebSocket of another node's database under etcd's placement,
//! whose requests stayed within the edge's limits, on a node that is not stopping. Anything
//! else closes as before, and the SDK reconnects (long polling and WebTransport sessions
//! too: their transports hold state of their own that this does not carry).

use std::net::IpAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tracing::debug;

use crate::front::Front;
use crate::owner_side::OwnerSide;
use crate::serve::attach::{attach, send_to_owner};
use hearth_edge::frames::encode_frames;
use hearth_edge::upstream::Upstream;
use hearth_edge::EdgeConn;
use hearth_ground::close::CloseReason;
use hearth_ground::cross_core::{MoveCause, RealtimeTransport, ToOwner};
use hearth_net::offload::OFF_THREAD_PARSE_BYTES;
use hearth_owner::dispatch::{finish_deferred, on_large_decoded, on_message, Handled};

/// How long a connection waits for its database's next owner before it closes as before
/// (a dead owner's database is claimed again within its lease TTL plus a quarter of it).
pub const MOVE_WAIT_LIMIT: Duration = Duration::from_secs(10);

/// How often a connection that waits for its next owner looks at the placement again.
pub const MOVE_POLL: Duration = Duration::from_millis(50);

/// A connection on its way to its database's next owner.
pub struct Moving {
    cause: MoveCause,
    /// The node it leaves.
    from: usize,
    deadline: Instant,
}

/// Lets connection `edge`, whose session is on another node, follow its session if it moves
/// (a WebSocket, under etcd's placement with the node link).
pub fn follow(
    front: &Front,
    edge: &EdgeConn,
    side: &OwnerSide,
    namespace: &str,
    session: &str,
    app_check: Option<String>,
    address: Option<IpAddr>,
) {
    let remote = matches!(side, OwnerSide::Remote(owner) if *owner >= front.shard_count());
    if remote && front.config().cluster.is_some() && front.nodes().is_some() {
        let mut upstream = Upstream::new(namespace.to_owned(), session.to_owned());
        upstream.app_check = app_check;
        upstream.address = address;
        edge.follow_upstream(upstream);
    }
}

/// The session of `edge` must leave its owner, for `cause`: the old owner ends it without
/// running its onDisconnect queue (the client did not disconnect; the queue is replayed on
/// the next owner), and the connection waits for that one. `Err`: it cannot move, and closes.
pub fn begin(
    front: &Front,
    edge: &EdgeConn,
    side: &OwnerSide,
    cause: MoveCause,
) -> Result<Moving, CloseReason> {
    let close = cause.close_reason();
    let OwnerSide::Remote(owner) = side else {
        return Err(close);
    };
    if front.is_shutting_down() || *owner < front.shard_count() {
        return Err(close);
    }
    if let Some(why) = edge.upstream().as_ref().and_then(|up| up.cannot_move()) {
        debug!(conn = edge.id(), why, "connection cannot move; closing");
        return Err(close);
    }
    // A lost link drops this; a live owner (it lost the claim, or it is stopping) ends the
    // session at once, which a stopping owner waits for before it lets its claims go.
    front.send_to_owner(*owner, ToOwner::Moved { conn: edge.id() });
    Ok(Moving {
        cause,
        from: owner - front.shard_count(),
        deadline: Instant::now() + MOVE_WAIT_LIMIT,
    })
}

/// Before a connection that could not move closes: when its old owner may have applied the
/// writes it left unanswered (it died, or lost the claim), they are answered `unavailable`
/// ("may or may not have been applied"). Left unanswered, the SDK would send them again
/// after it reconnects, and a refusal there would read as final while the first attempt
/// survives on the owner's follower. An owner that stopped on purpose applied none of them,
/// and one never reached applied nothing: the SDK may send those again.
pub fn answer_unanswered(edge: &Rc<EdgeConn>, cause: MoveCause) {
    if !matches!(cause, MoveCause::OwnerLost | MoveCause::Moved) {
        return;
    }
    let answers = edge
        .upstream()
        .as_mut()
        .and_then(|upstream| upstream.resume(false).ok())
        .map(|resume| resume.answers);
    if let Some(answers) = answers {
        edge.write(answers.into_iter().map(encode_frames));
    }
}

/// Starts moving the session of `edge` when its owner asked for it and no move is under way
/// ([`begin`]); `false` when it cannot move, and the connection closes.
pub fn begin_if_asked(
    front: &Front,
    edge: &Rc<EdgeConn>,
    side: &OwnerSide,
    moving: &mut Option<Moving>,
) -> bool {
    let Some(cause) = edge.take_moving() else {
        return true;
    };
    if moving.is_none() {
        match begin(front, edge, side, cause) {
            Ok(started) => *moving = Some(started),
            Err(reason) => {
                // Answered first; the loop's top writes them out, then closes.
                answer_unanswered(edge, cause);
                edge.close(reason);
                return false;
            }
        }
    }
    true
}

/// The owner that the moving session can go to now ([`next_owner`]), with the move taken out
/// of `moving` to finish it; `None` to wait on, or when the wait is over and the connection
/// closes.
fn ready_to_move(
    front: &Front,
    edge: &Rc<EdgeConn>,
    moving: &mut Option<Moving>,
) -> Option<(Moving, usize)> {
    let waiting = moving.as_ref()?;
    match next_owner(front, edge, waiting) {
        Ok(None) => None,
        Ok(Some(owner)) => moving.take().map(|waiting| (waiting, owner)),
        Err(reason) => {
            answer_unanswered(edge, waiting.cause);
            *moving = None;
            edge.close(reason);
            None
        }
    }
}

/// Moves the moving session to its database's next owner once that one is known; `true`
/// when it moved (`false` meanwhile, and when it could not move and the connection closes).
pub async fn move_on(
    front: &Front,
    edge: &Rc<EdgeConn>,
    side: &mut OwnerSide,
    moving: &mut Option<Moving>,
) -> bool {
    let Some((waiting, owner)) = ready_to_move(front, edge, moving) else {
        return false;
    };
    // Boxed: a move is rare, and an idle connection's task must not carry its state
    // (`server::tests`).
    let cause = waiting.cause;
    match Box::pin(finish(front, edge, waiting, owner)).await {
        Ok(next) => {
            *side = next;
            true
        }
        Err(reason) => {
            answer_unanswered(edge, cause);
            edge.close(reason);
            false
        }
    }
}

/// The owner the session can go to now, as an owner index; `None` to wait on. `Err`: the
/// wait is over, and the connection closes.
pub fn next_owner(
    front: &Front,
    edge: &EdgeConn,
    moving: &Moving,
) -> Result<Option<usize>, CloseReason> {
    let close = moving.cause.close_reason();
    if Instant::now() >= moving.deadline || front.is_shutting_down() {
        return Err(close);
    }
    let (Some(nodes), Some(namespace)) = (
        front.nodes(),
        edge.upstream().as_ref().map(|up| up.namespace.clone()),
    ) else {
        return Err(close);
    };
    let owner = front.owner_of(&namespace);
    let Some(node) = owner.checked_sub(front.shard_count()) else {
        // This node serves it now.
        return Ok(Some(owner));
    };
    let (_, up) = nodes.link_state(node);
    if node == moving.from {
        return match moving.cause {
            // The session never reached it: it may serve it now.
            MoveCause::OwnerUnreachable if up => Ok(Some(owner)),
            // The link came back to an owner that kept its claim: it is alive, and ended the
            // session as a lost client's, running its onDisconnect queue. The client must
            // learn that it was disconnected.
            MoveCause::OwnerLost if up => Err(close),
            // Its claim has not gone yet (a dead node's lease runs out, a stopping node
            // lets its claims go once its sessions ended).
            _ => Ok(None),
        };
    }
    Ok(up.then_some(owner))
}

/// Opens the session of `edge` on `owner` under a new id and replays what it needs there;
/// the requests the old owner left unanswered and that are not sent again are answered first.
/// Returns where the session is now.
pub async fn finish(
    front: &Front,
    edge: &Rc<EdgeConn>,
    moving: Moving,
    owner: usize,
) -> Result<OwnerSide, CloseReason> {
    let close = moving.cause.close_reason();
    let (namespace, session_id, app_check, address, resume) = {
        let mut upstream = edge.upstream();
        let Some(upstream) = upstream.as_mut() else {
            return Err(close);
        };
        // An owner that stops on purpose handled nothing it left unanswered (`Shard::drain`).
        let resend_writes = moving.cause == MoveCause::OwnerStopping;
        let resume = upstream.resume(resend_writes).map_err(|_| close.clone())?;
        (
            upstream.namespace.clone(),
            upstream.session_id.clone(),
            upstream.app_check.clone(),
            upstream.address,
            resume,
        )
    };
    // What the old owner still sends finds nothing from here on.
    front.edge().forget(edge.id());
    edge.set_id(front.next_conn_id());
    edge.write(resume.answers.into_iter().map(encode_frames));
    debug!(
        conn = edge.id(),
        owner,
        replayed = resume.replay.len(),
        "connection moved to its database's next owner"
    );
    front.counters().session_moved();
    // Only WebSocket connections follow their session (`follow`).
    let side = attach(
        front,
        edge,
        namespace,
        session_id,
        None,
        app_check,
        address,
        RealtimeTransport::WebSocket,
    );
    replay(front, edge, &side, resume.replay).await?;
    Ok(side)
}

/// Sends `texts` to the session's owner as the client's own messages would go.
async fn replay(
    front: &Front,
    edge: &Rc<EdgeConn>,
    side: &OwnerSide,
    texts: Vec<String>,
) -> Result<(), CloseReason> {
    let stopping = || CloseReason::new(CloseCode::Away, hearth_ground::close::SHUTDOWN_CLOSE);
    match side {
        OwnerSide::Remote(owner) => {
            // A large message goes last in its batch: the owner decodes it off its thread,
            // and what follows waits for it.
            let mut batch = Vec::new();
            for text in texts {
                let large = text.len() > OFF_THREAD_PARSE_BYTES;
                batch.push(text);
                if large
                    && !send_to_owner(front, edge, *owner, std::mem::take(&mut batch), true).await
                {
                    return Err(stopping());
                }
            }
            if !batch.is_empty() && !send_to_owner(front, edge, *owner, batch, false).await {
                return Err(stopping());
            }
        }
        OwnerSide::Local(session) => {
            for text in texts {
                if let Handled::ParseOffThread(message) = on_message(front.owner(), session, text)?
                {
                    let Some(decoded) = finish_deferred(message).await else {
                        return Err(CloseReason::new(
                            CloseCode::Error,
                            "a message could not be decoded",
                        ));
                    };
                    on_large_decoded(front.owner(), session, decoded)?;
                }
            }
        }
    }
    Ok(())
}
