//! Keeping each database's sync set in etcd true (decision 58), the owner's side: a
//! database's set names the nodes that hold every write of it acknowledged so far, and only
//! they may claim it next (`hearth_cluster`'s claim checks it). The replication tick:
//!
//! - **reconciles** each database this shard owns by its own claim: its set should be this
//!   node and its follower, when the follower keeps up (it holds the current copy, its link
//!   is up and it is not given up). A follower that is not a member yet is added once it has
//!   acknowledged every record of the database; from the moment that is asked, the
//!   database's records hold for it as for a member. A member that falls behind, loses its
//!   link or stops being the follower is taken out, in a transaction that holds only while
//!   this node's claim does: only then are the writes it lacks acknowledged without it;
//! - **releases** the holds the sets no longer justify once etcd's answer is in the view;
//! - **gives up** the holds of a database this node may no longer acknowledge (the fence
//!   refuses its writes: the lease is not confirmed, or the claim is another node's): those
//!   writes are never acknowledged. Their clients are told they may or may not have been
//!   applied, what shows them is dropped, the database goes back to its state before them
//!   (logged and copied to the follower), and its sessions close once the rest has left;
//! - **closes the sessions stranded** on a database this node no longer serves.

use std::rc::Rc;
use std::sync::atomic::Ordering;

use hearth_cluster::{MemberChange, Placement};
use hearth_store::RecordRef;
use rustc_hash::FxHashMap;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tracing::{info, warn};

use crate::outbound::ConnHandle;
use crate::replication::shipper::Shipper;
use crate::replication::Replication;
use crate::state::Owner;
use hearth_ground::close::{CloseReason, OWNER_MOVED_CLOSE};

/// Why a session of a database whose held writes were given up is closed.
pub const GIVEN_UP_CLOSE: &str = "this node lost its claim on the database before its writes \
     reached a copy that may take over; writes not acknowledged may or may not have been \
     applied, and the SDK sends them again to the next owner";

/// The most sync-set changes asked of etcd in one tick.
const CHANGES_PER_TICK: usize = 256;

/// What the tick keeps between its turns.
#[derive(Default)]
pub struct SetState {
    /// Sessions to close once their replies have left (held writes given up).
    closing: Vec<(Rc<ConnHandle>, u64)>,
}

/// One turn: reconcile, release, give up, close.
pub fn tick(owner: &Rc<Owner>, replication: &Replication, state: &mut SetState) {
    if replication.nodes.sync_placement().is_none() {
        close_stranded(owner, &mut state.closing);
        return;
    }
    // Every tick, not only when etcd's sets change: a follower that stops joining (it fell
    // behind, or its link went down) releases what waited for it without any change there.
    let released = replication
        .shipper
        .borrow_mut()
        .release_excluded(|namespace, node| replication.is_member(namespace, node));
    if released {
        super::release(owner);
    }
    reconcile(owner, replication);
    let joined = {
        let mut shipper = replication.shipper.borrow_mut();
        shipper.has_joins()
            && shipper
                .release_joined(|namespace, node| replication.entering(namespace).contains(&node))
    };
    if joined {
        super::release(owner);
    }
    give_up(owner, replication, &mut state.closing);
    close_stranded(owner, &mut state.closing);
}

/// Asks etcd for the sets that differ from what this shard's databases should have.
fn reconcile(owner: &Rc<Owner>, replication: &Replication) {
    let nodes = &replication.nodes;
    let Some(placement) = nodes.sync_placement() else {
        return;
    };
    let (changes, adding) = differing_sets(owner, replication, placement);
    if changes.is_empty() {
        return;
    }
    {
        let mut pending = replication.pending_sets.borrow_mut();
        let mut joining = replication.joining.borrow_mut();
        for (namespace, added) in adding {
            joining.remove(&namespace);
            pending.insert(namespace, added);
        }
    }
    let names: Vec<String> = changes.iter().map(|c| c.namespace.clone()).collect();
    let answer = placement.set_members(changes);
    let owner = owner.clone();
    tokio::task::spawn_local(async move {
        let result = answer
            .await
            .unwrap_or_else(|_| Err("the cluster thread has stopped".to_owned()));
        if let Err(why) = result {
            warn!(
                why,
                databases = names.len(),
                "changing sync sets in etcd; tried again"
            );
        }
        if let Some(replication) = owner.replication() {
            let mut pending = replication.pending_sets.borrow_mut();
            for name in &names {
                pending.remove(name.as_str());
            }
        }
    });
}

/// A database whose set changes, and the followers the change adds.
type Added = (Rc<str>, Vec<usize>);

