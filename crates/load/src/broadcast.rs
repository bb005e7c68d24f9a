//! A bare WebSocket broadcast server as the floor of the chat pattern's fan-out
//! (`bench/uws-broadcast`, uWebSockets' own pub/sub): each member joins its room and sends its
//! messages there, stamped like the Firebase writes, so the same histograms measure what a
//! broadcast costs with no database, rules, persistence or Firebase framing.
//!
//! The protocol, text frames only: the client's first message is its room's name and the
//! server answers with the same name once the client is in; every later message of the client
//! goes as it is to every member of its room, the sender included. A member's own message
//! coming back is its write's acknowledgement (as the reply to a Redis `PUBLISH` is), and,
//! like every member's copy, an event.

use std::collections::VecDeque;
use std::net::IpAddr;

use futures_util::{SinkExt, StreamExt};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;

use crate::conn::{open_websocket, Context};
use crate::metrics::Metrics;
use crate::schedule::Schedule;
use crate::wire;

/// A member's state between the server's messages.
#[derive(Debug)]
pub struct Member {
    room: String,
    joined: bool,
    /// The send stamps of its messages not back yet, oldest first, with when each was sent.
    published: VecDeque<(u64, Instant)>,
}

impl Member {
    pub fn new(room: String) -> Member {
        Member {
            room,
            joined: false,
            published: VecDeque::new(),
        }
    }

    /// Remembers a message sent, for its acknowledgement.
    fn sent(&mut self, stamp: Option<u64>) {
        if let Some(stamp) = stamp {
            self.published.push_back((stamp, Instant::now()));
        }
    }

    /// Accounts for one text message from the server: the answer to the join, or a room
    /// message (an event per send stamp, and the acknowledgement of one of this member's).
    pub fn handle(&mut self, text: &str, metrics: &Metrics) {
        if !self.joined {
            if text == self.room {
                self.joined = true;
            } else {
                metrics.error(format!("the join of {:?} was answered {text:?}", self.room));
            }
            return;
        }
        let now = wire::now_us();
        let stamps = crate::incoming::stamps(text.as_bytes()).unwrap_or_default();
        for &t in &stamps {
            metrics.event("all", now.saturating_sub(t));
        }
        if let Some(&(own, sent)) = self.published.front() {
            if stamps.contains(&own) {
                self.published.pop_front();
                metrics.ack("write", sent.elapsed().as_micros() as u64);
            }
        }
    }
}

/// One chat member against the broadcast server, from connect to close. `Ok` when the run
/// ended; an error says how the server ended it otherwise.
pub async fn session(
    context: &Context<'_>,
    address: &str,
    source: Option<IpAddr>,
    schedule: &mut Schedule,
) -> anyhow::Result<()> {
    let (plan, metrics) = (context.plan, context.metrics);
    let room = plan.room()?;
    let url = format!("ws://{address}/");
    let (mut sink, mut stream) = open_websocket(url, address, source).await?.split();
    sink.send(Message::text(room.clone())).await?;
    let mut member = Member::new(room);
    let session = async {
        loop {
            if context.stopping.get() {
                return Ok(());
            }
            tokio::select! {
                _ = tokio::time::sleep_until(schedule.next_when(member.joined)) => {
                    for (_, body) in schedule.due_writes(plan, metrics) {
                        let payload = &body["d"];
                        member.sent(payload.get("t").and_then(serde_json::Value::as_u64));
                        sink.feed(Message::text(payload.to_string())).await?;
                    }
                    sink.flush().await?;
                }
                message = stream.next() => {
                    let Some(message) = message else {
                        anyhow::bail!("the connection ended without a close frame");
                    };
                    match message? {
                        Message::Text(text) => member.handle(text.as_str(), metrics),
                        Message::Close(frame) => {
                            anyhow::bail!("closed by the server: {frame:?}");
                        }
                        _ => {}
                    }
                }
            }
        }
    };
    metrics.while_open(session).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_join_is_answered_with_the_room_then_messages_are_events() {
        let metrics = Metrics::new();
        metrics.start_measuring();
        let mut member = Member::new("/chat/rooms/r00001/messages".to_owned());
        member.handle("{\"t\":1}", &metrics);
        assert!(!member.joined, "only the room's name answers the join");
        assert_eq!(metrics.counters.borrow().events, 0);
        member.handle("/chat/rooms/r00001/messages", &metrics);
        assert!(member.joined);

        let own = wire::now_us();
        member.sent(Some(own));
        let other = format!("{{\"t\":{},\"uid\":\"u2\"}}", own - 5);
        member.handle(&other, &metrics);
        assert_eq!(metrics.counters.borrow().events, 1);
        assert_eq!(
            metrics.counters.borrow().acks,
            0,
            "another member's message"
        );
        member.handle(&format!("{{\"t\":{own},\"uid\":\"u1\"}}"), &metrics);
        assert_eq!(metrics.counters.borrow().events, 2);
        assert_eq!(
            metrics.counters.borrow().acks,
            1,
            "its own message came back"
        );
        assert!(member.published.is_empty());

        member.handle("not json", &metrics);
        assert_eq!(metrics.counters.borrow().events, 2);
    }
}
