//! What this node may do with a database now (`placement`): acknowledge writes, answer
//! reads, or wait for its own claim; fencing reads these before every request.

use std::time::{Duration, Instant};

use super::Placement;

impl Placement {
    /// `None` when this node may acknowledge a write to `namespace` now: it holds the
    /// database's claim, under its current lease, and that lease was confirmed within
    /// [`Placement::write_window`]. Otherwise why not, for the client; when placement
    /// says the database is this node's and nobody holds it, a claim is asked for, so that
    /// a retry succeeds.
    pub fn write_refusal(&self, namespace: &str) -> Option<String> {
        let view = self.shared.view.load();
        let me = &*self.shared.node_id;
        match view.claims.get(namespace) {
            Some(claim) if &*claim.node_id == me => {
                let held = view.lease.as_ref().is_some_and(|lease| {
                    lease.id == claim.lease && lease.valid(Instant::now(), self.write_window())
                });
                (!held).then(|| {
                    format!(
                        "writes are refused: node {me} cannot confirm its claim on the \
                         database (epoch {}) with etcd; retry",
                        claim.epoch
                    )
                })
            }
            Some(claim) => Some(format!(
                "writes are refused here: the database is owned by node {} ({}), epoch {}",
                claim.node_id, claim.advertise, claim.epoch
            )),
            None => match view.placed_on(namespace) {
                Some(placed) if placed == me && !view.may_claim(namespace, me) => {
                    let members = view
                        .sync
                        .get(namespace)
                        .map(|set| set.members.join(", "))
                        .unwrap_or_default();
                    Some(format!(
                        "writes are refused: node {me} may not take the database over, since \
                         it may lack acknowledged writes; it waits for one of the nodes that \
                         hold them all ({members}) to return"
                    ))
                }
                Some(placed) if placed == me => {
                    self.ask_claim(namespace);
                    Some(format!(
                        "writes are refused for now: node {me} is claiming the database; retry"
                    ))
                }
                Some(placed) => Some(format!(
                    "writes are refused here: the database is placed on node {placed}, which \
                     has not claimed it yet"
                )),
                None => Some("writes are refused: no cluster node is known alive".to_owned()),
            },
        }
    }

    /// `None` when this node may answer reads of `namespace` from its copy: it holds the
    /// claim under a lease confirmed within [`Placement::write_window`] (no other node can
    /// have taken the database over and acknowledged a write since), or nobody holds it and
    /// placement gives it to this node, which may claim it (its copy then has every
    /// acknowledged write). Otherwise why not: another node may hold newer data.
    pub fn read_refusal(&self, namespace: &str) -> Option<String> {
        let view = self.shared.view.load();
        let me = &*self.shared.node_id;
        let valid = view
            .lease
            .as_ref()
            .is_some_and(|lease| lease.valid(Instant::now(), self.write_window()));
        match view.claims.get(namespace) {
            Some(claim) if &*claim.node_id == me => {
                let held = valid && view.lease.as_ref().is_some_and(|l| l.id == claim.lease);
                (!held).then(|| {
                    format!(
                        "reads are refused: node {me} cannot confirm its claim on the database \
                         with etcd, and another node may hold newer data; retry"
                    )
                })
            }
            Some(claim) => Some(format!(
                "reads are refused here: the database is owned by node {}",
                claim.node_id
            )),
            None if valid
                && view.placed_on(namespace) == Some(me)
                && view.may_claim(namespace, me) =>
            {
                None
            }
            None => Some(
                "reads are refused here: this node may lack acknowledged writes of the database"
                    .to_owned(),
            ),
        }
    }

    /// True while a write to `namespace` here waits only for this node's claim: nobody holds
    /// the database, placement gives it to this node, and this node's lease is valid. A
    /// request then waits for the claim ([`Placement::claim_settled`]) rather than being
    /// refused, so that the first write to a new database succeeds.
    pub fn claim_pending(&self, namespace: &str) -> bool {
        let view = self.shared.view.load();
        let me = &*self.shared.node_id;
        !view.claims.contains_key(namespace)
            && view.placed_on(namespace) == Some(me)
            && view.may_claim(namespace, me)
            && view
                .lease
                .as_ref()
                .is_some_and(|lease| lease.valid(Instant::now(), self.write_window()))
    }

    /// Whether this node's view names another node as `namespace`'s owner.
    pub fn claimed_elsewhere(&self, namespace: &str) -> bool {
        let view = self.shared.view.load();
        view.claims
            .get(namespace)
            .is_some_and(|claim| *claim.node_id != *self.shared.node_id)
    }

    /// Asks for the claim on `namespace` and waits until it is no longer pending (this node
    /// or another holds it, or placement moved it) or `limit` passes; the caller then checks
    /// the claim as for any request.
    pub async fn claim_settled(&self, namespace: &str, limit: Duration) {
        let mut changes = self.changes();
        let wait = async {
            while self.claim_pending(namespace) {
                self.ask_claim(namespace);
                if changes.changed().await.is_err() {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(limit, wait).await;
    }
}
