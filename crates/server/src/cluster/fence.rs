//! Fencing: in a cluster, a database accepts writes only while this node holds its claim
//! under a lease etcd confirmed recently (`Placement::write_refusal`). The check is made each
//! time a shard looks a database up for a request, and it turns the database read-only with
//! the reason (`unavailable` on the wire, 503 over REST) or writable again; the engine then
//! refuses writes exactly as after a disk failure (decision 23), reads go on.

use std::sync::Arc;

use hearth_cluster::Placement;

use crate::loaded::Loaded;

/// Makes `loaded` writable or read-only as the claim on it allows. `disk_failed`: the
/// shard's log failed, whose read-only reason stays; so does any other reason the fence did
/// not set (a database that could not be loaded from disk).
pub fn apply(placement: &Placement, disk_failed: bool, loaded: &mut Loaded) {
    if disk_failed {
        return;
    }
    let other_reason = !loaded.fenced && loaded.engine.read_only_reason().is_some();
    if other_reason {
        return;
    }
    match placement.write_refusal(&loaded.name) {
        None if loaded.fenced => {
            loaded.fenced = false;
            loaded.engine.set_read_only(None);
        }
        None => {}
        Some(reason) if loaded.engine.read_only_reason() == Some(reason.as_str()) => {}
        Some(reason) => {
            loaded.fenced = true;
            loaded.engine.set_read_only(Some(Arc::from(reason)));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::rc::Rc;

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
        apply(&placement, false, &mut mine);
        assert_eq!(mine.engine.read_only_reason(), None);
        let mut old = loaded("old-lease");
        apply(&placement, false, &mut old);
        assert!(old.fenced);
        assert!(old
            .engine
            .read_only_reason()
            .is_some_and(|r| r.contains("cannot confirm")));
        let mut theirs = loaded("theirs");
        apply(&placement, false, &mut theirs);
        assert!(theirs
            .engine
            .read_only_reason()
            .is_some_and(|r| r.contains("owned by node b")));
        // The claim becomes valid: the fence lifts what it set.
        let claims = vec![("theirs".to_owned(), claim("a", 7))];
        let placement = Placement::fixed("a", ADDRESS, &["a", "b"], claims, Some(7));
        apply(&placement, false, &mut theirs);
        assert_eq!(theirs.engine.read_only_reason(), None);
        assert!(!theirs.fenced);
    }

    #[test]
    fn the_fence_never_lifts_a_reason_it_did_not_set() {
        let claims = vec![("db".to_owned(), claim("a", 7))];
        let placement = Placement::fixed("a", ADDRESS, &["a"], claims, Some(7));
        let mut failed = loaded("db");
        failed.engine.set_read_only(Some(Arc::from(
            "the database could not be loaded from disk",
        )));
        apply(&placement, false, &mut failed);
        assert!(failed.engine.read_only_reason().is_some());
        // Nor one set by a disk failure while it was fenced.
        let mut fenced = loaded("db");
        fenced.fenced = true;
        fenced
            .engine
            .set_read_only(Some(Arc::from("the log failed")));
        apply(&placement, true, &mut fenced);
        assert_eq!(fenced.engine.read_only_reason(), Some("the log failed"));
    }
}
