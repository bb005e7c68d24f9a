//! One Hearth server per listening address and port.
//!
//! Every shard listens on the server's port with `SO_REUSEPORT`, and Linux lets any process of
//! the same user join that group: a second server started on the same address and port would
//! bind without an error and the kernel would split new connections between the two (and their
//! data). A socket bound without `SO_REUSEPORT` would keep the other process out, but also the
//! shards themselves. So the address is claimed apart from the TCP sockets, under a name
//! derived from it:
//!
//! - on Linux, an abstract Unix socket `hearth-port-<port>-<address>`: abstract names live in
//!   the network namespace, exactly like ports (two containers with their own networks each have
//!   their own port 8080, and their own name); the kernel drops the name when the process dies,
//!   however it dies, so no stale claim survives a crash;
//! - elsewhere, an advisory lock on `hearth-port-<port>-<address>.lock` in the temporary
//!   directory, which the system also releases when the process dies.
//!
//! Servers on the same port and different addresses (three nodes of a cluster on 127.0.0.2,
//! .3 and .4, say) each have their own socket group and their own connections, so they may
//! run side by side. A server on every address (`0.0.0.0` or `::`) claims the whole port: it
//! and one on a single address of that port would split who gets which connection by the
//! kernel's preference for the more specific socket, which nobody means, so whichever comes
//! second is refused.

use std::io;
use std::net::{IpAddr, SocketAddr};

/// Holds an address (or, for the unspecified address, a whole port) for this process until
/// dropped.
#[derive(Debug)]
pub struct PortClaim {
    #[cfg(target_os = "linux")]
    _socket: std::os::unix::net::UnixDatagram,
    #[cfg(not(target_os = "linux"))]
    _files: Vec<std::fs::File>,
}

/// What a claim covers: one address of a port, or every address of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimKey {
    Address(IpAddr, u16),
    Port(u16),
}

impl ClaimKey {
    /// The key of a listening address: the whole port for an unspecified address.
    pub fn of(address: SocketAddr) -> ClaimKey {
        if address.ip().is_unspecified() {
            ClaimKey::Port(address.port())
        } else {
            ClaimKey::Address(address.ip(), address.port())
        }
    }

    /// Whether holding `self` already covers `other` for this process.
    pub fn covers(self, other: ClaimKey) -> bool {
        match (self, other) {
            (ClaimKey::Port(mine), ClaimKey::Port(theirs)) => mine == theirs,
            (ClaimKey::Port(mine), ClaimKey::Address(_, theirs)) => mine == theirs,
            (ClaimKey::Address(..), _) => self == other,
        }
    }

    fn port(self) -> u16 {
        match self {
            ClaimKey::Address(_, port) | ClaimKey::Port(port) => port,
        }
    }

    /// The name of the claim, the same in every process.
    fn name(self) -> String {
        match self {
            ClaimKey::Port(port) => format!("hearth-port-{port}"),
            // `:` of IPv6 addresses is kept out of file names.
            ClaimKey::Address(ip, port) => {
                format!("hearth-port-{port}-{}", ip.to_string().replace(':', "_"))
            }
        }
    }

    fn describe(self) -> String {
        match self {
            ClaimKey::Port(port) => format!("port {port}"),
            ClaimKey::Address(ip, port) => format!("{}", SocketAddr::new(ip, port)),
        }
    }
}

/// Claims `address` for this server. Fails with [`io::ErrorKind::AddrInUse`] while another
/// Hearth process (or another server in this one) holds it, or holds its whole port; a claim
/// of a whole port also fails while any address of it is held.
pub fn claim_address(address: SocketAddr) -> io::Result<PortClaim> {
    let key = ClaimKey::of(address);
    claim(key).map_err(|error| {
        if error.kind() == io::ErrorKind::AddrInUse || error.kind() == io::ErrorKind::WouldBlock {
            let port = key.port();
            let hint = match key {
                ClaimKey::Port(_) => format!(
                    "another Hearth server listens on port {port} (on every address, or on one \
                     of them)"
                ),
                ClaimKey::Address(..) => format!(
                    "another Hearth server listens on {} (or on every address of port {port})",
                    key.describe()
                ),
            };
            io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("Address already in use: {hint}; stop it or choose another --listen"),
            )
        } else {
            io::Error::new(
                error.kind(),
                format!("cannot claim {} for this server: {error}", key.describe()),
            )
        }
    })
}

/// Claims `port` on every address ([`claim_address`] of the unspecified address).
pub fn claim_port(port: u16) -> io::Result<PortClaim> {
    claim_address(SocketAddr::from(([0, 0, 0, 0], port)))
}

