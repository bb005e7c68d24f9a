//! Log shipping to a follower node (`--replication`, docs/cluster-link.md "Replication").
//!
//! The owner of a database ships each of its log records, in order, over the node link to the
//! database's follower (the runner-up of the placement, `Placement::follower_node`), which
//! applies it to its own copy of the database and appends it to its own log (its own owner,
//! its own group commit), and acknowledges the owner's sequence number once that is synced.
//! Under `--replication sync` the owner's gate then releases a message only up to
//! [`Shipper::position`]: the local durable position, and for each follower with records in
//! flight, the record before its first unacknowledged one. The first record of a database
//! over a connection of the link, and the first to a node that became its follower, is a full
//! copy (its rules and its whole tree), so a follower that joins late, restarts or lost the
//! link is caught up by the next write; and when a link comes up or the placement changes,
//! the tick copies every database the node should follow and lacks, evicted ones included.
//!
//! - `replication`: what a shard holds (`Shard::replication`) and the shipping of a record;
//! - `shipper`: the owner's decisions, pure; `pending`: the follower's acknowledgements;
//! - `catch_up`: copies without a write; `hand_over`: moving one database to its follower;
//! - `follower`: applying what arrives; this file: the link's messages and the tick.

mod catch_up;
mod divergent;
mod follower;
mod hand_over;
mod sync_set;

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tracing::{info, warn};

use crate::replication::shipper::{Degraded, Event};
use crate::replication::Replication;
use crate::state::Owner;
use hearth_ground::replica_messages::{ReplicaIn, ReplicationMode, Shipped};
use hearth_net::time::now_ms;

/// How often a shard looks at its links, its followers' timeouts and its lag.
const TICK: Duration = Duration::from_millis(100);

/// What the link brought for replication.
pub fn on_message(owner: &Owner, message: ReplicaIn) {
    let Some(replication) = owner.replication() else {
        return;
    };
    match message {
        ReplicaIn::Records { from, shipped } => {
            let Shipped {
                shard: origin,
                seq,
                namespace,
                reset,
                records,
            } = shipped;
            if replication.nodes.owns(&namespace) {
                // This node took the database over (etcd failover): what its old owner
                // still sends was written after the last record this node acknowledged, under
                // an epoch that is gone, and must not land on the new owner's writes.
                warn!(
                    namespace,
                    owner = &*replication.nodes.id(from),
                    "replicated records for a database this node owns are dropped"
                );
                return;
            }
            // A newer owner's copy over writes this node still holds as an old owner (it
            // was paused or cut off, and has not given them up yet): noted, so that giving
            // them up does not take the database back to its state before them.
            let held_here = reset && replication.shipper.borrow().holds(&namespace);
            let copy_starts = owner.store().map_or(0, |store| store.last_seq() + 1);
            let appended = follower::apply(owner, &namespace, &records, reset);
            if held_here && appended.is_some() {
                replication
                    .replaced
                    .borrow_mut()
                    .insert(std::rc::Rc::from(namespace.as_str()), copy_starts);
            }
            match appended {
                Some(local) => {
                    replication
                        .pending
                        .borrow_mut()
                        .push(local, from, origin, seq);
                    if owner.store().is_none() {
                        // Nothing is ever on disk here (`--durability none`).
                        replication.on_durable(u64::MAX);
                    }
                }
                None => warn!(
                    namespace,
                    owner = &*replication.nodes.id(from),
                    "replicated records could not be applied; not acknowledged"
                ),
            }
        }
        ReplicaIn::Ack { from, seqs } => {
            let before = replication.shipper.borrow().position(u64::MAX);
            replication.shipper.borrow_mut().acknowledged(from, &seqs);
            if replication.shipper.borrow().position(u64::MAX) != before {
                release(owner);
            }
        }
    }
}

/// Moves the gate to what the followers' acknowledgements now allow.
fn release(owner: &Owner) {
    let Some(store) = owner.store() else {
        return;
    };
    let durable = store.synced_seq();
    crate::durability::on_durable(owner, durable);
}

