//! Opening the tester's TCP connections.

use std::net::{IpAddr, SocketAddr};

use tokio::net::{TcpSocket, TcpStream};

/// A TCP connection to `address`, from `source` when given (several loopback source
/// addresses multiply the ephemeral ports available).
pub async fn open_tcp(address: &str, source: Option<IpAddr>) -> anyhow::Result<TcpStream> {
    let target = tokio::net::lookup_host(address)
        .await?
        .next()
        .ok_or_else(|| anyhow::anyhow!("{address} resolves to nothing"))?;
    let stream = match source {
        Some(ip) => {
            let socket = if ip.is_ipv4() {
                TcpSocket::new_v4()?
            } else {
                TcpSocket::new_v6()?
            };
            socket.bind(SocketAddr::new(ip, 0))?;
            socket.connect(target).await?
        }
        None => TcpStream::connect(target).await?,
    };
    stream.set_nodelay(true)?;
    Ok(stream)
}
