//! Limits per caller, as a database's rules declare them (`.limits`, docs/limits.md): writes
//! and bytes written per period, listens and connections held at once, each counted per
//! signed-in user or per client address. The rules say which declarations an operation
//! touches; this module counts, on the owner, where every session and write of the database
//! passes (so counts hold across the edges and nodes of a cluster). Admins are never limited.
//!
//! Rates use the quotas' token bucket (`rates.rs`). Connections are counted from the sessions
//! (a caller's sessions are indexed here). Listens are recorded per declaration and caller as
//! they are admitted, and each record is checked against the engine's listens when counted,
//! so that a listen that is gone (unlistened, revoked, its session closed) stops counting
//! without the engine having to say so, and a count costs what the caller holds under that
//! declaration, not everything it holds.

mod callers;
mod rates;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use hearth_rules::{LimitKey, LimitSpec, Rules};
use hearth_sync::{AuthState, ConnId, Database, Tag};
use hearth_tree::Path;

pub use callers::{Identity, LimitKind, LimitRefusal, REFUSED};
pub use rates::MAX_COUNTED_CALLERS;

use callers::Caller;
use rates::RateCounters;

/// An open session as the limits count it.
#[derive(Debug, Clone)]
struct Held {
    identity: Identity,
    /// Whether it is counted among its address's anonymous callers: from its first request
    /// for data made without a credential (a session that signs in first never is, so that
    /// the users behind one address can all connect before they sign in).
    anonymous_counted: bool,
    /// The declarations and callers its listens are recorded under.
    listened: Vec<(usize, Caller)>,
}

impl Held {
    /// The callers whose sessions it is counted among.
    fn keys(&self) -> impl Iterator<Item = Caller> + '_ {
        let identity = &self.identity;
        [
            (!identity.admin).then_some(Caller::Address(identity.address)),
            identity
                .uid
                .clone()
                .filter(|_| !identity.admin)
                .map(Caller::Uid),
            self.anonymous_counted
                .then_some(Caller::Anonymous(identity.address)),
        ]
        .into_iter()
        .flatten()
    }
}

/// A listen recorded under a declaration: its session, path and tag.
type Recorded = (ConnId, Path, Option<Tag>);

/// What a database's callers use of its rules' limits.
#[derive(Debug, Default)]
pub struct CallerLimits {
    /// Each open session, and the sessions of each caller.
    sessions: HashMap<ConnId, Held>,
    members: HashMap<Caller, HashSet<ConnId>>,
    /// Listens recorded by declaration (with a `listens` limit) and caller.
    listens: HashMap<(usize, Caller), Vec<Recorded>>,
    rates: RateCounters,
    /// The rules document the records and counters were made under.
    rules: Option<Arc<Rules>>,
    touched: Vec<usize>,
    /// Whether the sessions are followed: only while the database's rules declare limits, so
    /// that a database without them keeps nothing per session ([`CallerLimits::start`]).
    tracking: bool,
}

/// The rules' document, when it declares limits.
fn limits_of(database: &Database) -> Option<&Arc<Rules>> {
    match database.access() {
        hearth_sync::Access::Rules(rules) if rules.has_limits() => Some(rules),
        _ => None,
    }
}

impl CallerLimits {
    /// Whether the sessions are followed now.
    pub fn tracking(&self) -> bool {
        self.tracking
    }

    /// Starts following the sessions, from those open now (the database's rules came to
    /// declare limits): each is counted as who it is, none refused; an anonymous one joins its
    /// address's count at its next request for data, and the listens they hold are recorded
    /// at the next count.
    pub fn start(&mut self, sessions: impl IntoIterator<Item = (ConnId, Identity)>) {
        self.stop();
        self.tracking = true;
        for (conn, identity) in sessions {
            self.insert(conn, identity);
        }
    }

    /// Forgets every session and counter (the rules no longer declare limits).
    pub fn stop(&mut self) {
        *self = CallerLimits::default();
    }

    fn insert(&mut self, conn: ConnId, identity: Identity) {
        let held = Held {
            identity,
            anonymous_counted: false,
            listened: Vec::new(),
        };
        for key in held.keys() {
            self.members.entry(key).or_default().insert(conn);
        }
        self.sessions.insert(conn, held);
    }

