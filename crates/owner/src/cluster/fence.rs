//! Fencing: in a cluster, a database accepts writes only while this node holds its claim
//! under a lease etcd confirmed recently (`Placement::write_refusal`). The check is made each
//! time a shard looks a database up for a request, and it turns the database read-only with
//! the reason (`unavailable` on the wire, 503 over REST) or writable again; the engine then
//! refuses writes exactly as after a disk failure (decision 23), reads go on.
//!
//! A database nobody holds yet that placement gives this node is not refused for long: the
//! request waits for the claim (`Placement::claim_settled`, at most [`CLAIM_WAIT_LIMIT`],
//! see `owner::dispatch::finish_deferred`), and the fence is applied again after it.
//!
//! A database the fence lets write carries the claim's epoch (`Loaded::epoch`), which every
//! log record of it is stamped with. If the log already holds a later epoch for it (another
//! node claimed it since, and its records reached this log), the claim in this node's view is
//! stale and writes are refused too: the log's epochs never go down.

use std::time::Duration;

use hearth_cluster::Placement;

use crate::loaded::Loaded;

/// The longest a request to a new database placed on this node waits for this node's claim
/// on it (`Placement::claim_settled`: an etcd transaction, normally a few milliseconds)
/// before it is handled as the claim then stands: a write is refused with "retry".
pub const CLAIM_WAIT_LIMIT: Duration = Duration::from_secs(2);

/// Makes `loaded` writable or read-only as the claim on it allows, and sets the epoch its
/// records carry. `disk_failed`: the shard's log failed, whose read-only reason stays; so
/// does any other reason the fence did not set (a database that could not be loaded from
/// disk). `logged_epoch`: the highest epoch the shard's log holds for the database.
pub fn apply(placement: &Placement, disk_failed: bool, logged_epoch: u64, loaded: &mut Loaded) {
    if disk_failed {
        return;
    }
    // A reason the fence did not set holds whatever it decides; its epoch waits too.
    if loaded.is_held_read_only() {
        return;
    }
    let refusal = moving_refusal(placement, loaded)
        .or_else(|| placement.write_refusal(loaded.name()))
        .or_else(
            || match claim_epoch(placement, loaded.name(), logged_epoch) {
                Ok(epoch) => {
                    loaded.set_epoch(epoch);
                    None
                }
                Err(reason) => Some(reason),
            },
        );
    loaded.fence(refusal.as_deref());
}

/// The reason writes are refused while the database is being handed over (`Loaded::moving`):
/// until this node's claim at the epoch handed over is gone from its view, after which the
/// usual checks refuse them (the claim is another node's) and the mark goes.
fn moving_refusal(placement: &Placement, loaded: &mut Loaded) -> Option<String> {
    let epoch = loaded.moving()?;
    let still_mine = placement
        .owner_of(loaded.name())
        .is_some_and(|claim| *claim.node_id == *placement.node_id() && claim.epoch == epoch);
    if still_mine {
        Some(MOVING.to_owned())
    } else {
        loaded.end_move();
        None
    }
}

/// Why writes are refused while a database moves to its follower.
pub const MOVING: &str =
    "writes are refused for a moment: the database is moving to another node; retry";