/// The changes of the sets that differ from what this shard's databases, claimed by this
/// node, should have (at most [`CHANGES_PER_TICK`]), each with the followers it adds.
fn differing_sets(
    owner: &Owner,
    replication: &Replication,
    placement: &Placement,
) -> (Vec<MemberChange>, Vec<Added>) {
    let nodes = &replication.nodes;
    let view = placement.view();
    let me = placement.node_id();
    let mut changes = Vec::new();
    let mut adding = Vec::new();
    let pending = replication.pending_sets.borrow();
    let mut joining = replication.joining.borrow_mut();
    // A database this node no longer holds has no follower joining it here.
    joining.retain(|namespace, _| {
        view.claims
            .get(&**namespace)
            .is_some_and(|claim| *claim.node_id == *me)
    });
    let databases = owner.databases();
    let shipper = replication.shipper.borrow();
    for (namespace, claim) in &view.claims {
        if *claim.node_id != *me
            || pending.contains_key(namespace.as_str())
            || !owner.owns(namespace)
        {
            continue;
        }
        let current = view.sync.get(namespace);
        let last = databases.get(namespace).map_or(0, |loaded| loaded.seq());
        let keeps_up = |node: usize| nodes.link_state(node).1 && shipper.healthy(node, namespace);
        let is_member = |node: usize| current.is_some_and(|set| set.has(&nodes.id(node)));
        let follower = nodes
            .follower_node(namespace)
            .filter(|node| keeps_up(*node));
        let joined = joined(&shipper, &mut joining, namespace, follower, is_member, last);
        let mut members = vec![me.to_owned()];
        members.extend(joined.map(|node| nodes.id(node).to_string()));
        let same = current.is_some_and(|set| {
            set.members.len() == members.len() && members.iter().all(|member| set.has(member))
        });
        if same {
            continue;
        }
        let added: Vec<usize> = joined
            .filter(|node| !is_member(*node))
            .into_iter()
            .collect();
        adding.push((Rc::<str>::from(namespace.as_str()), added));
        changes.push(MemberChange {
            namespace: namespace.clone(),
            epoch: claim.epoch,
            members,
        });
        if changes.len() == CHANGES_PER_TICK {
            break;
        }
    }
    (changes, adding)
}

/// The follower that belongs in the set of `namespace` with this node now, if any: a member
/// already, or a newcomer (`joining` says since when) that has acknowledged every record
/// before it started joining. A follower that does not keep up does not join.
fn joined(
    shipper: &Shipper,
    joining: &mut FxHashMap<Rc<str>, (usize, u64)>,
    namespace: &str,
    follower: Option<usize>,
    is_member: impl Fn(usize) -> bool,
    last: u64,
) -> Option<usize> {
    // A newcomer joins in two steps: the records from now on hold for it, and once it has
    // acknowledged everything before them, it is asked into the set.
    match (follower, joining.get(namespace).copied()) {
        (Some(node), _) if is_member(node) => {
            joining.remove(namespace);
            Some(node)
        }
        (Some(node), Some((candidate, since))) if candidate == node => {
            shipper.caught_up(node, namespace, since).then_some(node)
        }
        (Some(node), _) => {
            joining.insert(Rc::from(namespace), (node, last));
            shipper.caught_up(node, namespace, last).then_some(node)
        }
        (None, _) => {
            // The follower does not keep up: it does not join (the records that waited for
            // it go on, `tick`).
            joining.remove(namespace);
            None
        }
    }
}

/// Gives up the holds of databases whose writes this node may no longer acknowledge.
fn give_up(owner: &Rc<Owner>, replication: &Replication, closing: &mut Vec<(Rc<ConnHandle>, u64)>) {
    let Some(placement) = replication.nodes.sync_placement() else {
        return;
    };
    let held = replication.shipper.borrow().held_databases();
    let mut given_up = false;
    for namespace in held {
        let Some(refusal) = placement.write_refusal(&namespace) else {
            continue;
        };
        let seqs = replication.shipper.borrow_mut().abandon(&namespace);
        let Some(&first) = seqs.first() else {
            continue;
        };
        given_up = true;
        owner.gate().abandon(&seqs, hearth_net::time::now_ms());
        let replaced = replication.replaced.borrow_mut().remove(&namespace);
        match replaced {
            // A newer owner's copy already replaced them (and this node's copy with them was
            // kept, `divergent`): only what they would pass on is forgotten.
            Some(copy_starts) => {
                if let Some(store) = owner.store() {
                    store.forget_range(&namespace, first, copy_starts);
                }
                info!(
                    namespace = &*namespace,
                    "the writes given up were already replaced by the new owner's copy, which stays"
                );
            }
            None => roll_back(owner, replication, &namespace, first),
        }
        hearth_ground::replica_messages::WRITES_GIVEN_UP
            .fetch_add(seqs.len() as u64, Ordering::Relaxed);
        warn!(
            namespace = &*namespace,
            writes = seqs.len(),
            why = refusal,
            "writes given up: they reached no copy that may take the database over before \
             this node lost the right to acknowledge them; their clients are told they may or \
             may not have been applied, and the database goes back to its state before them"
        );
        for session in owner.all_sessions() {
            if *session.namespace == *namespace {
                session.give_up_from(first);
                closing.push((session, hearth_net::time::now_ms()));
            }
        }
        for stream in owner.all_streams() {
            if *stream.namespace == *namespace {
                stream.discard_from(first);
                stream.close();
            }
        }
    }
    if given_up {
        super::release(owner);
    }
}

