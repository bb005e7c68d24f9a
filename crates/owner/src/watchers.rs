//! What a loaded database keeps of the streams that watch it, beside its engine: its change
//! feeds with the write records they resume from (`feed.rs` opens and feeds them) and its
//! profilers (`profile.rs` records operations to them). State only, so that `loaded.rs` can
//! hold it without reaching the code that drives it.

use std::rc::Weak;

use bytes::Bytes;
use hearth_edge::event_stream::StreamHandle;
use hearth_sync::feed::ChangeLog;
use hearth_sync::AuthState;
use hearth_tree::Path;
use serde_json::Value;

/// A database's change log and the feeds open on it.
pub struct Feeds {
    pub(crate) log: ChangeLog,
    pub(crate) open: Vec<OpenFeed>,
}

pub(crate) struct OpenFeed {
    pub(crate) stream: Weak<StreamHandle>,
    pub(crate) path: Path,
    pub(crate) export: bool,
    /// Checked against the rules before each event: a feed whose read is no longer allowed
    /// ends with `cancel`, as a stream's revoked listen does.
    pub(crate) auth: AuthState,
}

impl Feeds {
    /// Nothing kept yet; the database is as of log position `floor`.
    pub fn new(floor: u64) -> Feeds {
        Feeds {
            log: ChangeLog::new(floor),
            open: Vec::new(),
        }
    }

    /// The write records replayed from the log at start, for feeds to resume across it.
    pub fn recovered(&mut self, log: ChangeLog) {
        self.log = log;
    }

    /// The database went back to its state at log position `durable` (the log failed).
    pub fn roll_back(&mut self, durable: u64) {
        self.log.roll_back(durable);
    }
}

/// The profilers open on a database.
#[derive(Default)]
pub struct Profilers {
    pub(crate) open: Vec<Weak<StreamHandle>>,
}

impl Profilers {
    /// Whether anyone profiles the database: the one test the hot path makes.
    pub fn is_active(&self) -> bool {
        !self.open.is_empty()
    }

    /// Sends `record` to every profiler still open, and forgets the closed ones.
    pub(crate) fn send(&mut self, record: &Value) {
        let mut event = b"event: log\ndata: ".to_vec();
        if serde_json::to_writer(&mut event, record).is_err() {
            return;
        }
        event.extend_from_slice(b"\n\n");
        let event = Bytes::from(event);
        self.open.retain(|stream| match stream.upgrade() {
            Some(stream) if !stream.is_closing() => {
                stream.send(std::slice::from_ref(&event));
                true
            }
            _ => false,
        });
    }
}
