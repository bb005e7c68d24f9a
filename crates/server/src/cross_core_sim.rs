//! A seeded simulation of the routing between one owner and many edges: sessions of one
//! database held on the owner's core and on several edges, messages produced by the owner with
//! and without writes in flight, the disk catching up at random moments, batches flushed and
//! carried out by the edges in random interleavings, and sockets that take bytes at random
//! rates. After every step it checks that nothing reached a socket or a batch before its write
//! was durable; at the end, that every connection got exactly the owner's messages for it, in
//! the owner's order.
//!
//! `cargo test -p hearth-server cross_core_sim` runs [`FIXED_SEEDS`] seeds; `SIM_SEEDS=<count>`
//! runs that many; `SEED=<n>` replays one.

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::io::Cursor;
use std::rc::Rc;
use std::sync::Arc;

use hearth_store::SplitMix64;
use hearth_sync::ConnId;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::frame::FrameHeader;

use hearth_edge::recorder::Recorder;
use hearth_edge::socket::Outbox;
use hearth_edge::EdgeConn;
use hearth_ground::cross_core::{EdgeItem, Outgoing, ToEdge};
use hearth_net::budget::{HttpBudgets, ShardBudget};
use hearth_owner::outbound::{ConnHandle, Route};
use hearth_persist::{Gate, Tagger};

const FIXED_SEEDS: u64 = 64;
const STEPS: usize = 600;

/// The payloads of the whole text frames at the start of `bytes`.
fn texts(bytes: &[u8]) -> Vec<String> {
    let mut cursor = Cursor::new(bytes);
    let mut texts = Vec::new();
    while let Ok(Some((_, length))) = FrameHeader::parse(&mut cursor) {
        let start = cursor.position() as usize;
        let end = start + length as usize;
        if end > bytes.len() {
            break;
        }
        texts.push(String::from_utf8_lossy(&bytes[start..end]).into_owned());
        cursor.set_position(end as u64);
    }
    texts
}

/// The tag a message was produced with, written into its text as `conn:n:tag`.
fn tag_of(text: &str) -> u64 {
    text.rsplit(':')
        .next()
        .and_then(|tag| tag.parse().ok())
        .unwrap_or(u64::MAX)
}

struct Edge {
    receiver: mpsc::UnboundedReceiver<ToEdge>,
    /// Batches taken off the channel and not yet carried out, to interleave edges at random.
    taken: VecDeque<ToEdge>,
    conns: HashMap<ConnId, (Rc<EdgeConn>, Rc<Recorder>)>,
}

struct World {
    rng: SplitMix64,
    gate: Rc<Gate>,
    database_seq: Rc<Cell<u64>>,
    outgoing: Rc<Outgoing>,
    sessions: HashMap<ConnId, Rc<ConnHandle>>,
    /// The owner's own connections' sockets.
    local: HashMap<ConnId, Rc<Recorder>>,
    edges: Vec<Edge>,
    produced: HashMap<ConnId, Vec<String>>,
    counter: u64,
}

impl World {
    fn new(seed: u64) -> World {
        let mut rng = SplitMix64(seed);
        let edge_count = 1 + rng.below(4) as usize;
        let (senders, receivers): (Vec<_>, Vec<_>) =
            (0..edge_count).map(|_| mpsc::unbounded_channel()).unzip();
        let outgoing = Rc::new(Outgoing::new(senders));
        let gate = Rc::new(Gate::new(true, 0));
        let database_seq = Rc::new(Cell::new(0));
        let budget = ShardBudget::new(Arc::new(HttpBudgets::default()));
        let mut edges: Vec<Edge> = receivers
            .into_iter()
            .map(|receiver| Edge {
                receiver,
                taken: VecDeque::new(),
                conns: HashMap::new(),
            })
            .collect();
        let mut sessions = HashMap::new();
        let mut local = HashMap::new();
        let connections = 2 + rng.below(10);
        for id in 1..=connections {
            let tagger = Tagger {
                gate: gate.clone(),
                database_seq: database_seq.clone(),
            };
            // Sockets with little room, so that writes wait in outboxes too.
            let recorder = Recorder::new(rng.below(300) as usize);
            let transport: Rc<dyn hearth_edge::socket::Transport> = recorder.clone();
            let conn = Rc::new(EdgeConn::new(
                id,
                transport,
                budget.clone(),
                Default::default(),
            ));
            let route = if rng.below(3) == 0 {
                local.insert(id, recorder);
                Route::Local(conn)
            } else {
                let edge = rng.below(edge_count as u64) as usize;
                edges[edge].conns.insert(id, (conn, recorder));
                Route::Remote {
                    edge,
                    outgoing: outgoing.clone(),
                }
            };
            let handle = ConnHandle::new(id, "db".into(), format!("s{id}"), tagger, route);
            sessions.insert(id, Rc::new(handle));
        }
        World {
            rng,
            gate,
            database_seq,
            outgoing,
            sessions,
            local,
            edges,
            produced: HashMap::new(),
            counter: 0,
        }
    }

