//! A shard's counters. The shard's thread is their only writer, so each is a plain cell: a
//! count is a load, an add and a store, with no atomic instruction, no lock and no borrow
//! flag. A scrape asks the shard for a copy through its queue ([`ShardCounters::snapshot`])
//! and sums the copies of all shards.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::histogram::{HistogramSnapshot, LocalHistogram};
use super::labels::{
    Channel, CloseCause, HttpRefusal, Outcome, RequestKind, SessionTransport, StreamEnd,
};

const KINDS: usize = RequestKind::ALL.len();
const OUTCOMES: usize = Outcome::ALL.len();
const CAUSES: usize = CloseCause::ALL.len();
const REFUSALS: usize = HttpRefusal::ALL.len();
const CHANNELS: usize = Channel::ALL.len();
const TRANSPORTS: usize = SessionTransport::ALL.len();
const STREAM_ENDS: usize = StreamEnd::ALL.len();

fn add(cell: &Cell<u64>, count: u64) {
    cell.set(cell.get().wrapping_add(count));
}

/// Everything a shard counts; owned by the shard, written only by its thread.
#[derive(Debug, Default)]
pub struct ShardCounters {
    requests: [[Cell<u64>; OUTCOMES]; KINDS],
    /// Writes the engine applied (each a log record, whatever the durability mode).
    writes: Cell<u64>,
    /// Pushes queued to a listener (one per listener of each change), by transport.
    pushes: [Cell<u64>; CHANNELS],
    /// Bytes handed to client sockets, by transport.
    bytes_out: [Cell<u64>; CHANNELS],
    /// Realtime messages received from clients by this core's databases.
    messages_in: Cell<u64>,
    websockets_opened: Cell<u64>,
    closes: [Cell<u64>; CAUSES],
    /// Long-polling and WebTransport sessions that ended, by transport and cause.
    session_closes: [[Cell<u64>; CAUSES]; TRANSPORTS],
    /// Event streams the server ended, by why.
    stream_ends: [Cell<u64>; STREAM_ENDS],
    http_refused: [Cell<u64>; REFUSALS],
    streams_opened: Cell<u64>,
    /// REST requests this core read for a database another core owns.
    rest_forwarded: Cell<u64>,
    /// WebSocket connections this core held for a database another core owns.
    held_for_others: Cell<u64>,
    /// WebSocket sessions moved to their database's next owner with the socket kept.
    sessions_moved: Cell<u64>,
    log_bytes: Cell<u64>,
    snapshots: Cell<u64>,
    /// REST reads answered from the cache of serialized answers, and their bytes.
    rest_cache_hits: Cell<u64>,
    rest_cache_hit_bytes: Cell<u64>,
    /// REST reads the cache could have answered but did not hold (or held stale).
    rest_cache_misses: Cell<u64>,
    /// Bytes the cache holds now (a level, not a count).
    rest_cache_bytes: Cell<u64>,
    /// WebTransport sessions this shard serves as their edge now (a level).
    webtransport_sessions: Cell<u64>,
    log_sync: LocalHistogram,
    ack_latency: LocalHistogram,
    /// Writes whose acknowledgement waits for the log (`--durability strict`): their log
    /// position and when they were applied, oldest first.
    unacked: RefCell<VecDeque<(u64, Instant)>>,
}

impl ShardCounters {
    pub fn request(&self, kind: RequestKind, outcome: Outcome) {
        add(&self.requests[kind as usize][outcome as usize], 1);
    }

    pub fn write_applied(&self) {
        add(&self.writes, 1);
    }

    pub fn pushed(&self, channel: Channel) {
        add(&self.pushes[channel as usize], 1);
    }

    pub fn bytes_out(&self, channel: Channel, bytes: usize) {
        add(&self.bytes_out[channel as usize], bytes as u64);
    }

    pub fn message_in(&self) {
        add(&self.messages_in, 1);
    }

    pub fn websocket_opened(&self) {
        add(&self.websockets_opened, 1);
    }

    pub fn websocket_closed(&self, cause: CloseCause) {
        add(&self.closes[cause as usize], 1);
    }

    pub fn session_closed(&self, transport: SessionTransport, cause: CloseCause) {
        add(&self.session_closes[transport as usize][cause as usize], 1);
    }

    pub fn stream_ended(&self, end: StreamEnd) {
        add(&self.stream_ends[end as usize], 1);
    }

    pub fn http_refused(&self, refusal: HttpRefusal) {
        add(&self.http_refused[refusal as usize], 1);
    }

    pub fn stream_opened(&self) {
        add(&self.streams_opened, 1);
    }

    pub fn rest_forwarded(&self) {
        add(&self.rest_forwarded, 1);
    }

    pub fn held_for_other(&self) {
        add(&self.held_for_others, 1);
    }

    pub fn session_moved(&self) {
        add(&self.sessions_moved, 1);
    }

