//! The owner's side of a change feed (docs/change-feed.md): a database's recent write records
//! with their log positions, the feeds open on it, and a feed's opening.
//!
//! A feed is an event stream whose events are the database's log records under its path, each
//! with its position as the event's id, so that a client that reconnects with `Last-Event-ID`
//! misses nothing and sees nothing twice. Events are queued on the stream like any other
//! stream's, tagged with their record, so none leaves before its record is durable; a resumed
//! feed's backlog is what [`ChangeLog`] still keeps.

use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use hearth_edge::event_stream::StreamHandle;
use hearth_ground::rest::{DataRequest, FeedStart, RestResponse};
use hearth_net::time::now_ms;
use hearth_sync::feed::{feed_push, ResumeError};
use hearth_sync::{AuthState, Effects, Push, PushData, Write};
use hearth_tree::Path;
use hearth_wire::{encode_sse_payload, SSE_EVENT_END};

use crate::caller_limits::Identity;
use crate::effects::route_effects;
use crate::loaded::Loaded;
use crate::rest::reply_error;
use crate::sessions;
use crate::state::Owner;
use crate::watchers::OpenFeed;

/// A feed's event id for log position `seq` of a database owned under `epoch`.
fn event_id(epoch: Option<u64>, seq: u64) -> String {
    match epoch {
        Some(epoch) => format!("{epoch}.{seq}"),
        None => seq.to_string(),
    }
}

/// One whole event of a feed at `at`: its id, then the `put` or `patch` a REST stream sends.
fn event(id: &str, push: &Push, at: &Path, export: bool) -> Option<Bytes> {
    let payload = encode_sse_payload(push, export);
    let head = payload.head_for(at)?;
    let mut out = Vec::with_capacity(id.len() + head.len() + payload.data.len() + 8);
    out.extend_from_slice(b"id: ");
    out.extend_from_slice(id.as_bytes());
    out.push(b'\n');
    out.extend_from_slice(&head);
    out.extend_from_slice(&payload.data);
    out.extend_from_slice(SSE_EVENT_END);
    Some(Bytes::from(out))
}

impl Owner {
    /// The database's write at log position `seq` was just logged: kept for feeds to resume
    /// from, and queued on each feed it changes (where it waits for the record to be durable).
    pub fn record_change(&self, namespace: &str, seq: u64, write: &Arc<Write>) {
        self.with_loaded(namespace, |loaded| {
            let epoch = loaded.epoch();
            loaded.feeds_mut().log.record(seq, write.clone());
            if loaded.feeds().open.is_empty() {
                return;
            }
            let id = event_id(epoch, seq);
            let now = now_ms();
            let mut open = std::mem::take(&mut loaded.feeds_mut().open);
            open.retain(|feed| deliver(loaded, feed, &id, write, now));
            loaded.feeds_mut().open = open;
        });
    }
}

/// Queues `write` on `feed` if it changes something there; `false` once the feed is gone or
/// may no longer read its path.
fn deliver(loaded: &Loaded, feed: &OpenFeed, id: &str, write: &Write, now: u64) -> bool {
    let Some(stream) = feed.stream.upgrade().filter(|stream| !stream.is_closing()) else {
        return false;
    };
    let Some(push) = feed_push(write, &feed.path) else {
        return true;
    };
    if !matches!(feed.auth, AuthState::Admin)
        && loaded.check_read_as(&feed.auth, &feed.path, now).is_err()
    {
        stream.cancel();
        return false;
    }
    if let Some(event) = event(id, &push, &feed.path, feed.export) {
        stream.send(&[event]);
    }
    true
}

/// Opens `handle` as a change feed of its database from `since`: after the caller's read
/// access to the path is checked (admins pass), the backlog is queued (or, from `now`, the
/// whole value at the path as one `put`), and every later record under the path follows.
pub fn start_feed(
    owner: &Owner,
    handle: Rc<StreamHandle>,
    auth: AuthState,
    request: &DataRequest,
    since: FeedStart,
) -> Result<(), RestResponse> {
    if owner.store().is_none() {
        return Err(RestResponse::error(
            400,
            "this server keeps no log (it runs without a data directory), so it has no change feed",
        ));
    }
    let namespace = handle.namespace.clone();
    owner.add_stream(handle.clone());
    let mut effects = Effects::new();
    let opened = owner.with_database(&namespace, |loaded| {
        let now = now_ms();
        loaded
            .check_read_as(&auth, &handle.path, now)
            .map_err(reply_error)?;
        let backlog = backlog(loaded, &handle, since)?;
        // A change feed is one of its caller's connections under the rules' limits.
        sessions::follow_limits(owner, loaded);
        loaded
            .admit_caller(handle.id, Identity::of(&auth, request.address))
            .and_then(|()| loaded.claim_caller(handle.id))
            .map_err(|refusal| RestResponse::error(429, refusal.message))?;
        loaded.connect(handle.id);
        loaded.set_auth(handle.id, auth.clone(), now, &mut effects);
        if !backlog.is_empty() {
            handle.send(&backlog);
        }
        loaded.feeds_mut().open.push(OpenFeed {
            stream: Rc::downgrade(&handle),
            path: handle.path.clone(),
            export: request.style.export,
            auth,
        });
        Ok(())
    });
    route_effects(owner, &namespace, effects);
    if opened.is_err() {
        sessions::close_stream(owner, &handle);
    }
    opened
}

/// The events a feed starts with.
fn backlog(
    loaded: &Loaded,
    handle: &StreamHandle,
    since: FeedStart,
) -> Result<Vec<Bytes>, RestResponse> {
    let last = loaded.seq();
    if last == u64::MAX {
        return Err(RestResponse::error(
            503,
            "the database's log failed; it has no change feed until the server restarts",
        ));
    }
    let epoch = loaded.epoch();
    let at = &handle.path;
    let (given_epoch, after) = match since {
        FeedStart::Now => {
            let push = Push {
                path: at.clone(),
                data: PushData::Put(loaded.root().get(at)),
            };
            return Ok(event(&event_id(epoch, last), &push, at, handle.export)
                .into_iter()
                .collect());
        }
        FeedStart::After { epoch, seq } => (epoch, seq),
    };
    if given_epoch != epoch {
        return Err(start_again(
            "the position was given by another owner of the database (a failover or a move \
             since)",
        ));
    }
    let records = loaded
        .feeds()
        .log
        .since(after, last)
        .map_err(|error| match error {
            ResumeError::TooOld { floor } => start_again(&format!(
                "the records after that position are no longer kept (the oldest position a \
                 feed may resume from is {})",
                event_id(epoch, floor)
            )),
            ResumeError::Ahead { last } => RestResponse::error(
                400,
                format!(
                    "the position is beyond the database's last record ({}): not one of this \
                     database's",
                    event_id(epoch, last)
                ),
            ),
        })?;
    Ok(records
        .filter_map(|(seq, write)| {
            let push = feed_push(write, at)?;
            event(&event_id(epoch, seq), &push, at, handle.export)
        })
        .collect())
}

/// A feed that cannot resume: 410, and how to start again.
fn start_again(why: &str) -> RestResponse {
    RestResponse::error(
        410,
        format!(
            "cannot resume the change feed: {why}; start again with changesSince=now (and no \
             Last-Event-ID), whose first event is the whole value at the path"
        ),
    )
}
