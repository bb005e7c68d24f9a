//! `POST /.admin/backup`: a consistent backup of a running server, streamed to the admin
//! who asked for it (`hearth backup` writes it into a directory, `hearth restore` turns that
//! into a data directory).
//!
//! The shard that received the request asks every shard, through its queue, for its cut
//! ([`cut`]): its databases as of one position of its log. A thread then writes the archive
//! ([`archive`]) of those states as snapshot files ([`stream`]) into a bounded queue that the
//! answer drains. Shards stop for nothing: a cut is one synchronous step of copy-on-write
//! clones, and the serialization runs off their threads.
//!
//! *Why streamed to the client rather than written into a directory on the server:* the
//! backup leaves the machine whose disk it protects; it cannot fill the data directory's disk
//! (which would make every shard read-only, decision 23); and an admin credential never lets
//! its holder choose paths on the server.

pub mod archive;
pub mod cut;
pub(crate) mod stream;

use std::sync::atomic::{AtomicBool, Ordering};

use hyper::header::HeaderValue;
use hyper::Response;
use tracing::info;

pub use stream::{DESCRIPTION, QUEUE_CHUNKS};

use hearth_edge::http_body::HearthBody;
use hearth_ground::rest::RestResponse;
use hearth_owner::Owner;
use hearth_transport::inboxes::Inboxes;

/// The media type of the archive.
pub const CONTENT_TYPE: &str = "application/vnd.hearth.backup";

/// One backup at a time per process: each holds every database's state as of its cut until
/// it is written.
static RUNNING: AtomicBool = AtomicBool::new(false);

/// Clears [`RUNNING`] when the backup's archive is done or dropped.
pub struct Running;

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.store(false, Ordering::SeqCst);
    }
}

/// Answers `POST /.admin/backup` (the caller is an admin: checked when the request was parsed).
pub async fn respond(inboxes: &Inboxes, owner: &Owner) -> Response<HearthBody> {
    if owner.store().is_none() {
        return RestResponse::error(
            400,
            "this server keeps no data on disk (--durability none): there is nothing to back up",
        )
        .into_http();
    }
    if RUNNING.swap(true, Ordering::SeqCst) {
        return RestResponse::error(409, "a backup is already running; try again when it ends")
            .into_http();
    }
    let running = Running;
    let mut cuts = Vec::with_capacity(inboxes.shard_count());
    let asked: Vec<_> = (0..inboxes.shard_count())
        .map(|index| inboxes.ask_cut(index))
        .collect();
    for answer in asked {
        match answer.await {
            Ok(Ok(cut)) => cuts.push(cut),
            Ok(Err(reason)) => return RestResponse::error(503, reason).into_http(),
            Err(_) => {
                return RestResponse::error(503, "a shard is shutting down").into_http();
            }
        }
    }
    let databases: usize = cuts
        .iter()
        .map(|cut| cut.states.len() + cut.files.len())
        .sum();
    info!(shards = cuts.len(), databases, "backup started");
    let queue = match stream::start(inboxes.shard_count(), cuts) {
        Ok(queue) => queue,
        Err(error) => {
            return RestResponse::error(500, format!("cannot start the backup: {error}"))
                .into_http()
        }
    };
    let mut response = Response::new(HearthBody::Queue(queue, Box::new(running)));
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static(CONTENT_TYPE),
    );
    headers.insert(
        hyper::header::CACHE_CONTROL,
        HeaderValue::from_static("no-store"),
    );
    response
}