    /// A REST read was answered from the cache with `bytes`.
    pub fn rest_cache_hit(&self, bytes: usize) {
        add(&self.rest_cache_hits, 1);
        add(&self.rest_cache_hit_bytes, bytes as u64);
    }

    /// A REST read whose answer is large enough to keep was not in the cache.
    pub fn rest_cache_miss(&self) {
        add(&self.rest_cache_misses, 1);
    }

    /// The cache of REST answers holds `bytes` now.
    pub fn rest_cache_held(&self, bytes: usize) {
        self.rest_cache_bytes.set(bytes as u64);
    }

    /// A WebTransport session began (`true`) or ended on this shard.
    pub fn webtransport_session(&self, opened: bool) {
        let now = self.webtransport_sessions.get();
        self.webtransport_sessions.set(if opened {
            now + 1
        } else {
            now.saturating_sub(1)
        });
    }

    pub fn snapshot_taken(&self) {
        add(&self.snapshots, 1);
    }

    /// A batch of `bytes` log bytes was written and synced in `elapsed`.
    pub fn log_synced(&self, bytes: u64, elapsed: Duration) {
        add(&self.log_bytes, bytes);
        self.log_sync.observe(elapsed);
    }

    /// A write was appended to the log at `seq`; its acknowledgement leaves once the log is
    /// durable there.
    pub fn awaiting_ack(&self, seq: u64) {
        self.unacked.borrow_mut().push_back((seq, Instant::now()));
    }

    /// The log is durable up to `durable`: the writes up to there are acknowledged now.
    pub fn durable(&self, durable: u64) {
        let mut unacked = self.unacked.borrow_mut();
        if unacked.front().is_none_or(|(seq, _)| *seq > durable) {
            return;
        }
        let now = Instant::now();
        while let Some(&(seq, applied)) = unacked.front() {
            if seq > durable {
                break;
            }
            unacked.pop_front();
            self.ack_latency
                .observe(now.saturating_duration_since(applied));
        }
    }

    /// The log failed: the writes still waiting are never acknowledged.
    pub fn never_acked(&self) {
        self.unacked.borrow_mut().clear();
    }

    pub fn snapshot(&self) -> CounterSnapshot {
        let copy = |cells: &[Cell<u64>]| cells.iter().map(Cell::get).collect::<Vec<_>>();
        CounterSnapshot {
            requests: self.requests.iter().map(|row| copy(row)).collect(),
            writes: self.writes.get(),
            pushes: copy(&self.pushes),
            bytes_out: copy(&self.bytes_out),
            messages_in: self.messages_in.get(),
            websockets_opened: self.websockets_opened.get(),
            closes: copy(&self.closes),
            session_closes: self.session_closes.iter().map(|row| copy(row)).collect(),
            stream_ends: copy(&self.stream_ends),
            http_refused: copy(&self.http_refused),
            streams_opened: self.streams_opened.get(),
            rest_forwarded: self.rest_forwarded.get(),
            held_for_others: self.held_for_others.get(),
            sessions_moved: self.sessions_moved.get(),
            log_bytes: self.log_bytes.get(),
            snapshots: self.snapshots.get(),
            rest_cache_hits: self.rest_cache_hits.get(),
            rest_cache_hit_bytes: self.rest_cache_hit_bytes.get(),
            rest_cache_misses: self.rest_cache_misses.get(),
            rest_cache_bytes: self.rest_cache_bytes.get(),
            webtransport_sessions: self.webtransport_sessions.get(),
            log_sync: self.log_sync.snapshot(),
            ack_latency: self.ack_latency.snapshot(),
        }
    }
}

/// A copy of a shard's counters, plain data that may cross threads; summed with
/// [`CounterSnapshot::merge`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CounterSnapshot {
    /// By [`RequestKind`], then by [`Outcome`].
    pub requests: Vec<Vec<u64>>,
    pub writes: u64,
    /// By [`Channel`].
    pub pushes: Vec<u64>,
    /// By [`Channel`].
    pub bytes_out: Vec<u64>,
    pub messages_in: u64,
    pub websockets_opened: u64,
    /// By [`CloseCause`].
    pub closes: Vec<u64>,
    /// By [`SessionTransport`], then [`CloseCause`].
    pub session_closes: Vec<Vec<u64>>,
    /// By [`StreamEnd`].
    pub stream_ends: Vec<u64>,
    /// By [`HttpRefusal`].
    pub http_refused: Vec<u64>,
    pub streams_opened: u64,
    pub rest_forwarded: u64,
    pub held_for_others: u64,
    pub sessions_moved: u64,
    pub log_bytes: u64,
    pub snapshots: u64,
    pub rest_cache_hits: u64,
    pub rest_cache_hit_bytes: u64,
    pub rest_cache_misses: u64,
    /// Summed over the shards: the server's total.
    pub rest_cache_bytes: u64,
    pub webtransport_sessions: u64,
    pub log_sync: HistogramSnapshot,
    pub ack_latency: HistogramSnapshot,
}

