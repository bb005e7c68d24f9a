//! The owner side of replication, as a pure state machine: which node holds each database's
//! current copy (its full copy shipped over the link's current connection, and every record
//! since), per follower node which shipped records are not acknowledged yet, and whether
//! acknowledgements wait for them. Time and the link's state are arguments.
//!
//! A database has one copy that is kept current: when its follower changes (a node joined or
//! left and placement names another), the next thing shipped to the new one is a full copy,
//! and so is the next one to the old one if it becomes the follower again, since it missed
//! what was written meanwhile.
//!
//! The rule the gate follows (`replica::gate_position`): a message tagged with shard sequence
//! number `s` may leave once every record up to `s` is on this node's disk and, for each
//! follower with records in flight that hold acknowledgements, `s` is below the first of them,
//! and below the first record kept back for a member of its database's sync set.
//!
//! With sync sets (an etcd cluster under `--replication sync`, decision 58) a record holds for
//! each member of its database's set: until that member acknowledges it, or until the set in
//! etcd no longer names the member ([`Shipper::release_excluded`]). A member that is not sent
//! the record at all (it is not the follower now, its link is down, it is too far behind)
//! keeps it back the same way ([`Shipper::block`]). Giving up on a follower (a timeout) never
//! releases anything by itself: the owner first takes the follower out of the set, so that it
//! can no longer take the database over without those writes. Without sets (the static
//! list) a follower given up stops holding at once, as before.

use std::collections::BTreeMap;
use std::rc::Rc;

use rustc_hash::FxHashMap;

/// Shipped and unacknowledged bytes toward one follower, per shard, beyond which the shard
/// stops waiting for it and ships nothing new until it has caught up: a slow follower must
/// not grow the owner's memory without bound.
pub const MAX_IN_FLIGHT_BYTES: u64 = 64 * 1024 * 1024;

/// How long the oldest shipped record may wait for its acknowledgement before the shard stops
/// waiting for the follower (a follower paused or stuck: its link is still up).
pub const ACK_TIMEOUT_MS: u64 = 2_000;

/// Labels from here up are copies made without a write (`Replication::copy`, counting down
/// from the top), never a record's sequence number.
pub const COPY_LABELS: u64 = u64::MAX / 2;

/// What to send for a record of a database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ship {
    /// Nothing: the follower is unreachable or too far behind.
    Skip,
    /// The record itself.
    Record,
    /// A full copy of the database (its first record over this connection of the link).
    Copy,
}

/// Why a shard stopped waiting for a follower.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Degraded {
    /// The link was never up yet (the nodes are starting): no fault of the operator's.
    LinkNotUpYet,
    LinkDown,
    TooFarBehind,
    AckTimeout,
}

impl Degraded {
    pub fn reason(self) -> &'static str {
        match self {
            Degraded::LinkNotUpYet => "the link to the follower is not up yet",
            Degraded::LinkDown => "the link to the follower is down",
            Degraded::TooFarBehind => "the follower is too far behind",
            Degraded::AckTimeout => "the follower did not acknowledge in time",
        }
    }
}

#[derive(Debug, Clone)]
struct InFlight {
    bytes: u64,
    shipped_ms: u64,
    /// Whether acknowledgements to clients wait for it.
    holds: bool,
    /// The database it is of (a record; a catch-up copy holds nothing and needs none).
    namespace: Option<Rc<str>>,
}

#[derive(Debug, Default)]
struct Follower {
    generation: u64,
    in_flight: BTreeMap<u64, InFlight>,
    bytes: u64,
    degraded: Option<Degraded>,
}

/// A change of a follower's state the runtime logs and counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Degraded(usize, Degraded),
    CaughtUp(usize),
}

/// One shard's replication toward every follower node.
#[derive(Debug)]
pub struct Shipper {
    /// Whether acknowledgements wait for followers (`--replication sync`).
    sync: bool,
    /// Whether a hold ends only by an acknowledgement or the follower's leaving the sync
    /// set (an etcd cluster); otherwise a follower given up stops holding at once.
    sets: bool,
    /// Records kept back for a member of their database's sync set that was not sent them,
    /// by (sequence number, member): they wait until it leaves the set.
    blocked: BTreeMap<(u64, usize), Rc<str>>,
    /// Records kept back until a follower on its way into their database's set is in it
    /// (or gives up joining), by (sequence number, follower): so that once a write is
    /// acknowledged, the follower that has it may also take the database over.
    joins: BTreeMap<(u64, usize), Rc<str>>,
    followers: Vec<Follower>,
    /// By database: the node whose copy is current (a full copy and every record since went
    /// to it over its link's current connection).
    copies: FxHashMap<String, usize>,
    events: Vec<Event>,
}

