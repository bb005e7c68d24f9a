//! One Hearth server per TCP port.
//!
//! Every shard listens on the server's port with `SO_REUSEPORT`, and Linux lets any process of
//! the same user join that group: a second server started on the port would bind without an
//! error and the kernel would split new connections between the two (and their data). A
//! socket bound without `SO_REUSEPORT` would keep the other process out, but also the shards
//! themselves. So the port is claimed apart from the TCP sockets, under a name derived from it:
//!
//! - on Linux, an abstract Unix socket `hearth-port-<port>`: abstract names live in the network
//!   namespace, exactly like ports (two containers with their own networks each have their own
//!   port 8080, and their own name); the kernel drops the name when the process dies, however it
//!   dies, so no stale claim survives a crash;
//! - elsewhere, an advisory lock on `hearth-port-<port>.lock` in the temporary directory, which
//!   the system also releases when the process dies.
//!
//! The claim is by port, whatever the address: a server on `0.0.0.0:8080` and another on
//! `127.0.0.1:8080` would share loopback connections just the same.

use std::io;

/// Holds a port for this process until dropped.
#[derive(Debug)]
pub struct PortClaim {
    #[cfg(target_os = "linux")]
    _socket: std::os::unix::net::UnixDatagram,
    #[cfg(not(target_os = "linux"))]
    _file: std::fs::File,
}

/// Claims `port`. Fails with [`io::ErrorKind::AddrInUse`] while another Hearth process (or
/// another server in this one) holds it.
pub fn claim_port(port: u16) -> io::Result<PortClaim> {
    claim(port).map_err(|error| {
        if error.kind() == io::ErrorKind::AddrInUse || error.kind() == io::ErrorKind::WouldBlock {
            io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("Address already in use: another Hearth server listens on port {port}"),
            )
        } else {
            io::Error::new(
                error.kind(),
                format!("cannot claim port {port} for this server: {error}"),
            )
        }
    })
}

#[cfg(target_os = "linux")]
fn claim(port: u16) -> io::Result<PortClaim> {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixDatagram};

    let name = SocketAddr::from_abstract_name(format!("hearth-port-{port}"))?;
    Ok(PortClaim {
        _socket: UnixDatagram::bind_addr(&name)?,
    })
}

#[cfg(not(target_os = "linux"))]
fn claim(port: u16) -> io::Result<PortClaim> {
    let path = std::env::temp_dir().join(format!("hearth-port-{port}.lock"));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?;
    file.try_lock().map_err(io::Error::from)?;
    Ok(PortClaim { _file: file })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_is_claimed_once_until_released() {
        // A port no test binds: the claim is a name, not the port itself.
        let port = 1;
        let claim = claim_port(port).expect("free");
        let error = claim_port(port).expect_err("already claimed");
        assert_eq!(error.kind(), io::ErrorKind::AddrInUse);
        assert_eq!(
            error.to_string(),
            "Address already in use: another Hearth server listens on port 1"
        );
        drop(claim);
        claim_port(port).expect("released");
    }
}