fn add_all(into: &mut Vec<u64>, more: &[u64]) {
    if into.len() < more.len() {
        into.resize(more.len(), 0);
    }
    for (count, more) in into.iter_mut().zip(more) {
        *count += more;
    }
}

impl CounterSnapshot {
    pub fn merge(&mut self, other: &CounterSnapshot) {
        if self.requests.len() < other.requests.len() {
            self.requests.resize(other.requests.len(), Vec::new());
        }
        for (row, more) in self.requests.iter_mut().zip(&other.requests) {
            add_all(row, more);
        }
        self.writes += other.writes;
        add_all(&mut self.pushes, &other.pushes);
        add_all(&mut self.bytes_out, &other.bytes_out);
        self.messages_in += other.messages_in;
        self.websockets_opened += other.websockets_opened;
        add_all(&mut self.closes, &other.closes);
        if self.session_closes.len() < other.session_closes.len() {
            self.session_closes
                .resize(other.session_closes.len(), Vec::new());
        }
        for (row, more) in self.session_closes.iter_mut().zip(&other.session_closes) {
            add_all(row, more);
        }
        add_all(&mut self.stream_ends, &other.stream_ends);
        add_all(&mut self.http_refused, &other.http_refused);
        self.streams_opened += other.streams_opened;
        self.rest_forwarded += other.rest_forwarded;
        self.held_for_others += other.held_for_others;
        self.sessions_moved += other.sessions_moved;
        self.log_bytes += other.log_bytes;
        self.snapshots += other.snapshots;
        self.rest_cache_hits += other.rest_cache_hits;
        self.rest_cache_hit_bytes += other.rest_cache_hit_bytes;
        self.rest_cache_misses += other.rest_cache_misses;
        self.rest_cache_bytes += other.rest_cache_bytes;
        self.webtransport_sessions += other.webtransport_sessions;
        self.log_sync.merge(&other.log_sync);
        self.ack_latency.merge(&other.ack_latency);
    }

    pub fn requests(&self, kind: RequestKind, outcome: Outcome) -> u64 {
        self.requests
            .get(kind as usize)
            .and_then(|row| row.get(outcome as usize))
            .copied()
            .unwrap_or(0)
    }

    /// WebSocket connections that ended, all causes.
    pub fn websockets_closed(&self) -> u64 {
        self.closes.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_copied_and_summed() {
        let a = ShardCounters::default();
        let b = ShardCounters::default();
        a.request(RequestKind::Put, Outcome::Ok);
        a.request(RequestKind::Put, Outcome::Ok);
        b.request(RequestKind::Put, Outcome::Ok);
        b.request(RequestKind::RestDelete, Outcome::Denied);
        a.write_applied();
        b.pushed(Channel::Http);
        b.bytes_out(Channel::Websocket, 100);
        a.bytes_out(Channel::Websocket, 20);
        a.websocket_closed(CloseCause::SlowReader);
        b.http_refused(HttpRefusal::BodiesBusy);
        a.log_synced(4096, Duration::from_micros(300));
        let mut sum = a.snapshot();
        sum.merge(&b.snapshot());
        assert_eq!(sum.requests(RequestKind::Put, Outcome::Ok), 3);
        assert_eq!(sum.requests(RequestKind::RestDelete, Outcome::Denied), 1);
        assert_eq!(sum.requests(RequestKind::RestDelete, Outcome::Ok), 0);
        assert_eq!(sum.writes, 1);
        assert_eq!(sum.pushes, vec![0, 1]);
        assert_eq!(sum.bytes_out, vec![120, 0]);
        assert_eq!(sum.closes[CloseCause::SlowReader as usize], 1);
        assert_eq!(sum.websockets_closed(), 1);
        assert_eq!(sum.http_refused[HttpRefusal::BodiesBusy as usize], 1);
        assert_eq!(sum.log_bytes, 4096);
        assert_eq!(sum.log_sync.count(), 1);
    }

    #[test]
    fn merging_into_an_empty_snapshot_copies() {
        let counters = ShardCounters::default();
        counters.request(RequestKind::Listen, Outcome::Ok);
        let mut sum = CounterSnapshot::default();
        sum.merge(&counters.snapshot());
        assert_eq!(sum, counters.snapshot());
    }

    #[test]
    fn writes_are_acknowledged_once_durable() {
        let counters = ShardCounters::default();
        counters.awaiting_ack(1);
        counters.awaiting_ack(2);
        counters.awaiting_ack(3);
        counters.durable(0);
        assert_eq!(counters.snapshot().ack_latency.count(), 0);
        counters.durable(2);
        assert_eq!(counters.snapshot().ack_latency.count(), 2);
        counters.never_acked();
        counters.durable(3);
        assert_eq!(counters.snapshot().ack_latency.count(), 2);
        counters.awaiting_ack(4);
        counters.durable(9);
        assert_eq!(counters.snapshot().ack_latency.count(), 3);
    }
}