impl Shipper {
    pub fn new(sync: bool, nodes: usize) -> Shipper {
        Shipper {
            sync,
            sets: false,
            blocked: BTreeMap::new(),
            joins: BTreeMap::new(),
            followers: (0..nodes).map(|_| Follower::default()).collect(),
            copies: FxHashMap::default(),
            events: Vec::new(),
        }
    }

    /// Holds end only by an acknowledgement or the follower's leaving the sync set.
    pub fn with_sets(mut self) -> Shipper {
        self.sets = true;
        self
    }

    /// What to ship to `node` for a record of `namespace`, given its link's `(generation,
    /// up)`. A new generation starts over: everything in flight went with the old connection
    /// and every database needs a copy again.
    pub fn prepare(&mut self, node: usize, link: (u64, bool), namespace: &str) -> Ship {
        if !self.follow_link(node, link) {
            return Ship::Skip;
        }
        let Some(follower) = self.followers.get_mut(node) else {
            return Ship::Skip;
        };
        if follower.bytes > MAX_IN_FLIGHT_BYTES {
            self.degrade(node, Degraded::TooFarBehind);
            self.forget_node(node);
            return Ship::Skip;
        }
        if self.has_copy(node, namespace) {
            Ship::Record
        } else {
            self.copied(node, namespace);
            Ship::Copy
        }
    }

    /// Whether `node` holds the current copy of `namespace`: its records may follow as they
    /// are.
    pub fn has_copy(&self, node: usize, namespace: &str) -> bool {
        self.copies.get(namespace) == Some(&node)
    }

    /// Whether `node` has `namespace` on its disk through the shard's record `seq`: it holds
    /// the current copy, is not left behind, and has acknowledged every record up to `seq`
    /// and every copy (labelled from the top of the sequence space, [`COPY_LABELS`]).
    pub fn caught_up(&self, node: usize, namespace: &str, seq: u64) -> bool {
        let Some(follower) = self.followers.get(node) else {
            return false;
        };
        self.has_copy(node, namespace)
            && follower.degraded.is_none()
            && follower
                .in_flight
                .keys()
                .all(|&label| label > seq && label < COPY_LABELS)
    }

    /// Bytes shipped to `node` and not acknowledged yet.
    pub fn in_flight_bytes(&self, node: usize) -> u64 {
        self.followers
            .get(node)
            .map_or(0, |follower| follower.bytes)
    }

    /// No copy on `node` is current any more (its connection is gone, or it fell behind).
    fn forget_node(&mut self, node: usize) {
        self.copies.retain(|_, holder| *holder != node);
    }

    /// Notes the link's state toward `node`; whether it is up.
    pub fn follow_link(&mut self, node: usize, (generation, up): (u64, bool)) -> bool {
        let Some(follower) = self.followers.get_mut(node) else {
            return false;
        };
        if follower.generation != generation {
            follower.generation = generation;
            self.lose_in_flight(node);
            if let Some(follower) = self.followers.get_mut(node) {
                if follower.degraded.take().is_some() {
                    self.events.push(Event::CaughtUp(node));
                }
            }
            self.forget_node(node);
        }
        if !up {
            self.lose_in_flight(node);
            self.forget_node(node);
            // Told apart now, from the generation this call was given: by the time the event
            // is reported the link may be up (the report reads it again).
            let why = if generation == 0 {
                Degraded::LinkNotUpYet
            } else {
                Degraded::LinkDown
            };
            self.degrade(node, why);
        }
        up
    }

