//! A long-polling session's move to a WebSocket, as the session holds it: the WebSocket that
//! waits to take it over, whether it moved, and the switch itself. The WebSocket's side is
//! `longpoll::secondary`; what the polls get after the move is `longpoll::switch`.
//!
//! The web SDK opens a WebSocket naming the session, pings it until it is healthy, then sends
//! the switch acknowledgement `a` on it and the end of transmission `n` on the long poll, and
//! from then on sends on the WebSocket only. So everything the client sent before its `n`
//! came by the polls: when the session's task reaches that `n` among the client's messages
//! (all before it handed to the owner, in order), it switches, in one step with no await:
//! the server's own `n` goes into the mailbox after whatever waits there, and the session's
//! outbox moves onto the WebSocket's socket, so that everything the owner sends from then on
//! leaves by the WebSocket. The SDK reads the long poll up to that `n`, holding what the
//! WebSocket brings meanwhile, then reads the WebSocket: nothing is lost, repeated or
//! reordered. The session itself (its connection id, its place with the owner, its
//! credentials, listens, onDisconnect and budgets) does not change, so nothing of it ends.

use std::rc::Rc;

use hearth_wire::{control_type, END_OF_TRANSMISSION};
use tokio::sync::oneshot;

use crate::owner_side::OwnerSide;
use hearth_edge::socket::{Outbox, Transport};
use hearth_edge::EdgeConn;

use super::{same_secret, LpSession};

/// A WebSocket waiting to take a session over.
pub(crate) struct Secondary {
    /// Its socket, which the session's outbox writes from the switch on.
    transport: Rc<dyn Transport>,
    /// What the WebSocket wrote before the switch (the upgrade's answer, its
    /// acknowledgement, pongs) and its socket has not taken yet: it leaves first.
    first: Rc<Outbox>,
    /// Where the session goes at the switch.
    handover: oneshot::Sender<Handover>,
}

impl Secondary {
    pub(crate) fn new(
        transport: Rc<dyn Transport>,
        first: Rc<Outbox>,
        handover: oneshot::Sender<Handover>,
    ) -> Secondary {
        Secondary {
            transport,
            first,
            handover,
        }
    }
}

/// What a WebSocket gets at the switch: the session to serve.
pub(crate) struct Handover {
    pub(crate) edge: Rc<EdgeConn>,
    pub(crate) side: OwnerSide,
}

impl LpSession {
    /// Whether a WebSocket naming `secret` on `namespace` may take this session over: the
    /// secret compared in time independent of where it differs.
    pub fn may_move(&self, namespace: &str, secret: &str) -> bool {
        !self.switched.get()
            && self.secondary.borrow().is_none()
            && same_secret(&self.secret, secret)
            && self.namespace == namespace
    }

    /// Takes `secondary` as the WebSocket that will carry the session, or hands it back when
    /// the session has one already or has moved.
    pub(crate) fn attach_secondary(&self, secondary: Secondary) -> Result<(), Secondary> {
        let mut slot = self.secondary.borrow_mut();
        if self.switched.get() || slot.is_some() {
            return Err(secondary);
        }
        *slot = Some(secondary);
        Ok(())
    }

    /// The WebSocket whose early bytes are `first` went away before the switch: a later `n`
    /// is an ordinary message again.
    pub fn drop_secondary(&self, first: &Rc<Outbox>) {
        let mut slot = self.secondary.borrow_mut();
        if slot
            .as_ref()
            .is_some_and(|secondary| Rc::ptr_eq(&secondary.first, first))
        {
            slot.take();
        }
    }

    /// The session ends before the switch: the WebSocket waiting to take it over, if one
    /// does, is refused (its task learns it when its handover channel closes).
    pub fn refuse_secondary(&self) {
        self.secondary.borrow_mut().take();
    }

    /// The switch, when `message` (the client's next one, not yet handed to the owner) is
    /// its end of transmission and a WebSocket waits: the channel to hand the session to
    /// that WebSocket. `None` otherwise, and the message goes to the owner as any other (an
    /// `n` without a WebSocket is ignored there).
    pub(crate) fn switch_at(&self, message: &str) -> Option<oneshot::Sender<Handover>> {
        if !self.has_secondary() || control_type(message).as_deref() != Some("n") {
            return None;
        }
        let handover = self.switch()?;
        // The client sends nothing after its `n` here.
        self.inbound.borrow_mut().clear();
        Some(handover)
    }

    /// Whether a WebSocket waits to take the session over.
    fn has_secondary(&self) -> bool {
        self.secondary.borrow().is_some()
    }

