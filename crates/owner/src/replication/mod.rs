//! What a shard holds of replication (`Owner::replication`): as an owner, the state toward its
//! databases' followers and the shipping of each record (`shipper`); as a follower, the
//! records waiting for its own log (`pending`). Below the owner, which logs through it, and
//! below `replica`, the tasks that act on it: it takes only the database a record is for.

pub mod pending;
pub mod shipper;

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use hearth_store::{encode_record, RecordRef};
use hearth_sync::{Change, Write, WriteOp};
use hearth_tree::Path;
use tracing::warn;

use crate::loaded::Loaded;
use hearth_ground::replica_messages::{ReplicaOut, ReplicationMode, Shipped, ToFollower};
use hearth_net::time::now_ms;
use hearth_peer::Nodes;
use pending::Pending;
use shipper::{Ship, Shipper};

/// The most bytes of records one message carries: a full copy larger than this is not
/// shipped (the follower keeps no copy of that database; logged).
pub const MAX_SHIPPED_BYTES: usize = hearth_peer::codec::MAX_FRAME_BYTES - 64 * 1024;

/// What a full copy of a database carries besides its tree and settings: the record texts of
/// its trigger events that its follower must keep for a failover (`Owner::copy_events`),
/// given the database and the bytes left in the copy's message.
pub type CopyEvents<'a> = &'a dyn Fn(&str, u64) -> Vec<String>;

/// A shard's replication: as an owner toward its databases' followers, and as a follower of
/// other nodes' databases.
pub struct Replication {
    pub nodes: Arc<Nodes>,
    pub shipper: RefCell<Shipper>,
    pub pending: RefCell<Pending>,
    /// The lag last added to the node-wide counters, per node, to add only changes.
    pub reported: RefCell<Vec<(u64, u64, bool)>>,
    /// The shard's index, which the owner's sequence numbers belong to.
    shard: u32,
    /// Per node: the last link generation `links_changed` saw up.
    copied: RefCell<Vec<u64>>,
    /// The label of the next copy made by a catch-up, counting down from the top so that it
    /// never meets a record's sequence number.
    next_copy: std::cell::Cell<u64>,
    /// The moves asked for (`hearth cluster move`) that this shard started, by database and
    /// epoch: each is tried once.
    moves_tried: RefCell<rustc_hash::FxHashSet<(String, u64)>>,
    /// Sync-set changes asked of etcd and not answered yet, by database: the members asked
    /// for (node indexes, this node left out). Records of the database hold for them as for
    /// members already, so that a node being added has every write acknowledged after it.
    pub pending_sets: RefCell<rustc_hash::FxHashMap<Rc<str>, Vec<usize>>>,
    /// Followers on their way into a database's sync set, by database: the node and the
    /// shard's sequence number when it started. Records after it hold for the node; once it
    /// has acknowledged everything up to it, it is asked into the set (`sync_set`).
    pub joining: RefCell<rustc_hash::FxHashMap<Rc<str>, (usize, u64)>>,
    /// Databases whose copy here a newer owner's full copy replaced while this node still
    /// held writes of its own to them, with the local position where that copy starts: when
    /// those writes are given up (`sync_set`), the database must not go back to its state
    /// before them, which would undo the new owner's copy and its acknowledged writes.
    pub replaced: RefCell<rustc_hash::FxHashMap<Rc<str>, u64>>,
}

impl Replication {
    pub fn new(nodes: &Arc<Nodes>, shard: usize) -> Replication {
        let count = nodes.count();
        let mut shipper = Shipper::new(nodes.replication() == ReplicationMode::Sync, count);
        if nodes.sync_placement().is_some() {
            shipper = shipper.with_sets();
        }
        Replication {
            nodes: nodes.clone(),
            shipper: RefCell::new(shipper),
            pending: RefCell::new(Pending::default()),
            reported: RefCell::new(vec![(0, 0, false); count]),
            shard: shard as u32,
            copied: RefCell::new(vec![0; count]),
            next_copy: std::cell::Cell::new(u64::MAX),
            moves_tried: RefCell::default(),
            pending_sets: RefCell::default(),
            joining: RefCell::default(),
            replaced: RefCell::default(),
        }
    }