    /// What was in flight toward `node` went with its connection: a record that held
    /// acknowledgements is kept back until the node acknowledges nothing more of it, that is
    /// until it leaves its database's sync set.
    fn lose_in_flight(&mut self, node: usize) {
        let Some(follower) = self.followers.get_mut(node) else {
            return;
        };
        let lost = std::mem::take(&mut follower.in_flight);
        follower.bytes = 0;
        if self.sets {
            for (seq, record) in lost {
                if let (true, Some(namespace)) = (record.holds, record.namespace) {
                    self.blocked.insert((seq, node), namespace);
                }
            }
        }
    }

    /// Record `seq` of `namespace` was not sent to `member`, a member of the database's sync
    /// set: it is kept back until `member` leaves the set.
    pub fn block(&mut self, seq: u64, member: usize, namespace: &Rc<str>) {
        if self.sync && self.sets {
            self.blocked.insert((seq, member), namespace.clone());
        }
    }

    /// Record `seq` of `namespace` waits until `node`, joining its sync set, is in it.
    pub fn wait_for_join(&mut self, seq: u64, node: usize, namespace: &Rc<str>) {
        if self.sync && self.sets {
            self.joins.insert((seq, node), namespace.clone());
        }
    }

    /// Records waiting for a join that `waits(namespace, node)` no longer says is under way
    /// (the node is in the set, or gave up joining) go on. Whether any did.
    pub fn release_joined(&mut self, waits: impl Fn(&str, usize) -> bool) -> bool {
        let before = self.joins.len();
        self.joins
            .retain(|(_, node), namespace| waits(namespace, *node));
        self.joins.len() != before
    }

    /// Whether records wait for a join.
    pub fn has_joins(&self) -> bool {
        !self.joins.is_empty()
    }

    /// The sync sets changed (or a change was given up): holds and blocked records for a
    /// node that `is_member(namespace, node)` no longer names end. Whether any did.
    pub fn release_excluded(&mut self, is_member: impl Fn(&str, usize) -> bool) -> bool {
        let mut released = false;
        for (node, follower) in self.followers.iter_mut().enumerate() {
            for record in follower.in_flight.values_mut() {
                if record.holds
                    && !record
                        .namespace
                        .as_ref()
                        .is_some_and(|namespace| is_member(namespace, node))
                {
                    record.holds = false;
                    released = true;
                }
            }
        }
        let before = self.blocked.len();
        self.blocked
            .retain(|(_, member), namespace| is_member(namespace, *member));
        released || self.blocked.len() != before
    }

