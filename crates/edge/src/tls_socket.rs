//! A WebSocket connection's socket under TLS, written by its [`Outbox`] like a plain one.
//!
//! The outbox counts a byte as sent once the kernel has it, and keeps everything else: that is
//! how it knows to wake the connection's task when the socket becomes writable, how the answer
//! budget counts a slow reader, and how the write timeout sees a stalled one. A TLS session
//! takes plaintext whole and holds the encrypted records until the kernel takes them, so this
//! socket reports plaintext as written only once the records carrying it have left, with one
//! exception that keeps the count simple: when the kernel refuses part of the records, every
//! byte but the last one taken is reported written, and that last byte is *owed* (it stays in
//! the outbox, which offers it again with the next write; it is skipped then, once the records
//! before it are out). The outbox is never empty while records wait, and what waits outside
//! its count is at most one session buffer ([`hearth_net::tls::MAX_TLS_BUFFER_BYTES`]).
//!
//! [`Outbox`]: crate::socket::Outbox

use std::cell::{Cell, RefCell};
use std::io::{self, IoSlice, Read, Write};
use std::rc::Rc;
use std::task::{ready, Context, Poll};

use rustls::ServerConnection;
use tokio::io::ReadBuf;
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

use crate::socket::{Accepted, Movable, Source, Transport};

pub struct TlsSocket {
    tcp: TcpStream,
    tls: RefCell<ServerConnection>,
    /// Plaintext bytes the session took whose records had not all left when they were taken:
    /// still in the outbox, skipped when offered again (0 or 1).
    owed: Cell<usize>,
}

impl Accepted for TlsStream<TcpStream> {
    type Shared = TlsSocket;

    fn into_shared(self) -> Rc<TlsSocket> {
        let (tcp, tls) = self.into_inner();
        Rc::new(TlsSocket::new(tcp, tls))
    }

    fn into_movable(self) -> io::Result<Movable> {
        let (tcp, tls) = self.into_inner();
        Ok(Movable::Tls(tcp.into_std()?, Box::new(tls)))
    }
}

/// A stream another core accepted, registered with this core's runtime.
pub enum Settled {
    Plain(Rc<TcpStream>),
    Tls(Rc<TlsSocket>),
}

impl Settled {
    /// Registers a stream another core accepted with this core's runtime.
    pub fn from_movable(stream: Movable) -> io::Result<Settled> {
        Ok(match stream {
            Movable::Plain(tcp) => Settled::Plain(Rc::new(TcpStream::from_std(tcp)?)),
            Movable::Tls(tcp, tls) => {
                Settled::Tls(Rc::new(TlsSocket::new(TcpStream::from_std(tcp)?, *tls)))
            }
        })
    }
}

impl TlsSocket {
    /// A socket whose session's buffer is bounded (the handshake set it).
    pub fn new(tcp: TcpStream, tls: ServerConnection) -> TlsSocket {
        TlsSocket {
            tcp,
            tls: RefCell::new(tls),
            owed: Cell::new(0),
        }
    }

    /// Hands the session's records to the kernel until none wait; `WouldBlock` when it
    /// refuses some.
    fn flush_records(&self, tls: &mut ServerConnection) -> io::Result<()> {
        while tls.wants_write() {
            if tls.write_tls(&mut Kernel(&self.tcp))? == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
        }
        Ok(())
    }
}

impl Transport for TlsSocket {
    fn try_write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let mut tls = self.tls.borrow_mut();
        self.flush_records(&mut tls)?;
        // Every record is out: the owed byte has left too.
        let owed = self.owed.replace(0);
        let taken = if owed == 0 {
            tls.writer().write_vectored(bufs)?
        } else {
            tls.writer().write_vectored(&skip(bufs, owed))?
        };
        if taken == 0 && owed == 0 {
            // The session's buffer was just emptied, so it cannot refuse plaintext.
            return Err(io::Error::other("the TLS session took no bytes"));
        }
        match self.flush_records(&mut tls) {
            Ok(()) => Ok(owed + taken),
            Err(error) if error.kind() == io::ErrorKind::WouldBlock && taken > 0 => {
                self.owed.set(1);
                match owed + taken - 1 {
                    0 => Err(error),
                    reported => Ok(reported),
                }
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => Ok(owed),
            Err(error) => Err(error),
        }
    }

    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.tcp.poll_write_ready(cx)
    }
}

impl Source for TlsSocket {
    fn poll_read_into(&self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        loop {
            {
                let mut tls = self.tls.borrow_mut();
                // Plaintext already decrypted comes first (the head reader may have left some).
                match tls.reader().read(buf.initialize_unfilled()) {
                    Ok(read) => {
                        // 0 after the client's close_notify: the end of the stream.
                        buf.advance(read);
                        return Poll::Ready(Ok(()));
                    }
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                    Err(error) => return Poll::Ready(Err(error)),
                }
            }
            ready!(self.tcp.poll_read_ready(cx))?;
            let mut tls = self.tls.borrow_mut();
            match tls.read_tls(&mut Kernel(&self.tcp)) {
                // The socket ended: the session now knows, and its reader says how on the
                // next turn (cleanly after a close_notify, `UnexpectedEof` otherwise).
                Ok(0) => {}
                Ok(_) => {
                    if let Err(error) = tls.process_new_packets() {
                        // The alert that tells the client why, as far as the kernel takes it.
                        let _ = self.flush_records(&mut tls);
                        return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, error)));
                    }
                    // Records the session answers with (a key update) leave with the next
                    // write, at the latest the next ping; the outbox orders none of them.
                    if tls.wants_write() {
                        let _ = self.flush_records(&mut tls);
                    }
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                Err(error) => return Poll::Ready(Err(error)),
            }
        }
    }
}