    /// The nodes a record of `namespace` must reach before it is acknowledged, this node left
    /// out: the members of its sync set and those being added; `None` without sync sets.
    /// A database without a set (claimed before sets, or by a node without them) is `None`
    /// too: its follower holds as without sets, until the owner writes one.
    pub fn members(&self, namespace: &str) -> Option<Vec<usize>> {
        let mut members = self.nodes.sync_members(namespace)?;
        if let Some(adding) = self.pending_sets.borrow().get(namespace) {
            members.extend(adding.iter().copied());
        }
        if let Some((node, _)) = self.joining.borrow().get(namespace) {
            members.push(*node);
        }
        members.sort_unstable();
        members.dedup();
        Some(members)
    }

    /// Whether a record of `namespace` must reach `node` before it is acknowledged: `node`
    /// is (or is being made) a member of its sync set, or the database has none yet.
    pub fn is_member(&self, namespace: &str, node: usize) -> bool {
        self.members(namespace)
            .is_none_or(|members| members.contains(&node))
    }

    /// Ships the record `seq` just appended for `loaded` (its engine already applied it) to
    /// the database's follower, when this node owns it and replication is on.
    /// `epoch`: the fencing epoch the record was logged under, which it carries.
    /// `events`: what a full copy carries, when the record's connection needs one first.
    pub fn ship(
        &self,
        loaded: &Loaded,
        seq: u64,
        epoch: u64,
        body: RecordRef<'_>,
        events: CopyEvents<'_>,
    ) {
        self.send(loaded, epoch, Some((seq, body)), events);
    }

    /// Whether a link came up under a generation not seen yet since the last call: its
    /// node holds no current copy of anything (`replica::catch_up`).
    pub fn links_changed(&self) -> bool {
        let mut copied = self.copied.borrow_mut();
        let mut changed = false;
        for (node, done) in copied.iter_mut().enumerate() {
            let (generation, up) = self.nodes.link_state(node);
            if up && generation != *done && node != self.nodes.me() {
                *done = generation;
                changed = true;
            }
        }
        changed
    }

    /// The follower `namespace` should have a copy on and has not: this node owns it (by its
    /// own claim), replication is on, the follower's link is up and no copy went to it over
    /// this connection since it became the follower.
    pub fn lacks_copy(&self, namespace: &str) -> Option<usize> {
        let nodes = &self.nodes;
        if nodes.replication() == ReplicationMode::Off || !nodes.claimed_here(namespace) {
            return None;
        }
        let node = nodes.follower_node(namespace)?;
        let (_, up) = nodes.link_state(node);
        let shipper = self.shipper.borrow();
        (up && !shipper.has_copy(node, namespace)).then_some(node)
    }

    /// Bytes shipped to `node` and not acknowledged yet.
    pub fn in_flight_bytes(&self, node: usize) -> u64 {
        self.shipper.borrow().in_flight_bytes(node)
    }

    /// Whether follower `node` has `namespace` on its disk through record `seq`
    /// (`Shipper::caught_up`).
    pub fn caught_up(&self, node: usize, namespace: &str, seq: u64) -> bool {
        self.shipper.borrow().caught_up(node, namespace, seq)
    }

    /// Whether the move of `namespace` asked at `epoch` is new to this shard (it is noted).
    pub fn first_try(&self, namespace: &str, epoch: u64) -> bool {
        self.moves_tried
            .borrow_mut()
            .insert((namespace.to_owned(), epoch))
    }

    /// Copies `loaded` to its follower now, without a write, holding no acknowledgement to
    /// clients; the bytes shipped.
    pub fn copy(&self, loaded: &Loaded, epoch: u64, events: CopyEvents<'_>) -> u64 {
        self.send(loaded, epoch, None, events)
    }