    /// The databases with records that hold acknowledgements or are kept back.
    pub fn held_databases(&self) -> Vec<Rc<str>> {
        let mut names: Vec<Rc<str>> = self.held().cloned().collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// Whether records of `namespace` hold acknowledgements here (`held_databases`).
    pub fn holds(&self, namespace: &str) -> bool {
        self.held().any(|held| **held == *namespace)
    }

    /// The database of every record that holds acknowledgements or is kept back (repeats).
    fn held(&self) -> impl Iterator<Item = &Rc<str>> {
        self.followers
            .iter()
            .flat_map(|follower| follower.in_flight.values())
            .filter(|record| record.holds)
            .filter_map(|record| record.namespace.as_ref())
            .chain(self.blocked.values())
            .chain(self.joins.values())
    }

    /// Gives up every hold of `namespace` (this node may no longer acknowledge its writes):
    /// the sequence numbers whose acknowledgements must never be sent.
    pub fn abandon(&mut self, namespace: &str) -> Vec<u64> {
        let mut seqs = Vec::new();
        for follower in &mut self.followers {
            for (seq, record) in &mut follower.in_flight {
                if record.holds && record.namespace.as_deref() == Some(namespace) {
                    record.holds = false;
                    seqs.push(*seq);
                }
            }
        }
        for held in [&mut self.blocked, &mut self.joins] {
            held.retain(|(seq, _), held| {
                let keep = &**held != namespace;
                if !keep {
                    seqs.push(*seq);
                }
                keep
            });
        }
        seqs.sort_unstable();
        seqs.dedup();
        seqs
    }

    /// Whether `node` holds the current copy of `namespace` and keeps up: records of it may
    /// hold for it. A member with a record of it kept back does not keep up, whatever its
    /// link says now: that record never reaches it (it went with a connection, or was never
    /// sent), so only its leaving the set releases it, and it joins again once caught up.
    /// A link whose connection was replaced between two looks of the shard never reads as
    /// down, so this, not the link's state, is what takes such a member out.
    pub fn healthy(&self, node: usize, namespace: &str) -> bool {
        self.has_copy(node, namespace)
            && self
                .followers
                .get(node)
                .is_some_and(|follower| follower.degraded.is_none())
            && !self
                .blocked
                .iter()
                .any(|((_, member), held)| *member == node && **held == *namespace)
    }

    /// A full copy of `namespace` goes to `node`: its records follow as they are.
    pub fn copied(&mut self, node: usize, namespace: &str) {
        if node < self.followers.len() {
            self.copies.insert(namespace.to_owned(), node);
        }
    }

    /// `namespace` could not be shipped to `node`: its next record tries a copy again.
    pub fn forget(&mut self, node: usize, namespace: &str) {
        if self.has_copy(node, namespace) {
            self.copies.remove(namespace);
        }
    }

    /// Records were shipped to `node` as `seq`, `bytes` long, at `now_ms`. `holds`: whether
    /// acknowledgements wait for it (a write's record to a member of its sync set, or to the
    /// follower without sets; not an eager copy). `namespace`: the database of a record.
    pub fn shipped(
        &mut self,
        node: usize,
        seq: u64,
        bytes: u64,
        now_ms: u64,
        holds: bool,
        namespace: Option<&Rc<str>>,
    ) {
        let (sync, sets) = (self.sync, self.sets);
        let Some(follower) = self.followers.get_mut(node) else {
            return;
        };
        let holds = holds && sync && (sets || follower.degraded.is_none());
        follower.bytes += bytes;
        follower.in_flight.insert(
            seq,
            InFlight {
                bytes,
                shipped_ms: now_ms,
                holds,
                namespace: namespace.cloned(),
            },
        );
    }

    /// `node` has these records on its disk.
    pub fn acknowledged(&mut self, node: usize, seqs: &[u64]) {
        let Some(follower) = self.followers.get_mut(node) else {
            return;
        };
        for seq in seqs {
            if let Some(record) = follower.in_flight.remove(seq) {
                follower.bytes -= record.bytes;
            }
        }
        if follower.in_flight.is_empty()
            && follower
                .degraded
                .is_some_and(|why| !matches!(why, Degraded::LinkDown | Degraded::LinkNotUpYet))
        {
            follower.degraded = None;
            self.events.push(Event::CaughtUp(node));
        }
    }

    /// Stops waiting for followers whose oldest waiting record is older than the timeout.
    pub fn check_timeouts(&mut self, now_ms: u64) {
        for node in 0..self.followers.len() {
            let late = self.followers[node]
                .in_flight
                .values()
                .find(|record| record.holds)
                .is_some_and(|record| now_ms.saturating_sub(record.shipped_ms) > ACK_TIMEOUT_MS);
            if late {
                self.degrade(node, Degraded::AckTimeout);
            }
        }
    }

    /// The highest position acknowledgements may be released up to, given the local durable
    /// position.
    pub fn position(&self, local_durable: u64) -> u64 {
        let mut position = local_durable;
        for held in [&self.blocked, &self.joins] {
            if let Some(((seq, _), _)) = held.first_key_value() {
                position = position.min(seq - 1);
            }
        }
        for follower in &self.followers {
            if let Some((seq, _)) = follower.in_flight.iter().find(|(_, record)| record.holds) {
                position = position.min(seq - 1);
            }
        }
        position
    }

    /// Records and bytes in flight toward `node`, and whether the shard waits for it.
    pub fn lag(&self, node: usize) -> (u64, u64, bool) {
        self.followers.get(node).map_or((0, 0, false), |follower| {
            (
                follower.in_flight.len() as u64,
                follower.bytes,
                follower.degraded.is_some(),
            )
        })
    }

    /// The changes to log and count since the last call.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    fn degrade(&mut self, node: usize, why: Degraded) {
        let sets = self.sets;
        let Some(follower) = self.followers.get_mut(node) else {
            return;
        };
        if !sets {
            for record in follower.in_flight.values_mut() {
                record.holds = false;
            }
        }
        if follower.degraded.is_none() {
            follower.degraded = Some(why);
            self.events.push(Event::Degraded(node, why));
        }
    }
}

#[cfg(test)]
#[path = "shipper_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "shipper_set_tests.rs"]
mod set_tests;