#[cfg(target_os = "linux")]
fn claim(key: ClaimKey) -> io::Result<PortClaim> {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr as UnixAddr, UnixDatagram};

    let bind = |key: ClaimKey| UnixDatagram::bind_addr(&UnixAddr::from_abstract_name(key.name())?);
    match key {
        ClaimKey::Address(_, port) => {
            let held = bind(key)?;
            // Nobody may hold the whole port. Probing by binding its name (and letting it go)
            // races only with a server claiming the whole port at this moment, which looks
            // for the addresses after binding: one of the two sees the other.
            drop(bind(ClaimKey::Port(port))?);
            Ok(PortClaim { _socket: held })
        }
        ClaimKey::Port(port) => {
            let held = bind(key)?;
            if address_claims_of(port)? {
                return Err(io::ErrorKind::AddrInUse.into());
            }
            Ok(PortClaim { _socket: held })
        }
    }
}

/// Whether a claim of one address of `port` is held in this network namespace: the abstract
/// names of Unix sockets are listed in `/proc/net/unix` with a leading `@`. Without `/proc`
/// (a sandbox that does not mount it) nothing can be seen, and the whole-port claim stands
/// alone: a server must still start there.
#[cfg(target_os = "linux")]
fn address_claims_of(port: u16) -> io::Result<bool> {
    let prefix = format!("@hearth-port-{port}-");
    let Ok(table) = std::fs::read_to_string("/proc/net/unix") else {
        return Ok(false);
    };
    Ok(table
        .lines()
        .filter_map(|line| line.split_whitespace().nth(7))
        .any(|path| path.starts_with(&prefix)))
}

#[cfg(not(target_os = "linux"))]
fn claim(key: ClaimKey) -> io::Result<PortClaim> {
    let open = |key: ClaimKey| {
        let path = std::env::temp_dir().join(format!("{}.lock", key.name()));
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
    };
    // The port's file is locked shared by each address of it and exclusively by a server on
    // every address, so that the two kinds exclude each other.
    let port = open(ClaimKey::Port(key.port()))?;
    match key {
        ClaimKey::Port(_) => {
            port.try_lock().map_err(io::Error::from)?;
            Ok(PortClaim { _files: vec![port] })
        }
        ClaimKey::Address(..) => {
            port.try_lock_shared().map_err(io::Error::from)?;
            let address = open(key)?;
            address.try_lock().map_err(io::Error::from)?;
            Ok(PortClaim {
                _files: vec![port, address],
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(last: u8, port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, last], port))
    }

    // The claims are names, not the ports themselves: the ports below are bound by no test.
    // Each test has its own, as tests run in parallel.

    #[test]
    fn an_address_is_claimed_once_until_released() {
        let claim = claim_address(at(1, 1)).expect("free");
        let error = claim_address(at(1, 1)).expect_err("already claimed");
        assert_eq!(error.kind(), io::ErrorKind::AddrInUse);
        assert_eq!(
            error.to_string(),
            "Address already in use: another Hearth server listens on 127.0.0.1:1 (or on \
             every address of port 1); stop it or choose another --listen"
        );
        drop(claim);
        claim_address(at(1, 1)).expect("released");
    }

    #[test]
    fn servers_on_one_port_and_different_addresses_run_side_by_side() {
        let claims: Vec<_> = (2..=4)
            .map(|last| claim_address(at(last, 2)).expect("each address is free"))
            .collect();
        assert_eq!(claims.len(), 3);
    }

    #[test]
    fn a_whole_port_and_one_of_its_addresses_exclude_each_other() {
        let one = claim_address(at(2, 3)).expect("free");
        let error = claim_port(3).expect_err("an address of the port is held");
        assert_eq!(error.kind(), io::ErrorKind::AddrInUse);
        assert!(error.to_string().contains("port 3"), "{error}");
        drop(one);
        let whole = claim_port(3).expect("released");
        let error = claim_address(at(5, 3)).expect_err("the whole port is held");
        assert_eq!(error.kind(), io::ErrorKind::AddrInUse);
        drop(whole);
        claim_address(at(5, 3)).expect("released");
    }

    #[test]
    fn the_unspecified_addresses_claim_the_whole_port() {
        assert_eq!(
            ClaimKey::of("0.0.0.0:8".parse().expect("an address")),
            ClaimKey::Port(8)
        );
        assert_eq!(
            ClaimKey::of("[::]:8".parse().expect("an address")),
            ClaimKey::Port(8)
        );
        let one = ClaimKey::of(at(2, 8));
        assert!(ClaimKey::Port(8).covers(one));
        assert!(!one.covers(ClaimKey::Port(8)));
        assert!(!ClaimKey::Port(9).covers(one));
    }
}
