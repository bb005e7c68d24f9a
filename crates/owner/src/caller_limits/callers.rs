//! Who the limits per caller count (`caller_limits`), and how they refuse.

use std::net::{IpAddr, Ipv6Addr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use hearth_rules::LimitKey;
use hearth_sync::AuthState;
use serde_json::Value;

/// Refusals by limit kind, server-wide (`hearth_rule_limit_refused_total{limit}`).
pub static REFUSED: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

/// Which limit refused something.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitKind {
    Writes,
    Bytes,
    Listens,
    Connections,
}

impl LimitKind {
    /// The label of its refusals.
    pub const LABELS: [&'static str; 4] = ["writes", "bytes", "listens", "connections"];
}

/// A refusal, with what the client is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitRefusal {
    pub kind: LimitKind,
    pub message: String,
}

impl LimitRefusal {
    pub(super) fn new(kind: LimitKind, message: String) -> LimitRefusal {
        REFUSED[kind as usize].fetch_add(1, Ordering::Relaxed);
        LimitRefusal { kind, message }
    }
}

/// Who is counted: a signed-in user, an anonymous caller by address, or any caller by
/// address (`"per": "client.address"`). Addresses are as [`Identity::of`] keeps them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Caller {
    Uid(Arc<str>),
    Anonymous(Option<IpAddr>),
    Address(Option<IpAddr>),
}

impl Caller {
    pub(super) fn describe(&self) -> String {
        let address = |address: &Option<IpAddr>| match address {
            Some(IpAddr::V6(network)) => format!("{network}/64"),
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
    /// The client's address; an IPv6 one by its /64 network, which one subscriber is given
    /// whole (a caller must not become many by changing the end of its address).
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
        let address = address.map(|address| match address {
            IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
            v4 => v4,
        });
        Identity {
            admin: *auth == AuthState::Admin,
            uid,
            address,
        }
    }

    pub(super) fn caller(&self, per: LimitKey) -> Caller {
        match (per, &self.uid) {
            (LimitKey::Uid, Some(uid)) => Caller::Uid(uid.clone()),
            (LimitKey::Uid, None) => Caller::Anonymous(self.address),
            (LimitKey::Address, _) => Caller::Address(self.address),
        }
    }
}
