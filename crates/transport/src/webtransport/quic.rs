//! The endpoint's UDP socket buffers and QUIC transport settings, sized for volatile pushes.
//!
//! A push is worth only until the next tick brings a newer one. Two defaults work against
//! that under load (BENCHMARKS §14, 500 connections): the kernel's default socket buffers
//! (`net.core.rmem_default`, 208 KiB on most Linux systems) overflow when the shard that reads
//! the socket is busy for a moment, and every lost packet shrinks the congestion window; quinn
//! then keeps what it may not send yet in a per-connection datagram buffer of 1 MiB, where
//! positions wait for seconds behind older ones. So the socket asks for large buffers, and
//! the datagram buffer holds about one tick of a session's pushes: when a newer one comes
//! while the window is closed, quinn drops the oldest (`Connection::send_datagram`), which
//! is what a volatile value wants.

use std::io;
use std::net::UdpSocket;
use std::time::Duration;

use socket2::SockRef;
use tracing::{info, warn};
use wtransport::quinn::{IdleTimeout, TransportConfig};

use crate::webtransport::MAX_DATAGRAM_BYTES;

/// The UDP socket buffers the endpoint asks for, each way. Linux caps a request at
/// `net.core.rmem_max` / `net.core.wmem_max` (208 KiB by default; raise them with sysctl to get
/// this much), and reports twice the granted size (the kernel's bookkeeping overhead). At
/// 10,000 client writes a second this holds about half a second of them.
pub const UDP_SOCKET_BUFFER_BYTES: usize = 8 * 1024 * 1024;

/// What quinn accounts for each queued datagram besides its payload (`Bytes` and its length).
const DATAGRAM_BOOKKEEPING_BYTES: usize = 64;

/// The datagrams a session may have queued in quinn, not yet sent: about one tick of pushes
/// (one per listened room or path that changed, a cursor room's push is under 1 KiB), and at
/// least three of the largest. A newer datagram that finds it full pushes out the oldest.
pub const DATAGRAM_SEND_BUFFER_BYTES: usize = 3 * (MAX_DATAGRAM_BYTES + DATAGRAM_BOOKKEEPING_BYTES);

/// The client's datagrams (writes) quinn keeps for a session until the session reads them:
/// more than the rate bucket's burst of cursor writes; past it the oldest are dropped.
pub const DATAGRAM_RECEIVE_BUFFER_BYTES: usize = 64 * 1024;

/// The socket buffers the kernel granted, as `getsockopt` reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketBuffers {
    pub receive: usize,
    pub send: usize,
}

/// Asks for [`UDP_SOCKET_BUFFER_BYTES`] each way on `socket` and logs what it got (a warning
/// when the kernel's limits granted less).
pub fn enlarge_buffers(socket: &UdpSocket) -> io::Result<SocketBuffers> {
    let socket = SockRef::from(socket);
    // A refusal is not fatal: the socket works with what it has.
    let _ = socket.set_recv_buffer_size(UDP_SOCKET_BUFFER_BYTES);
    let _ = socket.set_send_buffer_size(UDP_SOCKET_BUFFER_BYTES);
    let granted = SocketBuffers {
        receive: socket.recv_buffer_size()?,
        send: socket.send_buffer_size()?,
    };
    if granted_less(UDP_SOCKET_BUFFER_BYTES, granted.receive)
        || granted_less(UDP_SOCKET_BUFFER_BYTES, granted.send)
    {
        warn!(
            requested = UDP_SOCKET_BUFFER_BYTES,
            receive = granted.receive,
            send = granted.send,
            "the WebTransport UDP socket got smaller buffers than it asked for \
             (raise net.core.rmem_max and net.core.wmem_max to {UDP_SOCKET_BUFFER_BYTES}): \
             packets are lost sooner under load"
        );
    } else {
        info!(
            receive = granted.receive,
            send = granted.send,
            "WebTransport UDP socket buffers"
        );
    }
    Ok(granted)
}

/// Whether a buffer size `getsockopt` reports is less than `requested`: Linux reports twice
/// what it granted.
pub fn granted_less(requested: usize, reported: usize) -> bool {
    let factor = if cfg!(target_os = "linux") { 2 } else { 1 };
    reported < requested.saturating_mul(factor)
}

/// The QUIC transport settings of every session: the idle timeout and keep-alive of the
/// server's other connections, and the datagram buffers above.
pub fn transport_config(
    idle_timeout: Duration,
    keep_alive: Duration,
) -> Result<TransportConfig, InvalidIdleTimeout> {
    let mut config = TransportConfig::default();
    config
        .max_idle_timeout(Some(
            IdleTimeout::try_from(idle_timeout).map_err(|_| InvalidIdleTimeout)?,
        ))
        .keep_alive_interval(Some(keep_alive))
        .datagram_send_buffer_size(DATAGRAM_SEND_BUFFER_BYTES)
        .datagram_receive_buffer_size(Some(DATAGRAM_RECEIVE_BUFFER_BYTES));
    Ok(config)
}

/// An idle timeout QUIC cannot express (over 2^62 ms).
#[derive(Debug, thiserror::Error)]
#[error("idle timeout out of range")]
pub struct InvalidIdleTimeout;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_linux_doubling_counts_as_granted() {
        if cfg!(target_os = "linux") {
            assert!(!granted_less(4096, 8192));
            assert!(granted_less(4096, 4096), "capped at half");
        } else {
            assert!(!granted_less(4096, 4096));
        }
        assert!(
            granted_less(UDP_SOCKET_BUFFER_BYTES, 425_984),
            "the default cap"
        );
    }

    #[test]
    fn a_socket_reports_what_it_was_granted() -> io::Result<()> {
        let socket = UdpSocket::bind("127.0.0.1:0")?;
        let before = SockRef::from(&socket).recv_buffer_size()?;
        let granted = enlarge_buffers(&socket)?;
        assert_eq!(granted.receive, SockRef::from(&socket).recv_buffer_size()?);
        assert!(granted.receive >= before, "never smaller than the default");
        Ok(())
    }

    #[test]
    fn the_largest_datagram_fits_the_send_buffer_with_room_for_newer_ones() {
        const {
            assert!(DATAGRAM_SEND_BUFFER_BYTES >= 2 * MAX_DATAGRAM_BYTES + 64);
            assert!(DATAGRAM_SEND_BUFFER_BYTES <= 16 * 1024);
        }
        assert!(transport_config(Duration::from_secs(60), Duration::from_secs(20)).is_ok());
    }
}
