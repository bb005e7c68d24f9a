//! Limits per caller, as a database's rules declare them (`.limits`, docs/limits.md): writes
//! and bytes written per period, listens and connections held at once, each counted per
//! signed-in user or per client address. The rules say which declarations an operation
//! touches; this file counts, on the owner, where every session and write of the database
//! passes (so counts hold across the edges and nodes of a cluster). Admins are never limited.
//!
//! Rates use the quotas' token bucket. Connections and listens are counted from the sessions
//! themselves (a caller's sessions are indexed here, their listens are the engine's), so that
//! nothing drifts when a listen is revoked or a session moves.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use hearth_rules::{LimitKey, LimitSpec, Rules};
use hearth_sync::{AuthState, ConnId, Database};
use hearth_tree::Path;
use serde_json::Value;

use crate::quotas::Bucket;

/// Rate counters a database keeps at once (one per caller and declaration). Past it, counters
/// whose buckets have refilled are dropped (they hold nothing a fresh one would not); a
/// caller who still finds no room is refused, so that many callers cannot grow the owner's
/// memory without bound.
pub const MAX_COUNTED_CALLERS: usize = 100_000;

/// Refusals by limit kind, server-wide (`hearth_rule_limit_refused_total{limit}`).
pub static REFUSED: [AtomicU64; 5] = [const { AtomicU64::new(0) }; 5];

/// Which limit refused something.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitKind {
    Writes,
    Bytes,
    Listens,
    Connections,
    /// No room left to count one more caller ([`MAX_COUNTED_CALLERS`]).
    Callers,
}

impl LimitKind {
    /// The label of its refusals.
    pub const LABELS: [&'static str; 5] = ["writes", "bytes", "listens", "connections", "callers"];
}

/// A refusal, with what the client is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitRefusal {
    pub kind: LimitKind,
    pub message: String,
}

impl LimitRefusal {
    fn new(kind: LimitKind, message: String) -> LimitRefusal {
        REFUSED[kind as usize].fetch_add(1, Ordering::Relaxed);
        LimitRefusal { kind, message }
    }
}

/// Who is counted: a signed-in user, an anonymous caller by address, or any caller by
/// address (`"per": "client.address"`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Caller {
    Uid(Arc<str>),
    Anonymous(Option<IpAddr>),
    Address(Option<IpAddr>),
}

impl Caller {
    fn describe(&self) -> String {
        let address = |address: &Option<IpAddr>| match address {
            Some(address) => address.to_string(),
            None => "an unknown address".to_owned(),
        };
        match self {
            Caller::Uid(uid) => format!("user {uid}"),
            Caller::Anonymous(at) => format!("anonymous callers from {}", address(at)),
            Caller::Address(at) => format!("client address {}", address(at)),
        }
    }
}

/// Who a caller is, as the limits see it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    /// Admins are never counted.
    pub admin: bool,
    pub uid: Option<Arc<str>>,
    pub address: Option<IpAddr>,
}

impl Identity {
    /// The identity of a caller with `auth` from `address`.
    pub fn of(auth: &AuthState, address: Option<IpAddr>) -> Identity {
        let uid = match auth {
            AuthState::User(value) => value
                .get("uid")
                .and_then(Value::as_str)
                .map(Arc::<str>::from),
            AuthState::Anonymous | AuthState::Admin => None,
        };
        Identity {
            admin: *auth == AuthState::Admin,
            uid,
            address,
        }
    }

    fn caller(&self, per: LimitKey) -> Caller {
        match (per, &self.uid) {
            (LimitKey::Uid, Some(uid)) => Caller::Uid(uid.clone()),
            (LimitKey::Uid, None) => Caller::Anonymous(self.address),
            (LimitKey::Address, _) => Caller::Address(self.address),
        }
    }
}

/// An open session as the limits count it.
#[derive(Debug, Clone)]
struct Held {
    identity: Identity,
    /// Whether it is counted among its address's anonymous callers: from its first request
    /// for data made without a credential (a session that signs in first never is, so that
    /// the users behind one address can all connect before they sign in).
    anonymous_counted: bool,
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

#[derive(Debug, Default, Clone, Copy)]
struct RateUse {
    writes: Bucket,
    bytes: Bucket,
}

/// What a database's callers use of its rules' limits.
#[derive(Debug, Default)]
pub struct CallerLimits {
    /// Each open session, and the sessions of each caller.
    sessions: HashMap<ConnId, Held>,
    members: HashMap<Caller, HashSet<ConnId>>,
    /// Rate counters by declaration and caller, for the rules document at `rules_at`.
    rates: HashMap<(usize, Caller), RateUse>,
    rules_at: usize,
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
    /// address's count at its next request for data.
    pub fn start(&mut self, sessions: impl IntoIterator<Item = (ConnId, Identity)>) {
        self.stop();
        self.tracking = true;
        for (conn, identity) in sessions {
            let held = Held {
                identity,
                anonymous_counted: false,
            };
            for key in held.keys() {
                self.members.entry(key).or_default().insert(conn);
            }
            self.sessions.insert(conn, held);
        }
    }

    /// Forgets every session and counter (the rules no longer declare limits).
    pub fn stop(&mut self) {
        *self = CallerLimits::default();
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
        let held = Held {
            identity,
            anonymous_counted: false,
        };
        for key in held.keys() {
            self.members.entry(key).or_default().insert(conn);
        }
        self.sessions.insert(conn, held);
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
    /// is then forgotten here, and the caller closes it).
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
        self.open(database, conn, identity)
    }

