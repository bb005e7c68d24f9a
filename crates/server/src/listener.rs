//! Listening sockets: one per shard and address on the same port (SO_REUSEPORT), so the kernel
//! spreads new connections over the shards without a shared accept queue.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, ToSocketAddrs};

use socket2::{Domain, Socket, Type};
use tracing::warn;

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

/// Binds `shards` listeners for each address. With port 0 the first bind picks the port and
/// every other one joins it. An address after the first that cannot be bound (for example `::1`
/// on a host without IPv6) is skipped with a warning. Returns the listeners of each shard and
/// the addresses actually bound.
pub fn bind_listeners(
    addresses: &[SocketAddr],
    shards: usize,
) -> io::Result<(Vec<Vec<TcpListener>>, Vec<SocketAddr>)> {
    let mut per_shard: Vec<Vec<TcpListener>> = (0..shards.max(1)).map(|_| Vec::new()).collect();
    let mut bound = Vec::new();
    let mut port = None;
    for (index, address) in addresses.iter().enumerate() {
        let mut address = *address;
        if let Some(port) = port {
            if address.port() == 0 {
                address.set_port(port);
            }
        }
        match bind_shard_listeners(address, per_shard.len()) {
            Ok(listeners) => {
                let actual = listeners[0].local_addr()?;
                port.get_or_insert(actual.port());
                bound.push(actual);
                for (shard, listener) in per_shard.iter_mut().zip(listeners) {
                    shard.push(listener);
                }
            }
            Err(error) if index > 0 => warn!(%address, %error, "skipping listen address"),
            Err(error) => return Err(error),
        }
    }
    Ok((per_shard, bound))
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
        let (shards, bound) = bind_listeners(&addresses, 2).expect("bind");
        assert_eq!(shards.len(), 2);
        let port = bound[0].port();
        assert_ne!(port, 0);
        for listener in shards.iter().flatten() {
            assert_eq!(listener.local_addr().expect("bound").port(), port);
        }
    }
}