    /// The switch (see the module's documentation); the channel to hand the session to its
    /// WebSocket, or `None` when no WebSocket waits.
    fn switch(&self) -> Option<oneshot::Sender<Handover>> {
        let secondary = self.secondary.borrow_mut().take()?;
        self.mailbox.push_message(END_OF_TRANSMISSION);
        self.switched.set(true);
        self.edge.move_onto(secondary.transport, &secondary.first);
        Some(secondary.handover)
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::longpoll_session::{Mailbox, NewSession};
    use hearth_edge::frames::encode_frames;
    use hearth_edge::recorder::Recorder;
    use hearth_ground::metrics::ShardCounters;
    use hearth_net::budget::{HttpBudgets, ShardBudget};

    /// A session whose edge writes into its mailbox, as `longpoll::task::start` makes it:
    /// its start answered with the first message, so that the next answer is number 1.
    fn session() -> (Rc<EdgeConn>, LpSession) {
        let mailbox = Rc::new(Mailbox::default());
        let budget = ShardBudget::new(HttpBudgets::for_answers(1 << 30));
        let counters = Rc::new(ShardCounters::default());
        let edge = Rc::new(EdgeConn::new(1, mailbox.clone(), budget, counters));
        edge.write([frame("\"handshake\"")]);
        let session = LpSession::new(NewSession {
            conn: 1,
            public_id: "0-1".into(),
            password: "password".into(),
            secret: "secret".into(),
            namespace: "db".into(),
            callback: 7,
            edge: edge.clone(),
            mailbox,
        });
        let start = String::from_utf8(session.start_answer().body.to_vec()).expect("text");
        assert_eq!(
            start,
            concat!(
                "parent.pLPCommand7(\"start\",\"0-1\",\"password\");\n",
                "parent.pRTLPCB7(0,[\"handshake\"]);\n",
            )
        );
        (edge, session)
    }

    fn frame(text: &str) -> Bytes {
        encode_frames(text.to_owned())
    }

    fn body(session: &LpSession) -> String {
        String::from_utf8(session.answer().body.to_vec()).expect("a script is text")
    }

    #[test]
    fn the_switch_keeps_every_message_once_and_in_order() {
        let (edge, session) = session();
        // Sent before the switch: in the mailbox, for the polls.
        edge.write([frame("\"one\""), frame("\"two\"")]);
        // Sent before the switch too, but still in the outbox (as when the mailbox is full):
        // it must leave after the long poll's `n`, so by the WebSocket.
        edge.cork();
        edge.write([frame("\"three\"")]);
        // The WebSocket: its socket takes nothing yet, and its own outbox holds the
        // upgrade's answer and its frames.
        let socket = Recorder::new(0);
        let first = Rc::new(Outbox::new(socket.clone(), None));
        first.send([Bytes::from_static(b"101|a|o|o|")]);
        let (handover, _handed) = oneshot::channel();
        assert!(session.may_move("db", "secret"));
        assert!(!session.may_move("db", "secreT"));
        assert!(!session.may_move("other", "secret"));
        let secondary = Secondary {
            transport: socket.clone(),
            first: first.clone(),
            handover,
        };
        assert!(session.attach_secondary(secondary).is_ok());
        assert!(!session.may_move("db", "secret"), "one WebSocket at a time");
        assert!(session.switch_at("\"not the end\"").is_none());
        assert!(session.switch_at(END_OF_TRANSMISSION).is_some());
        edge.write([frame("\"four\"")]);
        edge.uncork();
        socket.room.set(1 << 20);
        assert_eq!(
            edge.outbox().write_now(),
            hearth_edge::socket::Sent::Written
        );

        // The polls: what waited, the `n`, then the close after that answer.
        assert_eq!(
            body(&session),
            concat!(
                "parent.pRTLPCB7(1,[\"one\",\"two\",{\"t\":\"c\",\"d\":{\"t\":\"n\",\"d\":{}}}]);\n",
                "parent.pLPCommand7(\"close\",1);\n",
            )
        );
        // A later poll: the close again, nothing repeated.
        assert_eq!(body(&session), "parent.pLPCommand7(\"close\",1);\n");
        // The WebSocket: its own bytes first, then what the owner sent from the switch on.
        let mut expected = b"101|a|o|o|".to_vec();
        expected.extend_from_slice(&frame("\"three\""));
        expected.extend_from_slice(&frame("\"four\""));
        assert_eq!(*socket.written.borrow(), expected);
        assert!(first.is_empty());
        assert!(!session.may_move("db", "secret"), "moved once");
    }

    #[test]
    fn an_end_of_transmission_without_a_websocket_changes_nothing() {
        let (edge, session) = session();
        assert!(session.switch().is_none());
        // A WebSocket that went away before the switch gives its place back.
        let socket = Recorder::new(100);
        let first = Rc::new(Outbox::new(socket.clone(), None));
        let (handover, _handed) = oneshot::channel();
        let secondary = Secondary {
            transport: socket,
            first: first.clone(),
            handover,
        };
        assert!(session.attach_secondary(secondary).is_ok());
        session.drop_secondary(&first);
        assert!(session.switch().is_none());
        edge.write([frame("\"still polling\"")]);
        assert_eq!(body(&session), "parent.pRTLPCB7(1,[\"still polling\"]);\n");
    }
}
