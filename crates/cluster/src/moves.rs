//! `hearth cluster move`: asks a database's owner to hand it to its follower while both stay
//! up, and waits to see the follower's claim. The request is a key under a lease of its own
//! (`/hearth/moves/<namespace>`, [`MoveValue`]) that the owner reads with the rest of the
//! cluster: valid only while the claim is still at the epoch the requester saw, so an old
//! request never moves the database again, and gone with its lease whatever happens.

use std::time::{Duration, Instant};

use crate::etcd::{Etcd, EtcdError, Put};
use crate::keys::{self, MoveValue};

/// How long the request key lives past the wait: the owner may still be at it.
const REQUEST_SLACK: Duration = Duration::from_secs(10);

/// How often the claim is read again while waiting.
const POLL: Duration = Duration::from_millis(200);

#[derive(Debug, thiserror::Error)]
pub enum MoveError {
    #[error("reading or writing etcd: {0}")]
    Etcd(#[from] EtcdError),
    #[error("{0} is not claimed by any node: there is nothing to move (its next use claims it)")]
    NotClaimed(String),
    #[error("{0} has no follower (its owner is the only live node): there is nowhere to move it")]
    NoFollower(String),
    #[error("{namespace} did not move to {to} within {secs} s; its owner {from} logs why (`could not hand the database over` or `not moved`)")]
    TimedOut {
        namespace: String,
        from: String,
        to: String,
        secs: u64,
    },
}

/// Where a database went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    pub from: String,
    pub to: String,
    pub epoch: u64,
}

/// Asks the owner of `namespace` to hand it to its follower, and waits up to `wait` for the
/// follower's claim.
pub fn request(etcd: &Etcd, namespace: &str, wait: Duration) -> Result<Moved, MoveError> {
    let status = crate::status::read(etcd)?;
    let db = status
        .databases
        .iter()
        .find(|db| db.namespace == namespace)
        .filter(|db| db.owner.is_some())
        .ok_or_else(|| MoveError::NotClaimed(namespace.to_owned()))?;
    let from = db.owner.clone().unwrap_or_default();
    let to = db
        .follower
        .clone()
        .ok_or_else(|| MoveError::NoFollower(namespace.to_owned()))?;
    let epoch = db.epoch;
    let lease = etcd.grant((wait + REQUEST_SLACK).as_secs().max(1))?;
    let value = MoveValue {
        epoch,
        to: to.clone(),
    };
    etcd.put(&Put {
        key: keys::moves(namespace),
        value: serde_json::to_vec(&value).unwrap_or_default(),
        lease,
    })?;
    let deadline = Instant::now() + wait;
    let result = loop {
        let claim = crate::status::read(etcd)?
            .databases
            .into_iter()
            .find(|db| db.namespace == namespace);
        if let Some(db) = claim.filter(|db| db.epoch > epoch) {
            if db.owner.as_deref() == Some(to.as_str()) {
                break Ok(Moved {
                    from,
                    to,
                    epoch: db.epoch,
                });
            }
        }
        if Instant::now() >= deadline {
            break Err(MoveError::TimedOut {
                namespace: namespace.to_owned(),
                from,
                to,
                secs: wait.as_secs(),
            });
        }
        std::thread::sleep(POLL);
    };
    // The request has done its part either way; its lease would end it soon anyway.
    let _ = etcd.revoke(lease);
    result
}