    /// Counts session `conn` of `identity`; refuses one past the root's `connections` limit
    /// where the caller is known now: a signed-in user, or any caller under
    /// `"per": "client.address"`. An anonymous caller under `"per": "auth.uid"` is counted at
    /// its first request for data ([`CallerLimits::claim`]). Only an admitted session is kept.
    pub fn open(
        &mut self,
        database: &Database,
        conn: ConnId,
        identity: Identity,
    ) -> Result<(), LimitRefusal> {
        if !self.tracking {
            return Ok(());
        }
        self.close(conn);
        if !identity.admin {
            if let Some(spec) = limits_of(database).and_then(|rules| rules.connection_limit()) {
                if spec.per == LimitKey::Address || identity.uid.is_some() {
                    self.check_connections(spec, &identity)?;
                }
            }
        }
        self.insert(conn, identity);
        Ok(())
    }

    /// Session `conn` asks for data: an anonymous one is counted among its address's
    /// anonymous callers from now on, unless they already hold the root's `connections`.
    pub fn claim(&mut self, database: &Database, conn: ConnId) -> Result<(), LimitRefusal> {
        let Some(held) = self.sessions.get(&conn) else {
            return Ok(());
        };
        let identity = &held.identity;
        if identity.admin || identity.uid.is_some() || held.anonymous_counted {
            return Ok(());
        }
        if let Some(spec) = limits_of(database).and_then(|rules| rules.connection_limit()) {
            if spec.per == LimitKey::Uid {
                self.check_connections(spec, identity)?;
            }
        }
        let key = Caller::Anonymous(identity.address);
        self.members.entry(key).or_default().insert(conn);
        if let Some(held) = self.sessions.get_mut(&conn) {
            held.anonymous_counted = true;
        }
        Ok(())
    }

    /// The session's credential changed to `auth`: it is counted as its new caller, unless
    /// that caller already holds as many connections as the root's limit allows (the session
    /// is then forgotten here, and the caller closes it). The listens it holds are counted for
    /// its new caller from now on (none is revoked: the limit holds its next listens).
    pub fn signed_in(
        &mut self,
        database: &Database,
        conn: ConnId,
        auth: &AuthState,
    ) -> Result<(), LimitRefusal> {
        let held = self.sessions.get(&conn);
        let address = held.and_then(|held| held.identity.address);
        let identity = Identity::of(auth, address);
        if held.is_some_and(|held| held.identity == identity) {
            return Ok(());
        }
        let moved = self.take_listens_of(conn);
        self.open(database, conn, identity)?;
        if let (Some(rules), Some(held)) = (self.rules.clone(), self.sessions.get_mut(&conn)) {
            for (id, path, tag) in moved {
                let Some(spec) = rules.limits().get(id) else {
                    continue;
                };
                let key = (id, held.identity.caller(spec.per));
                held.listened.push(key.clone());
                self.listens.entry(key).or_default().push((conn, path, tag));
            }
        }
        Ok(())
    }

    /// The session ended (or moved away).
    pub fn close(&mut self, conn: ConnId) {
        self.take_listens_of(conn);
        let Some(held) = self.sessions.remove(&conn) else {
            return;
        };
        for key in held.keys() {
            if let Some(conns) = self.members.get_mut(&key) {
                conns.remove(&conn);
                if conns.is_empty() {
                    self.members.remove(&key);
                }
            }
        }
    }

    /// Removes the records of the session's listens, and returns them by declaration.
    fn take_listens_of(&mut self, conn: ConnId) -> Vec<(usize, Path, Option<Tag>)> {
        let Some(held) = self.sessions.get_mut(&conn) else {
            return Vec::new();
        };
        let mut taken = Vec::new();
        for key in held.listened.drain(..) {
            let Some(records) = self.listens.get_mut(&key) else {
                continue;
            };
            records.retain(|(session, path, tag)| {
                let mine = *session == conn;
                if mine {
                    taken.push((key.0, path.clone(), *tag));
                }
                !mine
            });
            if records.is_empty() {
                self.listens.remove(&key);
            }
        }
        // `listened` holds each key once and a session's records one per listen: no
        // duplicates to remove.
        taken
    }

    fn check_connections(&self, spec: &LimitSpec, identity: &Identity) -> Result<(), LimitRefusal> {
        let Some(limit) = spec.connections else {
            return Ok(());
        };
        let caller = identity.caller(spec.per);
        let held = self.members.get(&caller).map_or(0, HashSet::len) as u64;
        if held >= limit {
            return Err(LimitRefusal::new(
                LimitKind::Connections,
                format!(
                    "{} holds {held} connections to this database, the rules' limit ({})",
                    caller.describe(),
                    spec.pattern
                ),
            ));
        }
        Ok(())
    }

