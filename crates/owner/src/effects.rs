//! Delivering what one step of a database produced, in order: its log record first, then the
//! pushes and cancels, each push serialized once per transport.

use bytes::Bytes;
use hearth_sync::{Effect, Effects, PushData};
use hearth_wire::{encode_cancel, encode_push, EncodedPush};

use crate::audit::Origin;
use crate::state::Owner;
use crate::state::Session;
use hearth_edge::event_stream::SseFanout;
use hearth_edge::frames::encode_frames;
use hearth_ground::metrics::labels::Channel;
use hearth_net::time::now_ms;

/// Delivers the effects of a step of `namespace`'s database in order: a write goes to the log
/// first, so that the messages that follow it are tagged to wait for it. Each push is
/// serialized once per transport: WebSocket listeners share the same frame bytes (filtered
/// ones get the same text with their tag spliced in), and event streams share the same data
/// bytes (see `SseFanout`).
pub fn route_effects(owner: &Owner, namespace: &str, effects: Effects) {
    route_effects_from(owner, namespace, effects, Origin::SERVER);
}

/// [`route_effects`] of a step whose requests came from `origin`: the audit entries of its
/// writes name it.
pub fn route_effects_from(owner: &Owner, namespace: &str, effects: Effects, origin: Origin) {
    if effects.is_empty() {
        return;
    }
    let sessions = owner.sessions();
    // The position of the step's write record, which its trigger changes wait for.
    let mut logged = None;
    // The step's last write, whose audit entry may follow.
    let mut last_write = None;
    // Whether the database is profiled, looked up at its first push only.
    let mut profiled = None;
    for effect in effects {
        match effect {
            Effect::Push { push, targets } => {
                if *profiled.get_or_insert_with(|| is_profiled(owner, namespace)) {
                    let bytes = push_bytes(&push) * targets.len();
                    owner.with_loaded(namespace, |database| {
                        crate::profile::broadcast(database, &push.path, bytes);
                    });
                }
                let mut encoded: Option<EncodedPush> = None;
                let mut untagged: Option<Bytes> = None;
                let mut fanout = SseFanout::new(&push);
                for target in targets {
                    match sessions.get(target.conn) {
                        Some(Session::Socket(handle)) => {
                            let encoded = encoded.get_or_insert_with(|| encode_push(&push));
                            match target.tag {
                                None => {
                                    let frames = untagged
                                        .get_or_insert_with(|| encode_frames(encoded.untagged()));
                                    handle.send_frames(frames);
                                }
                                Some(tag) => handle.send_text(encoded.tagged(tag)),
                            }
                            owner.counters().pushed(Channel::Websocket);
                        }
                        // A stream holds one listen, so its tag (if any) needs no echo.
                        Some(Session::Stream(stream)) => {
                            fanout.deliver(stream);
                            owner.counters().pushed(Channel::Http);
                        }
                        None => {}
                    }
                }
            }
            Effect::Cancel {
                conn,
                path,
                query_wire,
            } => {
                match sessions.get(conn) {
                    Some(Session::Socket(handle)) => {
                        handle.send_text(encode_cancel(&path, query_wire.as_ref()));
                    }
                    // RULES HOOK: a listen revoked because the rules no longer allow the read
                    // ends the stream with a `cancel` event.
                    Some(Session::Stream(stream)) => stream.cancel(),
                    None => {}
                }
            }
            // A write's record comes before its pushes in the list, so they are queued after
            // the database's sequence number moved and wait for the record to be durable.
            Effect::Log(write) => {
                logged = owner.log_write(namespace, &write);
                if let Some(seq) = logged {
                    owner.record_change(namespace, seq, &write);
                }
                last_write = Some(write);
            }
            // Right after its write's record, before anything that waits for it: the
            // pushes and the reply are tagged with the entry's position, so that nothing is
            // acknowledged before its entry is durable too.
            Effect::Audit(facts) => {
                if let (Some(write), Some(_)) = (&last_write, logged) {
                    let entry = crate::audit::entry(&facts, write, origin, now_ms());
                    owner.log_audit(namespace, &entry.to_record());
                }
            }
            // After its write's record, whose position they wait for.
            Effect::Triggered {
                changes,
                dropped,
                writer,
            } => owner.triggered(namespace, logged, changes, dropped, writer),
            // Its pushes wait for the owner's next tick.
            Effect::Volatile => owner.volatile().mark(namespace),
        }
    }
}

fn is_profiled(owner: &Owner, namespace: &str) -> bool {
    owner
        .with_loaded(namespace, |database| database.profilers().is_active())
        .unwrap_or(false)
}

/// The estimated size of a push's data.
fn push_bytes(push: &hearth_sync::Push) -> usize {
    match &push.data {
        PushData::Put(node) => node.estimated_bytes(),
        PushData::Merge(members) => members.iter().map(|(_, node)| node.estimated_bytes()).sum(),
    }
}