/// Runs until the shard's runtime stops: follows the links' state, stops waiting for
/// followers that are lost or too slow, keeps the lag in `/metrics`, copies what followers
/// lack and starts the moves asked for (under `--replication off`, only the last, which
/// are refused).
pub async fn run(owner: Rc<Owner>) {
    let Some(replication) = owner.replication() else {
        return;
    };
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The placement last caught up with, and whether copies are left for the next tick.
    let mut placement = None;
    let mut copies_left = false;
    let mut sets = sync_set::SetState::default();
    loop {
        tick.tick().await;
        let nodes = &replication.nodes;
        if nodes.replication() == ReplicationMode::Off {
            // Nothing is shipped; a move asked for is refused with the reason in the log.
            let version = nodes.placement_version();
            if placement != Some(version) {
                placement = Some(version);
                hand_over::check(&owner, replication);
            }
            sync_set::tick(&owner, replication, &mut sets);
            continue;
        }
        let before = replication.shipper.borrow().position(u64::MAX);
        {
            let mut shipper = replication.shipper.borrow_mut();
            // Only nodes seen so far: an index nobody has is no follower lost.
            for node in 0..nodes.known() {
                if node != nodes.me() {
                    shipper.follow_link(node, nodes.link_state(node));
                }
            }
            shipper.check_timeouts(now_ms());
        }
        let links_changed = replication.links_changed();
        let version = nodes.placement_version();
        if links_changed || placement != Some(version) || copies_left {
            placement = Some(version);
            copies_left = !catch_up::run(&owner, replication);
            hand_over::check(&owner, replication);
        }
        sync_set::tick(&owner, replication, &mut sets);
        report(&owner, replication);
        if replication.shipper.borrow().position(u64::MAX) != before {
            release(&owner);
        }
    }
}

/// Adds the lag's changes to the node-wide counters, then logs what changed: a line that says
/// the follower resumed comes after the catch-up copies it queued are in the lag.
fn report(owner: &Owner, replication: &Replication) {
    let nodes = &replication.nodes;
    count_lag(replication);
    let events = replication.shipper.borrow_mut().take_events();
    for event in events {
        match event {
            Event::Degraded(node, why) => {
                nodes.lag(node).degradations.fetch_add(1, Ordering::Relaxed);
                if why == Degraded::LinkNotUpYet {
                    // The link to this follower was never up: the nodes are starting, which is
                    // no fault of the operator's (the link's own log says when a peer stays
                    // unreachable).
                    info!(
                        shard = owner.index(),
                        follower = &*nodes.id(node),
                        "replication to the follower starts once the link to it is up"
                    );
                } else if nodes.sync_placement().is_some() {
                    warn!(
                        shard = owner.index(),
                        follower = &*nodes.id(node),
                        reason = why.reason(),
                        "replication degraded: the follower leaves the sync sets of this shard's databases, then writes are acknowledged without it until it has caught up"
                    );
                } else {
                    warn!(
                        shard = owner.index(),
                        follower = &*nodes.id(node),
                        reason = why.reason(),
                        "replication degraded: writes are acknowledged without the follower until it has caught up"
                    );
                }
            }
            Event::CaughtUp(node) => info!(
                shard = owner.index(),
                follower = &*nodes.id(node),
                "replication to the follower resumed"
            ),
        }
    }
}

/// Adds what the shard's lag toward each follower changed by to the node-wide counters.
fn count_lag(replication: &Replication) {
    let nodes = &replication.nodes;
    let shipper = replication.shipper.borrow();
    let mut reported = replication.reported.borrow_mut();
    for (node, last) in reported.iter_mut().enumerate() {
        let now = shipper.lag(node);
        if now == *last {
            continue;
        }
        let lag = nodes.lag(node);
        lag.records
            .fetch_add(now.0.wrapping_sub(last.0), Ordering::Relaxed);
        lag.bytes
            .fetch_add(now.1.wrapping_sub(last.1), Ordering::Relaxed);
        lag.degraded.fetch_add(
            u64::from(now.2).wrapping_sub(u64::from(last.2)),
            Ordering::Relaxed,
        );
        *last = now;
    }
}
