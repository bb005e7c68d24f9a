//! Listening sockets: one per shard and address on the same port (SO_REUSEPORT), so the kernel
//! spreads new connections over the shards without a shared accept queue.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, ToSocketAddrs};

use socket2::{Domain, Socket, Type};
use tracing::warn;

use crate::port_claim::{claim_address, ClaimKey, PortClaim};

/// An accepted stream on its way to another core: out of this core's runtime, with its TLS
/// session (and the bytes that session already read) when it has one.
pub enum Movable {
    Plain(std::net::TcpStream),
    Tls(std::net::TcpStream, Box<rustls::ServerConnection>),
}

/// Pending connections the kernel may hold for each listener.
const LISTEN_BACKLOG: i32 = 4096;

/// Turns `host:port` into the addresses to bind. `localhost` means both loopback addresses,
/// whatever the hosts file says, because clients resolve it either way.
pub fn resolve_listen(text: &str) -> io::Result<Vec<SocketAddr>> {
    if let Some(port) = text.strip_prefix("localhost:") {
        let port: u16 = port
            .parse()
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "invalid port"))?;
        return Ok(vec![
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port),
            SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), port),
        ]);
    }
    let mut addresses: Vec<SocketAddr> = text.to_socket_addrs()?.collect();
    addresses.dedup();
    if addresses.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the address resolves to nothing",
        ));
    }
    Ok(addresses)
}

/// The listeners of a server.
#[derive(Debug)]
pub struct Bound {
    /// Each shard's listeners, one per address.
    pub per_shard: Vec<Vec<TcpListener>>,
    /// The addresses actually bound.
    pub addresses: Vec<SocketAddr>,
    /// The addresses this process holds (see `port_claim`); released when dropped.
    pub claims: Vec<PortClaim>,
}

/// Binds `shards` listeners for each address. With port 0 the first bind picks the port and
/// every other one joins it. An address after the first that cannot be bound (for example `::1`
/// on a host without IPv6) is skipped with a warning. A port that another Hearth server holds
/// Claims `address` unless this process already holds it, or its whole port.
fn claim_once(
    claims: &mut Vec<PortClaim>,
    claimed: &mut Vec<ClaimKey>,
    address: SocketAddr,
) -> io::Result<()> {
    let key = ClaimKey::of(address);
    if claimed.iter().any(|held| held.covers(key)) {
        return Ok(());
    }
    claims.push(claim_address(address)?);
    claimed.push(key);
    Ok(())
}

/// is refused before any listener joins it.
pub fn bind_listeners(addresses: &[SocketAddr], shards: usize) -> io::Result<Bound> {
    let mut bound = Bound {
        per_shard: (0..shards.max(1)).map(|_| Vec::new()).collect(),
        addresses: Vec::new(),
        claims: Vec::new(),
    };
    let mut claimed = Vec::new();
    let mut port = None;
    for (index, address) in addresses.iter().enumerate() {
        let mut address = *address;
        if let Some(port) = port {
            if address.port() == 0 {
                address.set_port(port);
            }
        }
        // A port chosen by the kernel is claimed once it is known: it was free, so no other
        // server can be on it.
        if address.port() != 0 {
            claim_once(&mut bound.claims, &mut claimed, address)?;
        }
        match bind_shard_listeners(address, bound.per_shard.len()) {
            Ok(listeners) => {
                let actual = listeners[0].local_addr()?;
                claim_once(&mut bound.claims, &mut claimed, actual)?;
                port.get_or_insert(actual.port());
                bound.addresses.push(actual);
                for (shard, listener) in bound.per_shard.iter_mut().zip(listeners) {
                    shard.push(listener);
                }
            }
            Err(error) if index > 0 => warn!(%address, %error, "skipping listen address"),
            Err(error) => return Err(error),
        }
    }
    Ok(bound)
}

fn bind_shard_listeners(address: SocketAddr, count: usize) -> io::Result<Vec<TcpListener>> {
    let mut listeners = Vec::with_capacity(count);
    let mut address = address;
    for _ in 0..count {
        let socket = Socket::new(Domain::for_address(address), Type::STREAM, None)?;
        if address.is_ipv6() {
            socket.set_only_v6(true)?;
        }
        socket.set_reuse_address(true)?;
        socket.set_reuse_port(true)?;
        socket.set_nonblocking(true)?;
        socket.bind(&address.into())?;
        socket.listen(LISTEN_BACKLOG)?;
        let listener: TcpListener = socket.into();
        address = listener.local_addr()?;
        listeners.push(listener);
    }
    Ok(listeners)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn localhost_means_both_loopbacks() {
        let addresses = resolve_listen("localhost:9000").expect("valid");
        assert_eq!(addresses.len(), 2);
        assert!(addresses
            .iter()
            .all(|a| a.ip().is_loopback() && a.port() == 9000));
        assert_eq!(
            resolve_listen("127.0.0.1:0").expect("valid"),
            vec!["127.0.0.1:0".parse::<SocketAddr>().expect("valid")]
        );
        assert!(resolve_listen("localhost:x").is_err());
    }

    #[test]
    fn port_zero_is_shared_by_all_shards_and_addresses() {
        let addresses = resolve_listen("localhost:0").expect("valid");
        let bound = bind_listeners(&addresses, 2).expect("bind");
        assert_eq!(bound.per_shard.len(), 2);
        let port = bound.addresses[0].port();
        assert_ne!(port, 0);
        for listener in bound.per_shard.iter().flatten() {
            assert_eq!(listener.local_addr().expect("bound").port(), port);
        }
    }

    #[test]
    fn a_port_held_by_another_server_is_refused() {
        let addresses = resolve_listen("127.0.0.1:0").expect("valid");
        let first = bind_listeners(&addresses, 2).expect("bind");
        let again = resolve_listen(&first.addresses[0].to_string()).expect("valid");
        let error = bind_listeners(&again, 2).expect_err("the port is held");
        assert_eq!(error.kind(), io::ErrorKind::AddrInUse);
        assert_eq!(
            error.to_string(),
            format!(
                "Address already in use: another Hearth server listens on {} (or on every \
                 address of port {}); stop it or choose another --listen",
                first.addresses[0],
                first.addresses[0].port()
            )
        );
    }
}
