//! Opening the tester's TCP connections.

use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr};
use std::ops::RangeInclusive;

use tokio::net::{TcpSocket, TcpStream};

/// Random ports tried before a connection from a source address gives up.
const MAX_PORT_TRIES: usize = 256;

/// The ephemeral ports when `/proc` does not say (Linux's default).
const DEFAULT_PORTS: RangeInclusive<u16> = 32768..=60999;

/// A TCP connection to `address`, from `source` when given (several loopback source
/// addresses multiply the ephemeral ports available).
pub async fn open_tcp(address: &str, source: Option<IpAddr>) -> anyhow::Result<TcpStream> {
    let target = tokio::net::lookup_host(address)
        .await?
        .next()
        .ok_or_else(|| anyhow::anyhow!("{address} resolves to nothing"))?;
    let stream = match source {
        Some(ip) => bound_to(ip)?.connect(target).await?,
        None => TcpStream::connect(target).await?,
    };
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// A socket bound to `ip` and a port this process picks. A `bind` to port 0 has the kernel
/// search the ephemeral range for a port no other socket of that address holds, which grows
/// with the sockets already bound: with 18,000 connections from one source address it took
/// 95 % of a tester's time (a profile at 75,000 connections through HAProxy:
/// `inet_bhash2_conflict`, `inet_bind2_bucket_find`), and the testers, not the servers, fell
/// behind. A `bind` to a given port looks at that port only; a port taken (a live
/// connection, one in TIME_WAIT, a listener) moves on to another. Random rather than in
/// turn: the ports an earlier run left in TIME_WAIT lie in long runs.
fn bound_to(ip: IpAddr) -> anyhow::Result<TcpSocket> {
    let ports = ephemeral_ports();
    for _ in 0..MAX_PORT_TRIES {
        let port = fastrand::u16(ports.clone());
        let socket = if ip.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        match socket.bind(SocketAddr::new(ip, port)) {
            Ok(()) => return Ok(socket),
            Err(error) if error.kind() == ErrorKind::AddrInUse => continue,
            Err(error) => return Err(error.into()),
        }
    }
    Err(anyhow::anyhow!(
        "no free source port on {ip} in {MAX_PORT_TRIES} tries (every one in use)"
    ))
}

/// The kernel's ephemeral port range (`net.ipv4.ip_local_port_range`): ports that no
/// server on the machine is told to listen on.
fn ephemeral_ports() -> RangeInclusive<u16> {
    thread_local! {
        static PORTS: RangeInclusive<u16> = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|text| {
                let mut bounds = text.split_whitespace().map(|n| n.parse::<u16>().ok());
                Some(bounds.next()??..=bounds.next()??)
            })
            .filter(|ports| !ports.is_empty())
            .unwrap_or(DEFAULT_PORTS);
    }
    PORTS.with(Clone::clone)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_ports_are_in_the_ephemeral_range_and_a_taken_one_is_skipped() -> anyhow::Result<()> {
        let ip = IpAddr::from([127, 0, 0, 1]);
        let ports = ephemeral_ports();
        let mut held = Vec::new();
        for _ in 0..200 {
            let socket = bound_to(ip)?;
            let port = socket.local_addr()?.port();
            assert!(ports.contains(&port));
            assert!(
                held.iter().all(|(other, _)| *other != port),
                "a port this process holds is not given again"
            );
            held.push((port, socket));
        }
        Ok(())
    }
}