/// The epoch of this node's claim on `namespace`, which `write_refusal` just allowed, or why
/// writes are refused after all: the log holds a later epoch, or the view changed between
/// the two lookups (the next lookup sees the new one).
fn claim_epoch(placement: &Placement, namespace: &str, logged_epoch: u64) -> Result<u64, String> {
    match placement.owner_of(namespace) {
        Some(claim) if &*claim.node_id == placement.node_id() => {
            if claim.epoch < logged_epoch {
                Err(format!(
                    "writes are refused: the log holds epoch {logged_epoch} of the database, \
                     later than this node's claim (epoch {}); another node claimed it since",
                    claim.epoch
                ))
            } else {
                Ok(claim.epoch)
            }
        }
        _ => Err("writes are refused for now: the database's claim changed; retry".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::rc::Rc;
    use std::sync::Arc;

    use hearth_cluster::Claim;
    use hearth_sync::Database;

    use super::*;

    const ADDRESS: SocketAddr =
        SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 9000);

    fn claim(node: &str, lease: i64) -> Claim {
        Claim {
            node_id: Arc::from(node),
            advertise: ADDRESS,
            epoch: 3,
            lease,
        }
    }

    fn loaded(name: &str) -> Loaded {
        Loaded::new(Rc::from(name), Database::new(), 0, 0)
    }

    #[test]
    fn a_database_takes_writes_only_under_this_nodes_claim_and_lease() {
        let claims = vec![
            ("mine".to_owned(), claim("a", 7)),
            ("old-lease".to_owned(), claim("a", 6)),
            ("theirs".to_owned(), claim("b", 8)),
        ];
        let placement = Placement::fixed("a", ADDRESS, &["a", "b"], claims, Some(7));
        let mut mine = loaded("mine");
        apply(&placement, false, 0, &mut mine);
        assert_eq!(mine.read_only_reason(), None);
        assert_eq!(mine.epoch(), Some(3), "its records carry the claim's epoch");
        let mut old = loaded("old-lease");
        apply(&placement, false, 0, &mut old);
        assert!(old.is_fenced());
        assert!(old
            .read_only_reason()
            .is_some_and(|r| r.contains("cannot confirm")));
        let mut theirs = loaded("theirs");
        apply(&placement, false, 0, &mut theirs);
        assert!(theirs
            .read_only_reason()
            .is_some_and(|r| r.contains("owned by node b")));
        // The claim becomes valid: the fence lifts what it set.
        let claims = vec![("theirs".to_owned(), claim("a", 7))];
        let placement = Placement::fixed("a", ADDRESS, &["a", "b"], claims, Some(7));
        apply(&placement, false, 0, &mut theirs);
        assert_eq!(theirs.read_only_reason(), None);
        assert!(!theirs.is_fenced());
    }

    #[test]
    fn a_claim_older_than_the_log_refuses_writes() {
        let claims = vec![("db".to_owned(), claim("a", 7))];
        let placement = Placement::fixed("a", ADDRESS, &["a"], claims, Some(7));
        let mut db = loaded("db");
        // The log holds epoch 4 of the database: this node's claim (epoch 3) is stale.
        apply(&placement, false, 4, &mut db);
        assert!(db.is_fenced());
        assert!(db
            .read_only_reason()
            .is_some_and(|r| r.contains("holds epoch 4")));
        // Equal epochs are the same claim: writes go on.
        apply(&placement, false, 3, &mut db);
        assert_eq!(db.read_only_reason(), None);
        assert_eq!(db.epoch(), Some(3));
    }

    #[test]
    fn the_fence_never_lifts_a_reason_it_did_not_set() {
        let claims = vec![("db".to_owned(), claim("a", 7))];
        let placement = Placement::fixed("a", ADDRESS, &["a"], claims, Some(7));
        let mut failed = loaded("db");
        failed.set_read_only(Some(Arc::from(
            "the database could not be loaded from disk",
        )));
        apply(&placement, false, 0, &mut failed);
        assert!(failed.read_only_reason().is_some());
        // Nor one set by a disk failure while it was fenced.
        let mut fenced = loaded("db");
        fenced.fence(Some("the claim lapsed"));
        fenced.set_read_only(Some(Arc::from("the log failed")));
        apply(&placement, true, 0, &mut fenced);
        assert_eq!(fenced.read_only_reason(), Some("the log failed"));
    }

    #[test]
    fn each_reason_to_refuse_writes_is_lifted_only_by_whoever_set_it() {
        let mut db = loaded("db");
        db.fence(Some("the claim lapsed"));
        db.set_read_only(Some(Arc::from("the log failed")));
        assert_eq!(db.read_only_reason(), Some("the log failed"));
        // The fence lifting its own reason, without its caller's guard, leaves the log's.
        db.fence(None);
        assert_eq!(db.read_only_reason(), Some("the log failed"));
        db.fence(Some("the claim lapsed"));
        // A rollback makes a new engine: both reasons are told to it again.
        db.roll_back(0);
        assert_eq!(db.read_only_reason(), Some("the log failed"));
        db.set_read_only(None);
        assert_eq!(db.read_only_reason(), Some("the claim lapsed"));
        db.fence(None);
        assert_eq!(db.read_only_reason(), None);
    }

    #[test]
    fn a_database_being_moved_refuses_writes_until_its_claim_is_gone() {
        let mine = vec![("db".to_owned(), claim("a", 7))];
        let placement = Placement::fixed("a", ADDRESS, &["a", "b"], mine.clone(), Some(7));
        let mut db = loaded("db");
        db.begin_move(3);
        apply(&placement, false, 0, &mut db);
        assert!(db.is_fenced());
        assert_eq!(db.read_only_reason(), Some(MOVING));
        // Handed over: the view shows b's claim; the mark goes and b is named.
        let theirs = vec![("db".to_owned(), claim("b", 8))];
        let placement = Placement::fixed("a", ADDRESS, &["a", "b"], theirs, Some(7));
        apply(&placement, false, 0, &mut db);
        assert_eq!(db.moving(), None);
        assert!(db
            .read_only_reason()
            .is_some_and(|r| r.contains("owned by node b")));
        // Given up instead: the mark is cleared by the move, and the fence lifts what it set.
        let placement = Placement::fixed("a", ADDRESS, &["a", "b"], mine, Some(7));
        let mut db = loaded("db");
        db.begin_move(3);
        apply(&placement, false, 0, &mut db);
        db.end_move();
        apply(&placement, false, 0, &mut db);
        assert_eq!(db.read_only_reason(), None);
    }
}