    /// The records and counters belong to one rules document: under another, they start
    /// again, the listens held now recorded afresh from the engine.
    fn follow_rules(&mut self, database: &Database, rules: &Arc<Rules>) {
        if self
            .rules
            .as_ref()
            .is_some_and(|known| Arc::ptr_eq(known, rules))
        {
            return;
        }
        self.rules = Some(Arc::clone(rules));
        self.rates.clear();
        self.listens.clear();
        let mut touched = Vec::new();
        for (conn, held) in &mut self.sessions {
            held.listened.clear();
            if held.identity.admin {
                continue;
            }
            for (path, tag) in database.listens_of(*conn) {
                touched.clear();
                rules.limits_touching(path, &mut touched);
                for spec in touched.iter().filter_map(|id| rules.limits().get(*id)) {
                    if spec.listens.is_none() {
                        continue;
                    }
                    let key = (spec.id, held.identity.caller(spec.per));
                    if !held.listened.contains(&key) {
                        held.listened.push(key.clone());
                    }
                    self.listens
                        .entry(key)
                        .or_default()
                        .push((*conn, path.clone(), tag));
                }
            }
        }
    }

    /// Admits a listen at `path` with `tag` by session `conn` (one it does not hold yet), or
    /// says which declaration's `listens` it would pass; an admitted one is recorded.
    pub fn admit_listen(
        &mut self,
        database: &Database,
        conn: ConnId,
        path: &Path,
        tag: Option<Tag>,
    ) -> Result<(), LimitRefusal> {
        let Some(rules) = limits_of(database) else {
            return Ok(());
        };
        self.follow_rules(database, rules);
        let Some(held) = self.sessions.get(&conn).filter(|held| !held.identity.admin) else {
            return Ok(());
        };
        let identity = held.identity.clone();
        let mut touched = std::mem::take(&mut self.touched);
        touched.clear();
        rules.limits_touching(path, &mut touched);
        let mut keys = Vec::new();
        let mut result = Ok(());
        for spec in touched.iter().filter_map(|id| rules.limits().get(*id)) {
            let Some(limit) = spec.listens else {
                continue;
            };
            let key = (spec.id, identity.caller(spec.per));
            let records = self.listens.entry(key.clone()).or_default();
            // Records of listens that are gone, or of sessions now another caller's, go.
            let sessions = &self.sessions;
            records.retain(|(session, path, tag)| {
                database.holds_listen(*session, path, *tag)
                    && sessions
                        .get(session)
                        .is_some_and(|held| held.identity.caller(spec.per) == key.1)
            });
            let held = records.len() as u64;
            if held >= limit {
                result = Err(LimitRefusal::new(
                    LimitKind::Listens,
                    format!(
                        "{} holds {held} listens under {}, the rules' limit",
                        key.1.describe(),
                        spec.pattern
                    ),
                ));
                break;
            }
            keys.push(key);
        }
        self.touched = touched;
        result?;
        if let Some(held) = self.sessions.get_mut(&conn) {
            for key in keys {
                if !held.listened.contains(&key) {
                    held.listened.push(key.clone());
                }
                self.listens
                    .entry(key)
                    .or_default()
                    .push((conn, path.clone(), tag));
            }
        }
        Ok(())
    }

    /// Admits a write at `path` of about `bytes` by `identity` at `now_ms`, or says which
    /// declaration refuses it. Nothing is counted of a refused write.
    pub fn admit_write(
        &mut self,
        database: &Database,
        identity: &Identity,
        path: &Path,
        bytes: u64,
        now_ms: u64,
    ) -> Result<(), LimitRefusal> {
        let Some(rules) = limits_of(database) else {
            return Ok(());
        };
        if identity.admin {
            return Ok(());
        }
        self.follow_rules(database, rules);
        let mut touched = std::mem::take(&mut self.touched);
        touched.clear();
        rules.limits_touching(path, &mut touched);
        let result = self.rates.take(rules, &touched, identity, bytes, now_ms);
        self.touched = touched;
        result
    }

    /// The identity of session `conn` (anonymous and unknown when it was never opened here).
    pub fn identity(&self, conn: ConnId) -> Identity {
        self.sessions
            .get(&conn)
            .map(|held| held.identity.clone())
            .unwrap_or_default()
    }

    /// Rate counters held now.
    pub fn counted(&self) -> usize {
        self.rates.len()
    }
}

#[cfg(test)]
mod tests;
