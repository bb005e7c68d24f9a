//! Listening sockets: one per shard on the same address (SO_REUSEPORT), so the kernel spreads
//! new connections over the shards without a shared accept queue.

use std::io;
use std::net::{SocketAddr, TcpListener};

use socket2::{Domain, Socket, Type};

/// Pending connections the kernel may hold for each listener.
const LISTEN_BACKLOG: i32 = 4096;

/// Binds `count` listeners to `address`. With port 0 the first one picks the port and the
/// others join it.
pub fn bind_listeners(address: SocketAddr, count: usize) -> io::Result<Vec<TcpListener>> {
    let mut listeners = Vec::with_capacity(count);
    let mut address = address;
    for _ in 0..count.max(1) {
        let socket = Socket::new(Domain::for_address(address), Type::STREAM, None)?;
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