    /// Ships `record` (or, without one, a copy that holds no acknowledgement); the bytes
    /// shipped.
    fn send(
        &self,
        loaded: &Loaded,
        epoch: u64,
        record: Option<(u64, RecordRef<'_>)>,
        events: CopyEvents<'_>,
    ) -> u64 {
        let nodes = &self.nodes;
        if nodes.replication() == ReplicationMode::Off || !nodes.owns(loaded.name()) {
            return 0;
        }
        // With sync sets, a write's record holds for every member; those it does not reach
        // keep it back until they leave the set (`Shipper::block`).
        let follower = nodes.follower_node(loaded.name());
        let members = match record {
            Some((seq, _)) => self.members_joining(loaded.name(), follower, seq),
            None => None,
        };
        let (bytes, reached) = match follower {
            Some(node) => self.send_to(node, loaded, epoch, record, members.as_deref(), events),
            None => (0, false),
        };
        if let (Some(members), Some((seq, _))) = (members, record) {
            let mut shipper = self.shipper.borrow_mut();
            for member in members {
                if !(reached && Some(member) == follower) {
                    shipper.block(seq, member, loaded.name());
                }
            }
            for node in self.entering(loaded.name()) {
                shipper.wait_for_join(seq, node, loaded.name());
            }
        }
        bytes
    }

    /// [`Replication::members`] for record `seq`, after starting the follower's way into
    /// the set when it is not in it: from this record on, records hold for it and wait for
    /// its entry (`sync_set`), so that the node that has an acknowledged write may also
    /// take the database over without waiting for a tick.
    fn members_joining(
        &self,
        namespace: &Rc<str>,
        follower: Option<usize>,
        seq: u64,
    ) -> Option<Vec<usize>> {
        let mut members = self.members(namespace)?;
        // Only a follower that keeps up: one that lags joins once it has caught up.
        let keeps_up = |node: &usize| {
            self.nodes.link_state(*node).1 && self.shipper.borrow().healthy(*node, namespace)
        };
        if let Some(node) = follower.filter(|node| !members.contains(node) && keeps_up(node)) {
            self.joining
                .borrow_mut()
                .insert(namespace.clone(), (node, seq.saturating_sub(1)));
            members.push(node);
        }
        Some(members)
    }

    /// The nodes on their way into `namespace`'s set and not in etcd's yet.
    pub fn entering(&self, namespace: &str) -> Vec<usize> {
        // Nothing is joining most of the time: no lookup of the set on every record then.
        if self.joining.borrow().is_empty() && self.pending_sets.borrow().is_empty() {
            return Vec::new();
        }
        let in_set = self.nodes.sync_members(namespace).unwrap_or_default();
        let mut nodes: Vec<usize> = self
            .joining
            .borrow()
            .get(namespace)
            .map(|(node, _)| *node)
            .into_iter()
            .chain(
                self.pending_sets
                    .borrow()
                    .get(namespace)
                    .into_iter()
                    .flatten()
                    .copied(),
            )
            .filter(|node| !in_set.contains(node))
            .collect();
        nodes.dedup();
        nodes
    }

    /// Ships to `node`; the bytes shipped, and whether the record went.
    fn send_to(
        &self,
        node: usize,
        loaded: &Loaded,
        epoch: u64,
        record: Option<(u64, RecordRef<'_>)>,
        members: Option<&[usize]>,
        events: CopyEvents<'_>,
    ) -> (u64, bool) {
        let nodes = &self.nodes;
        let link = nodes.link_state(node);
        let decision = match record {
            Some(_) => self.shipper.borrow_mut().prepare(node, link, loaded.name()),
            None if self.shipper.borrow_mut().follow_link(node, link) => Ship::Copy,
            None => Ship::Skip,
        };
        let (seq, holds) = match record {
            Some((seq, _)) => (seq, members.is_none_or(|members| members.contains(&node))),
            None => {
                let label = self.next_copy.get();
                self.next_copy.set(label - 1);
                (label, false)
            }
        };
        let (reset, records) = match (decision, record) {
            (Ship::Skip, _) => return (0, false),
            (Ship::Record, Some((_, body))) => (false, encode(seq, epoch, loaded.name(), body)),
            (Ship::Record, None) => return (0, false),
            (Ship::Copy, _) => {
                self.shipper.borrow_mut().copied(node, loaded.name());
                (true, encode_copy(seq, epoch, loaded, events))
            }
        };
        let Some(records) = records.filter(|records| records.len() <= MAX_SHIPPED_BYTES) else {
            warn!(
                namespace = %loaded.name(),
                follower = &*nodes.id(node),
                "a record or copy is too large to ship; the follower keeps no copy of this database"
            );
            self.shipper.borrow_mut().forget(node, loaded.name());
            return (0, false);
        };
        let bytes = records.len() as u64;
        nodes.send_replica(
            node,
            ReplicaOut::Records(ToFollower {
                shipped: Shipped {
                    shard: self.shard,
                    seq,
                    namespace: loaded.name().to_string(),
                    reset,
                    records,
                },
                generation: link.0,
            }),
        );
        if reset {
            nodes.lag(node).copies.fetch_add(1, Ordering::Relaxed);
        }
        let namespace = record.map(|_| loaded.name());
        self.shipper
            .borrow_mut()
            .shipped(node, seq, bytes, now_ms(), holds, namespace);
        (bytes, true)
    }

    /// The log is durable up to `durable` on this node: the records followed for other
    /// nodes up to there are acknowledged to them. Returns the position the gate may release
    /// up to.
    pub fn on_durable(&self, durable: u64) -> u64 {
        for (node, ack) in self.pending.borrow_mut().synced(durable) {
            self.nodes.send_replica(node, ReplicaOut::Ack(ack));
        }
        self.shipper.borrow().position(durable)
    }
}

fn encode(seq: u64, epoch: u64, namespace: &str, body: RecordRef<'_>) -> Option<Bytes> {
    let mut out = Vec::new();
    encode_record(&mut out, seq, 0, epoch, namespace, body).ok()?;
    Some(out.into())
}

/// The database's whole tree as one write at the root: a full copy's record, and the record
/// that logs a rollback (`sync_set`).
pub fn whole_tree(loaded: &Loaded) -> Write {
    Write {
        base: Path::root(),
        ops: vec![WriteOp {
            path: Path::root(),
            change: Change::Set(loaded.root().clone()),
        }],
    }
}

/// A full copy: the rules set through the API (if any) and the settings document (the
/// defaults if never set), then the whole tree as one write, then the trigger events the
/// follower keeps in place of its own (`events`, within what the message has room for).
fn encode_copy(seq: u64, epoch: u64, loaded: &Loaded, events: CopyEvents<'_>) -> Option<Bytes> {
    let mut out = Vec::new();
    // A database whose rules were never set through the API sends an empty text, the
    // server's default rules (no rules document is empty): a follower that holds rules of
    // its own (copied from an earlier owner) must not keep them.
    encode_record(
        &mut out,
        seq,
        0,
        epoch,
        loaded.name(),
        RecordRef::Rules(loaded.rules().unwrap_or("")),
    )
    .ok()?;
    // A database whose settings were never set sends the defaults: a follower that holds
    // settings of its own (copied from an earlier owner) must not keep them.
    let defaults;
    let settings = match loaded.settings_text() {
        Some(settings) => settings,
        None => {
            defaults = hearth_ground::settings::DatabaseSettings::default().to_json();
            &defaults
        }
    };
    encode_record(
        &mut out,
        seq,
        0,
        epoch,
        loaded.name(),
        RecordRef::Settings(settings),
    )
    .ok()?;
    let tree = whole_tree(loaded);
    encode_record(
        &mut out,
        seq,
        0,
        epoch,
        loaded.name(),
        RecordRef::Write(&tree),
    )
    .ok()?;
    let tree_end = out.len();
    let room = MAX_SHIPPED_BYTES.saturating_sub(tree_end) as u64;
    for text in events(loaded.name(), room) {
        encode_record(
            &mut out,
            seq,
            0,
            epoch,
            loaded.name(),
            RecordRef::Triggered(&text),
        )
        .ok()?;
    }
    if out.len() > MAX_SHIPPED_BYTES {
        // Events past the room (records longer than counted): the copy goes without them,
        // and its follower keeps its own.
        warn!(
            namespace = %loaded.name(),
            "a full copy with its trigger events is too large to ship; it goes without them"
        );
        out.truncate(tree_end);
    }
    Some(out.into())
}

#[cfg(test)]
mod copy_tests {
    use std::rc::Rc;

    use hearth_store::{decode_record, RecordBody};
    use hearth_sync::Database;

    use super::*;

    fn no_events(_: &str, _: u64) -> Vec<String> {
        Vec::new()
    }

    fn settings_of(copy: &[u8]) -> Vec<String> {
        texts_of(copy, |body| match body {
            RecordBody::Settings(text) => Some(text.to_string()),
            _ => None,
        })
    }

    fn rules_of(copy: &[u8]) -> Vec<String> {
        texts_of(copy, |body| match body {
            RecordBody::Rules(text) => Some(text.to_string()),
            _ => None,
        })
    }

    fn texts_of(mut copy: &[u8], text: impl Fn(RecordBody) -> Option<String>) -> Vec<String> {
        let mut texts = Vec::new();
        while !copy.is_empty() {
            let (record, size) = decode_record(copy).expect("a copy decodes");
            texts.extend(text(record.body));
            copy = &copy[size..];
        }
        texts
    }

    #[test]
    fn a_full_copy_always_carries_rules_an_empty_text_for_the_servers_default() {
        let mut loaded = Loaded::new(Rc::from("db"), Database::new(), 0, 0);
        let copy = encode_copy(1, 0, &loaded, &no_events).expect("encoded");
        assert_eq!(rules_of(&copy), [""]);
        loaded.set_rules(Some(Arc::from(r#"{"rules": {".read": true}}"#)));
        let copy = encode_copy(2, 0, &loaded, &no_events).expect("encoded");
        assert_eq!(rules_of(&copy), [r#"{"rules": {".read": true}}"#]);
    }

    #[test]
    fn a_full_copy_always_carries_settings_the_defaults_when_never_set() {
        let mut loaded = Loaded::new(Rc::from("db"), Database::new(), 0, 0);
        let copy = encode_copy(1, 0, &loaded, &no_events).expect("encoded");
        let defaults = hearth_ground::settings::DatabaseSettings::default().to_json();
        assert_eq!(settings_of(&copy), [defaults]);
        loaded.set_settings(Some(Arc::from(r#"{"strictTriggerValidation":false}"#)));
        let copy = encode_copy(2, 0, &loaded, &no_events).expect("encoded");
        assert_eq!(settings_of(&copy), [r#"{"strictTriggerValidation":false}"#]);
    }

    #[test]
    fn a_full_copy_carries_the_trigger_events_after_the_tree() {
        let loaded = Loaded::new(Rc::from("db"), Database::new(), 0, 0);
        let events = |database: &str, room: u64| {
            assert_eq!(database, "db");
            assert!(room > 1024 * 1024, "the room left in the message: {room}");
            vec!["items\n=\n".to_owned(), "items\n1.5.0\n{}".to_owned()]
        };
        let mut copy: &[u8] = &encode_copy(1, 0, &loaded, &events).expect("encoded");
        let mut kinds = Vec::new();
        while !copy.is_empty() {
            let (record, size) = decode_record(copy).expect("a copy decodes");
            kinds.push(match record.body {
                RecordBody::Triggered(text) => text.to_string(),
                RecordBody::Write(_) => "write".into(),
                RecordBody::Rules(_) => "rules".into(),
                RecordBody::Settings(_) => "settings".into(),
                other => format!("{other:?}"),
            });
            copy = &copy[size..];
        }
        assert_eq!(
            kinds,
            [
                "rules",
                "settings",
                "write",
                "items\n=\n",
                "items\n1.5.0\n{}"
            ]
        );
    }
}
