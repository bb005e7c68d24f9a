//! Moving one database to its follower while every node stays up (`hearth cluster move`,
//! docs/cluster.md "Moving one database"). The operator's request is a key in etcd that
//! names the claim's epoch and the follower; the shard that owns the database:
//!
//! 1. stops its writes: the fence refuses them ([`crate::cluster::fence::MOVING`]), the
//!    sessions other nodes hold stop being handled (`ConnHandle::stop_for_move`), the
//!    sessions of this node and the event streams close (their clients reconnect);
//! 2. waits until the replies to what those sessions sent have left, the database's last
//!    record is on this node's disk, and the follower has acknowledged it (a copy is shipped
//!    first if the follower lacks one), at most [`HAND_OVER_LIMIT`];
//! 3. tells the edges to move those sessions (`MoveCause::OwnerStopping`: nothing they still
//!    wait for was applied), and they wait for the next owner;
//! 4. hands its claim to the follower with the next epoch in one etcd transaction
//!    (`Placement::hand_over`); the follower's fence then lifts its copy's read-only, and the
//!    edges open their sessions there and send again what was unanswered.
//!
//! Failing before 4, everything is undone and the moved sessions close (their SDKs reconnect
//! and send their writes again); failing at 4, the edges' sessions close after their wait.

use std::rc::Rc;
use std::time::Duration;

use hearth_cluster::keys::MoveValue;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::replication::Replication;
use crate::state::Owner;
use hearth_ground::cross_core::MoveCause;
use hearth_ground::replica_messages::ReplicationMode;

/// The longest a database's writes stay stopped for a move before it is given up.
pub const HAND_OVER_LIMIT: Duration = Duration::from_secs(5);

/// How often the conditions of step 2 are looked at.
const POLL: Duration = Duration::from_millis(5);

/// Starts the moves asked for the databases this shard owns, each once (the replication
/// tick calls it).
pub fn check(owner: &Rc<Owner>, replication: &Replication) {
    let Some(placement) = owner.config().cluster.as_ref() else {
        return;
    };
    let view = placement.view();
    for (namespace, request) in &view.moves {
        let mine = view.claims.get(namespace).is_some_and(|claim| {
            *claim.node_id == *placement.node_id() && claim.epoch == request.epoch
        });
        if !mine || !owner.owns(namespace) || !replication.first_try(namespace, request.epoch) {
            continue;
        }
        let (owner, namespace, request) = (owner.clone(), namespace.clone(), request.clone());
        tokio::task::spawn_local(async move {
            match hand_over(&owner, &namespace, &request).await {
                Ok(epoch) => {
                    info!(namespace, to = %request.to, epoch, "database moved to its follower")
                }
                Err(why) => warn!(namespace, to = %request.to, why, "database not moved"),
            }
        });
    }
}

/// Steps 1 to 4 above; the new epoch, or why the database stays.
async fn hand_over(owner: &Owner, namespace: &str, request: &MoveValue) -> Result<u64, String> {
    let (Some(placement), Some(replication)) =
        (owner.config().cluster.as_ref(), owner.replication())
    else {
        return Err("this node is not in an etcd cluster".to_owned());
    };
    let nodes = &replication.nodes;
    if nodes.replication() == ReplicationMode::Off {
        return Err("--replication is off: no follower has its data".to_owned());
    }
    let follower = nodes
        .follower_node(namespace)
        .filter(|node| nodes.directory().id(*node).as_deref() == Some(request.to.as_str()))
        .ok_or_else(|| format!("its follower is not {} any more", request.to))?;
    let seq = owner
        .with_existing_database(namespace, |loaded| {
            loaded.begin_move(request.epoch);
            owner.fence(loaded);
            loaded.shared_seq()
        })
        .ok_or("the database is not on this node")?;
    let sessions = owner.all_sessions().into_iter();
    let moving = owner.stop_for_move(
        sessions.filter(|session| session.namespace == namespace),
        MoveCause::Moved.close_reason(),
    );
    for stream in owner.all_streams() {
        if stream.namespace == namespace {
            stream.close();
        }
    }
    let deadline = Instant::now() + HAND_OVER_LIMIT;
    let undo = |why: String| {
        for session in &moving {
            session.close(MoveCause::Moved.close_reason());
        }
        owner.with_loaded(namespace, |loaded| {
            loaded.end_move();
            owner.fence(loaded);
        });
        Err(why)
    };
    loop {
        let last = seq.get();
        let durable = owner
            .store()
            .is_none_or(|store| store.durable_seq() >= last);
        if replication.lacks_copy(namespace) == Some(follower) {
            if let Some(loaded) = owner.databases().get(namespace) {
                let events = |database: &str, room: u64| owner.copy_events(database, room);
                let epoch = loaded.epoch().unwrap_or(request.epoch);
                replication.copy(loaded, epoch, &events);
            }
        }
        let sent = moving.iter().all(|session| session.replies_sent());
        if durable && sent && replication.caught_up(follower, namespace, last) {
            break;
        }
        if Instant::now() >= deadline {
            return undo(format!(
                "the follower did not have every write within {} s",
                HAND_OVER_LIMIT.as_secs()
            ));
        }
        tokio::time::sleep(POLL).await;
    }
    for session in &moving {
        session.move_away();
    }
    let handed = tokio::time::timeout(
        HAND_OVER_LIMIT,
        placement.hand_over(namespace, request.epoch, &request.to),
    )
    .await;
    let result = match handed {
        Ok(Ok(Ok(epoch))) => Ok(epoch),
        Ok(Ok(Err(why))) => Err(why),
        Ok(Err(_)) => Err("the cluster thread has stopped".to_owned()),
        Err(_) => Err("etcd did not answer in time".to_owned()),
    };
    owner.with_loaded(namespace, |loaded| {
        if result.is_err() {
            loaded.end_move();
        }
        // Handed over: the claim in the view is the follower's, and the fence says so.
        owner.fence(loaded);
    });
    result
}
