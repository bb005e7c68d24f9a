//! One simulated user: the protocol it speaks, and the loop that opens its session and
//! reconnects it (with backoff, listening again) when the server goes away.

use std::cell::Cell;
use std::net::IpAddr;
use std::rc::Rc;
use std::time::Duration;

use crate::conn::{session, Context, Seen};
use crate::metrics::Metrics;
use crate::plan::Plan;
use crate::schedule::Schedule;

/// Backoff between reconnection attempts.
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// What a simulated user speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// Firebase's realtime protocol over WebSocket.
    Firebase,
    /// Firebase's protocol from a server that pushes the whole value at a listened path on
    /// every change (the `firebase-server` npm package): each send stamp is timed only the
    /// first time a connection sees it, as the same stamps come back with every later push.
    FirebaseWholeValues,
    /// Redis pub/sub, the bare fan-out baseline (chat only).
    Redis,
    /// A bare WebSocket broadcast server (`bench/uws-broadcast`), the floor of the fan-out
    /// (chat only).
    Broadcast,
    /// Hearth's WebTransport sessions (`--webtransport-listen`): the same Firebase requests
    /// on a stream, writes and pushes as datagrams (`crate::webtransport`), with the server's
    /// certificate pinned by this SHA-256.
    WebTransport([u8; 32]),
}

/// Starts the user after `delay`; it runs until `stopping`.
pub fn spawn(
    plan: Plan,
    protocol: Protocol,
    address: String,
    source: Option<IpAddr>,
    metrics: Rc<Metrics>,
    stopping: Rc<Cell<bool>>,
    delay: Duration,
) {
    tokio::task::spawn_local(async move {
        tokio::time::sleep(delay).await;
        let mut schedule = Schedule::new(&plan);
        let mut seen = Seen::new(protocol == Protocol::FirebaseWholeValues);
        let mut backoff = BACKOFF_MIN;
        let mut sessions = 0u64;
        while !stopping.get() {
            let context = Context {
                plan: &plan,
                metrics: &metrics,
                stopping: &stopping,
            };
            let outcome = match protocol {
                Protocol::Firebase | Protocol::FirebaseWholeValues => {
                    session(&context, &address, source, &mut schedule, &mut seen).await
                }
                Protocol::WebTransport(certificate) => {
                    let server = crate::webtransport::Server {
                        address: &address,
                        certificate,
                    };
                    crate::webtransport::session(
                        &context,
                        &server,
                        source,
                        &mut schedule,
                        &mut seen,
                    )
                    .await
                }
                Protocol::Redis => {
                    crate::redis::session(
                        &plan,
                        &address,
                        source,
                        &metrics,
                        &stopping,
                        &mut schedule,
                    )
                    .await
                }
                Protocol::Broadcast => {
                    crate::broadcast::session(&context, &address, source, &mut schedule).await
                }
            };
            if stopping.get() {
                break;
            }
            match outcome {
                Ok(()) => backoff = BACKOFF_MIN,
                Err(error) => metrics.session_failed(&error),
            }
            sessions += 1;
            if sessions > 0 {
                metrics.reconnect();
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    });
}