    /// The session ended (or moved away).
    pub fn close(&mut self, conn: ConnId) {
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

    /// Admits a listen at `path` by session `conn` (one it does not hold yet), or says which
    /// declaration's `listens` it would pass.
    pub fn admit_listen(
        &mut self,
        database: &Database,
        conn: ConnId,
        path: &Path,
    ) -> Result<(), LimitRefusal> {
        let Some(rules) = limits_of(database) else {
            return Ok(());
        };
        let Some(identity) = self
            .sessions
            .get(&conn)
            .map(|held| &held.identity)
            .filter(|identity| !identity.admin)
        else {
            return Ok(());
        };
        let mut touched = std::mem::take(&mut self.touched);
        touched.clear();
        rules.limits_touching(path, &mut touched);
        let mut result = Ok(());
        let mut under = Vec::new();
        for spec in touched.iter().filter_map(|id| rules.limits().get(*id)) {
            let Some(limit) = spec.listens else {
                continue;
            };
            let caller = identity.caller(spec.per);
            // Counted from the engine's listens, stopping at the limit: the cost is bounded by
            // the limit, not by what the caller holds.
            let mut held = 0u64;
            'sessions: for session in self.members.get(&caller).into_iter().flatten() {
                for (listened, _) in database.listens_of(*session) {
                    under.clear();
                    rules.limits_touching(listened, &mut under);
                    if under.contains(&spec.id) {
                        held += 1;
                        if held >= limit {
                            break 'sessions;
                        }
                    }
                }
            }
            if held >= limit {
                result = Err(LimitRefusal::new(
                    LimitKind::Listens,
                    format!(
                        "{} holds {held} listens under {}, the rules' limit",
                        caller.describe(),
                        spec.pattern
                    ),
                ));
                break;
            }
        }
        self.touched = touched;
        result
    }

    /// Admits a write at `path` of `bytes` by `identity` at `now_ms`, or says which declaration
    /// refuses it. Nothing is counted of a refused write.
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
        // Counters of another document mean nothing under this one.
        let rules_at = Arc::as_ptr(rules) as usize;
        if rules_at != self.rules_at {
            self.rates.clear();
            self.rules_at = rules_at;
        }
        let mut touched = std::mem::take(&mut self.touched);
        touched.clear();
        rules.limits_touching(path, &mut touched);
        let result = self.take(rules, &touched, identity, bytes, now_ms);
        self.touched = touched;
        result
    }

    fn take(
        &mut self,
        rules: &Rules,
        touched: &[usize],
        identity: &Identity,
        bytes: u64,
        now_ms: u64,
    ) -> Result<(), LimitRefusal> {
        let specs: Vec<&LimitSpec> = touched
            .iter()
            .filter_map(|id| rules.limits().get(*id))
            .filter(|spec| spec.writes.is_some() || spec.bytes.is_some())
            .collect();
        if specs.is_empty() {
            return Ok(());
        }
        let mut taken: Vec<((usize, Caller), RateUse)> = Vec::with_capacity(specs.len());
        for spec in specs {
            let key = (spec.id, identity.caller(spec.per));
            if !self.rates.contains_key(&key) && self.rates.len() >= MAX_COUNTED_CALLERS {
                self.sweep(rules, now_ms);
                if self.rates.len() >= MAX_COUNTED_CALLERS {
                    self.restore(taken);
                    return Err(LimitRefusal::new(
                        LimitKind::Callers,
                        format!("this database counts {MAX_COUNTED_CALLERS} callers' limits at once: try again in a moment"),
                    ));
                }
            }
            let counters = self.rates.entry(key.clone()).or_default();
            let before = *counters;
            let refused = if let Some(rate) = spec
                .writes
                .filter(|rate| !counters.writes.take(rate.count, rate.period_ms, 1, now_ms))
            {
                Some((LimitKind::Writes, format!("{} writes", rate.count), rate))
            } else {
                spec.bytes
                    .filter(|rate| {
                        bytes > rate.count
                            || !counters
                                .bytes
                                .take(rate.count, rate.period_ms, bytes, now_ms)
                    })
                    .map(|rate| {
                        (
                            LimitKind::Bytes,
                            format!("{} bytes written (this write is {bytes})", rate.count),
                            rate,
                        )
                    })
            };
            if let Some((kind, what, rate)) = refused {
                *counters = before;
                let caller = key.1.describe();
                self.restore(taken);
                return Err(LimitRefusal::new(
                    kind,
                    format!(
                        "{caller} is past the rules' limit of {what} {} under {}: try again later",
                        rate.period_words(),
                        spec.pattern
                    ),
                ));
            }
            taken.push((key, before));
        }
        Ok(())
    }

    /// Puts back what a refused write took from the declarations before the one that refused.
    fn restore(&mut self, taken: Vec<((usize, Caller), RateUse)>) {
        for (key, before) in taken {
            self.rates.insert(key, before);
        }
    }

    /// Drops the counters that have refilled: a fresh counter would hold the same.
    fn sweep(&mut self, rules: &Rules, now_ms: u64) {
        self.rates.retain(|(id, _), counters| {
            let Some(spec) = rules.limits().get(*id) else {
                return false;
            };
            let full = |bucket: &mut Bucket, rate: Option<hearth_rules::Rate>| {
                rate.is_none_or(|rate| bucket.is_full(rate.count, rate.period_ms, now_ms))
            };
            !(full(&mut counters.writes, spec.writes) && full(&mut counters.bytes, spec.bytes))
        });
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
#[path = "caller_limits_tests.rs"]
mod tests;