    fn step(&mut self) {
        match self.rng.below(10) {
            // The database applies a write: later messages wait for it.
            0 => self.database_seq.set(self.database_seq.get() + 1),
            // A push to a random subset, or a reply to one connection.
            1..=3 => {
                let ids: Vec<ConnId> = self.sessions.keys().copied().collect();
                for id in ids {
                    if self.rng.below(2) == 0 {
                        self.produce(id);
                    }
                }
            }
            4 => {
                let id = 1 + self.rng.below(self.sessions.len() as u64);
                self.produce(id);
            }
            // The log sync completes up to some appended record.
            5 => {
                let durable = self.gate.durable();
                let target = durable + self.rng.below(self.database_seq.get() - durable + 1);
                self.advance(target);
            }
            // The owner's flush task runs.
            6 => self.flush(),
            // An edge carries out its oldest batch.
            7 | 8 => {
                let edge = self.rng.below(self.edges.len() as u64) as usize;
                self.carry_out(edge);
            }
            // A socket gets room.
            _ => self.give_room(),
        }
        self.check_durable();
    }

    fn produce(&mut self, id: ConnId) {
        let Some(session) = self.sessions.get(&id) else {
            return;
        };
        self.counter += 1;
        let text = format!("{id}:{}:{}", self.counter, self.database_seq.get());
        self.produced.entry(id).or_default().push(text.clone());
        session.send_text(text);
    }

    fn advance(&mut self, durable: u64) {
        for id in self.gate.advance(durable) {
            if let Some(session) = self.sessions.get(&id) {
                session.wake_after_disk();
            }
        }
    }

    fn flush(&mut self) {
        self.outgoing.flush();
        for edge in &mut self.edges {
            while let Ok(batch) = edge.receiver.try_recv() {
                // Checked when the batch leaves the owner: its messages were released.
                for item in &batch.items {
                    if let EdgeItem::Frames { frames, .. } = item {
                        for text in texts(frames) {
                            assert!(
                                tag_of(&text) <= self.gate.durable(),
                                "{text} left the owner before it was durable"
                            );
                        }
                    }
                }
                edge.taken.push_back(batch);
            }
        }
    }

    fn carry_out(&mut self, edge: usize) {
        let edge = &mut self.edges[edge];
        let Some(mut batch) = edge.taken.pop_front() else {
            return;
        };
        // As the edge does: one connection's frames of a batch are written together.
        let mut gathered: Vec<(ConnId, Vec<bytes::Bytes>)> = Vec::new();
        for item in batch.items.drain(..) {
            if let EdgeItem::Frames { conn, frames } = item {
                match gathered.iter_mut().find(|(id, _)| *id == conn) {
                    Some((_, all)) => all.push(frames),
                    None => gathered.push((conn, vec![frames])),
                }
            }
        }
        for (conn, frames) in gathered {
            edge.conns[&conn].0.write(frames);
        }
        batch.written();
    }

    fn give_room(&mut self) {
        let room = self.rng.below(400) as usize;
        let id = 1 + self.rng.below(self.sessions.len() as u64);
        if let Some((recorder, outbox)) = self.socket(id) {
            recorder.room.set(recorder.room.get() + room);
            outbox.write_now();
        }
    }

    /// Connection `id`'s socket and the outbox that writes to it, on the owner's core or on
    /// its edge.
    fn socket(&self, id: ConnId) -> Option<(Rc<Recorder>, Rc<Outbox>)> {
        if let Some(recorder) = self.local.get(&id) {
            let outbox = self.sessions.get(&id)?.local_edge()?.outbox();
            return Some((recorder.clone(), outbox));
        }
        self.edges.iter().find_map(|edge| {
            let (conn, recorder) = edge.conns.get(&id)?;
            Some((recorder.clone(), conn.outbox()))
        })
    }

    fn check_durable(&self) {
        let durable = self.gate.durable();
        for recorder in self.recorders() {
            for text in texts(&recorder.written.borrow()) {
                assert!(
                    tag_of(&text) <= durable,
                    "{text} reached a socket before it was durable ({durable})"
                );
            }
        }
    }

    fn recorders(&self) -> Vec<Rc<Recorder>> {
        let mut all: Vec<Rc<Recorder>> = self.local.values().cloned().collect();
        for edge in &self.edges {
            all.extend(edge.conns.values().map(|(_, recorder)| recorder.clone()));
        }
        all
    }

    /// Lets everything through and checks that every connection got exactly its messages.
    fn finish(&mut self) {
        self.advance(self.database_seq.get());
        self.flush();
        for edge in 0..self.edges.len() {
            while !self.edges[edge].taken.is_empty() {
                self.carry_out(edge);
            }
        }
        for (&id, session) in &self.sessions {
            let Some((recorder, outbox)) = self.socket(id) else {
                panic!("connection {id} has no socket");
            };
            recorder.room.set(usize::MAX / 2);
            outbox.write_now();
            let got = texts(&recorder.written.borrow());
            let expected = self.produced.get(&id).cloned().unwrap_or_default();
            assert_eq!(got, expected, "connection {id} ({})", session.session_id);
        }
    }
}

fn run_seed(seed: u64) {
    let outcome = std::panic::catch_unwind(|| {
        let mut world = World::new(seed);
        for _ in 0..STEPS {
            world.step();
        }
        world.finish();
    });
    if let Err(panic) = outcome {
        eprintln!("routing simulation failed with SEED={seed}");
        std::panic::resume_unwind(panic);
    }
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.parse().ok()
}

#[test]
fn cross_core_sim_per_connection_order_is_the_owners_and_nothing_leaves_before_it_is_durable() {
    if let Some(seed) = env_number("SEED") {
        run_seed(seed);
        return;
    }
    for seed in 0..env_number("SIM_SEEDS").unwrap_or(FIXED_SEEDS) {
        run_seed(seed);
    }
}