impl Drop for TlsSocket {
    /// Tells the client the stream ends here (a close_notify), if the kernel takes it now.
    fn drop(&mut self) {
        let tls = self.tls.get_mut();
        tls.send_close_notify();
        while tls.wants_write() {
            match tls.write_tls(&mut Kernel(&self.tcp)) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    }
}

/// `bufs` without their first `count` bytes.
fn skip<'a>(bufs: &'a [IoSlice<'a>], mut count: usize) -> Vec<IoSlice<'a>> {
    let mut rest = Vec::with_capacity(bufs.len());
    for buf in bufs {
        if count >= buf.len() {
            count -= buf.len();
        } else {
            rest.push(IoSlice::new(&buf[count..]));
            count = 0;
        }
    }
    rest
}

/// The non-blocking socket as rustls' reader and writer see it.
struct Kernel<'a>(&'a TcpStream);

impl Read for Kernel<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.try_read(buf)
    }
}

impl Write for Kernel<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write(buf)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.0.try_write_vectored(bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::socket::{Outbox, Sent, SharedStream};
    use bytes::Bytes;
    use hearth_net::tls::{handshake, TlsCerts};
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::client::TlsStream as ClientStream;

    /// The test certificates of the TLS crate (`crates/net/testdata/tls`).
    fn testdata(name: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../net/testdata/tls")
            .join(name)
    }

    /// A TLS connection over loopback: the client's stream and the server's socket.
    async fn connected() -> (ClientStream<TcpStream>, Rc<TlsSocket>) {
        let certs = TlsCerts::load(&testdata("server.pem"), &testdata("server-key.pem"))
            .expect("test certificate");
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_file(testdata("ca.pem")).expect("test CA"))
            .expect("a root");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let client_config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocols")
            .with_root_certificates(roots)
            .with_no_client_auth();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address");
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client_config));
        let client = async {
            let tcp = TcpStream::connect(address).await.expect("connect");
            let name = ServerName::try_from("localhost").expect("a name");
            connector
                .connect(name, tcp)
                .await
                .expect("client handshake")
        };
        let server = async {
            let (tcp, _) = listener.accept().await.expect("accept");
            handshake(&certs, tcp).await.expect("server handshake")
        };
        let (client, server) = tokio::join!(client, server);
        (client, server.into_shared())
    }

    #[tokio::test]
    async fn a_full_socket_keeps_the_bytes_counted_and_in_order() {
        let (mut client, socket) = connected().await;
        let outbox = Outbox::new(socket.clone(), None);
        // Far more than the kernel's buffers hold while the client reads nothing.
        let items: Vec<Bytes> = (0..256u32)
            .map(|index| Bytes::from(vec![(index % 251) as u8; 64 * 1024 + index as usize]))
            .collect();
        let total: usize = items.iter().map(Bytes::len).sum();
        assert_eq!(outbox.send(items.clone()), Sent::Pending);
        assert!(
            outbox.bytes() > total / 2,
            "what the kernel refused stays in the outbox: {} of {total}",
            outbox.bytes()
        );
        let reader = tokio::spawn(async move {
            let mut received = vec![0u8; total];
            client.read_exact(&mut received).await.expect("every byte");
            received
        });
        std::future::poll_fn(|cx| outbox.poll_drain(cx))
            .await
            .expect("drained");
        assert_eq!(outbox.bytes(), 0);
        let received = reader.await.expect("the reader");
        assert!(
            received == items.concat(),
            "the bytes arrive once, in order"
        );
    }

    #[tokio::test]
    async fn the_session_holds_at_most_its_buffer_for_the_kernel() {
        let (_client, socket) = connected().await;
        let outbox = Outbox::new(socket.clone(), None);
        let item = Bytes::from(vec![7u8; 1024 * 1024]);
        while outbox.send([item.clone()]) != Sent::Pending {}
        // The kernel takes nothing more: the session may take plaintext only up to its limit.
        let taken = socket
            .tls
            .borrow_mut()
            .writer()
            .write(&vec![0u8; 4 * hearth_net::tls::MAX_TLS_BUFFER_BYTES])
            .expect("a write");
        assert!(
            taken <= hearth_net::tls::MAX_TLS_BUFFER_BYTES,
            "took {taken}"
        );
    }

    #[tokio::test]
    async fn the_library_reads_what_the_client_sent() {
        let (mut client, socket) = connected().await;
        let outbox = Rc::new(Outbox::new(socket.clone(), None));
        let mut shared = SharedStream::new(socket, outbox);
        client.write_all(b"hello, ").await.expect("write");
        client.write_all(b"world").await.expect("write");
        let mut text = vec![0u8; 12];
        shared.read_exact(&mut text).await.expect("read");
        assert_eq!(text, b"hello, world");
        shared.write_all(b"back").await.expect("answer");
        let mut answer = [0u8; 4];
        client
            .read_exact(&mut answer)
            .await
            .expect("read the answer");
        assert_eq!(&answer, b"back");
        drop(shared);
        let mut rest = Vec::new();
        let read = client.read_to_end(&mut rest).await.expect("a clean end");
        assert_eq!(read, 0, "the server said close_notify");
    }
}