/// Takes `namespace` back to its state before its writes from `first` on, which were given
/// up, so that no read sees them here, and so do the log and the follower: the state
/// without them is logged as one record (recovery replays it after them) and shipped to the
/// follower as a full copy, which holds no acknowledgement. A follower that did store them
/// and took the database over keeps them, and its copy replaces this one (`divergent`).
fn roll_back(owner: &Owner, replication: &Replication, namespace: &str, first: u64) {
    let Some(store) = owner.store() else {
        return;
    };
    store.forget_from(namespace, first);
    let now = hearth_net::time::now_ms();
    let rolled_back = owner.with_loaded(namespace, |loaded| {
        super::divergent::keep_given_up(&owner.config().data_dir, loaded);
        let rules = loaded.roll_back(first.saturating_sub(1));
        owner.apply_rules(loaded, rules, now);
        let tree = crate::replication::whole_tree(loaded);
        loaded.log_to(store, RecordRef::Write(&tree))?;
        let epoch = loaded
            .epoch()
            .unwrap_or_else(|| store.logged_epoch(namespace));
        let nodes = &replication.nodes;
        if let Some(node) = nodes.follower_node(namespace) {
            replication.shipper.borrow_mut().forget(node, namespace);
        }
        let events = |database: &str, room: u64| owner.copy_events(database, room);
        replication.copy(loaded, epoch, &events);
        Ok::<(), hearth_store::StoreError>(())
    });
    if let Some(Err(error)) = rolled_back {
        crate::durability::report_failure(owner, error.to_string());
    }
}

/// The longest a session whose writes were given up waits for its other replies to leave
/// before it is closed anyway.
const CLOSE_AFTER_MS: u64 = 2_000;

/// Closes the sessions waiting for it, and those of databases this node no longer serves:
/// a client must not stay on a node that refuses its writes for good.
fn close_stranded(owner: &Owner, closing: &mut Vec<(Rc<ConnHandle>, u64)>) {
    let now = hearth_net::time::now_ms();
    closing.retain(|(session, since)| {
        let done = session.replies_sent() || now.saturating_sub(*since) > CLOSE_AFTER_MS;
        if done {
            session.close(CloseReason::new(CloseCode::Again, GIVEN_UP_CLOSE));
        }
        !done
    });
    let Some(nodes) = owner.replication().map(|replication| &replication.nodes) else {
        return;
    };
    let lease_gone = owner
        .config()
        .cluster
        .as_ref()
        .is_some_and(|placement| placement.lease_expired());
    // Per database: whether its sessions must go (decided once per tick).
    let mut stranded: FxHashMap<String, bool> = FxHashMap::default();
    let mut closed = 0usize;
    for session in owner.all_sessions() {
        if session.is_closing() {
            continue;
        }
        let namespace = &session.namespace;
        let strand = session.reads_refused()
            || *stranded.entry(namespace.clone()).or_insert_with(|| {
                lease_gone
                    || !nodes.owns(namespace)
                    || owner
                        .config()
                        .cluster
                        .as_ref()
                        .is_some_and(|placement| placement.read_refusal(namespace).is_some())
            });
        // Its replies leave first: a write acknowledged but not yet told would otherwise be
        // sent again by the SDK, and refused where it reconnects.
        if strand && session.replies_sent() {
            session.close(CloseReason::new(CloseCode::Again, OWNER_MOVED_CLOSE));
            closed += 1;
        }
    }
    if closed > 0 {
        info!(
            shard = owner.index(),
            sessions = closed,
            lease_gone,
            "sessions of databases this node no longer serves closed: their clients reconnect \
             to the owner"
        );
    }
}
