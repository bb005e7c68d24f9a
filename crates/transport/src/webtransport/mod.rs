//! Volatile traffic over WebTransport (`--webtransport-listen`): HTTP/3 sessions on a UDP port,
//! accepted by the first shard and each served by the shard with the fewest as its edge
//! (`wtransport`, quinn underneath).
//!
//! A session is a connection like a WebSocket one: the same namespace selection (`?ns=` in
//! the session's URL, else the host), the same Firebase requests (the client's `auth`,
//! listens and writes, checked by the owner against the rules), the same owner machinery
//! (volatile ticks, held replies, other cores' databases through `link`). Only its bytes
//! differ: pushes leave as datagrams, everything else on one reliable stream (`codec`).
//!
//! - `codec`: the datagram and line formats, and the session's rate bucket (pure);
//! - `certificate`: the endpoint's certificate, made at start and again on SIGHUP;
//! - `quic`: the UDP socket's buffers and the QUIC transport settings;
//! - `spread`: handing each new connection to a shard;
//! - `session`: one session, from its request to its end.

pub mod certificate;
pub mod codec;
mod outlet;
pub mod quic;
mod session;
pub mod spread;

use std::net::{SocketAddr, UdpSocket};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tracing::{info, warn};
use wtransport::{Endpoint, ServerConfig};

use crate::front::Front;
use crate::webtransport::certificate::{Reloader, Reloads, Source};
use crate::webtransport::spread::{Handed, Spread};
use hearth_net::tls::{TlsCerts, TlsError};

/// The most WebTransport sessions open at once; more are refused (HTTP 429).
pub const MAX_WEBTRANSPORT_SESSIONS: usize = 10_000;

/// The most listens a session holds at once: a session asking for more is closed.
pub const MAX_LISTENS_PER_SESSION: usize = 256;

/// The largest datagram the server sends, whatever the path would allow: below every IPv6
/// path's minimum MTU after QUIC's overhead, so datagrams are never fragmented away. A push
/// larger than this (or than the session's own limit) goes on the stream.
pub const MAX_DATAGRAM_BYTES: usize = 1_150;

/// Datagrams a session may send per second, and in one burst; past them they are dropped
/// (a volatile write is only worth its newest value anyway).
pub const MAX_DATAGRAMS_PER_SECOND: u32 = 240;
pub const MAX_DATAGRAM_BURST: u32 = 480;

/// The longest message on a session's stream. Volatile data is small; larger writes belong on
/// the SDK's WebSocket.
pub const MAX_STREAM_MESSAGE_BYTES: usize = 64 * 1024;

/// The most bytes a session's stream may hold unwritten in the outlet (in QUIC's hands or
/// waiting for them) before the outlet takes no more: further bytes then wait in the
/// connection's outbox, where the answer budget, the per-connection limit and the write
/// timeout count them, as for a WebSocket whose kernel buffer is full. A session holds at most
/// twice this plus one write outside the budget (a batch being written, and the next).
pub const MAX_STREAM_BACKLOG_BYTES: usize = 256 * 1024;

/// How long a new session may take to open its stream.
pub const STREAM_OPEN_TIMEOUT: Duration = Duration::from_secs(10);

/// Validity of the self-signed development certificate: browsers pin a certificate by its
/// hash (`serverCertificateHashes`) only when it is valid for less than 14 days.
pub const SELF_SIGNED_VALIDITY_DAYS: u32 = 13;

/// Why the WebTransport endpoint could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum WebTransportError {
    #[error("cannot bind the WebTransport UDP port {address}: {source}")]
    Bind {
        address: SocketAddr,
        source: std::io::Error,
    },
    #[error("WebTransport certificate: {0}")]
    Tls(#[from] TlsError),
    #[error("cannot make a self-signed WebTransport certificate: {0}")]
    SelfSigned(String),
    #[error("the WebTransport endpoint has stopped")]
    Stopped,
    #[error("WebTransport: {0}")]
    Transport(#[from] quic::InvalidIdleTimeout),
}

/// A bound WebTransport endpoint, ready to be served by a shard.
pub struct Prepared {
    config: ServerConfig,
    /// Where it listens.
    pub address: SocketAddr,
    /// The SHA-256 of its certificate, for `serverCertificateHashes`.
    pub certificate_sha256: [u8; 32],
    /// Whether the certificate is the self-signed development one.
    pub self_signed: bool,
    /// Gives the endpoint a new certificate (SIGHUP).
    pub reloader: Reloader,
    reloads: Reloads,
}

/// Binds `listen` and prepares the endpoint's TLS: the `--tls-cert` pair when there is one,
/// else a self-signed ECDSA P-256 certificate for `localhost` and the listen address, valid
/// for [`SELF_SIGNED_VALIDITY_DAYS`].
pub fn prepare(
    listen: SocketAddr,
    tls: Option<&Arc<TlsCerts>>,
    idle_timeout: Duration,
    keep_alive: Duration,
) -> Result<Prepared, WebTransportError> {
    let socket = UdpSocket::bind(listen).map_err(|source| WebTransportError::Bind {
        address: listen,
        source,
    })?;
    let address = socket
        .local_addr()
        .map_err(|source| WebTransportError::Bind {
            address: listen,
            source,
        })?;
    quic::enlarge_buffers(&socket).map_err(|source| WebTransportError::Bind {
        address: listen,
        source,
    })?;
    let source = match tls {
        Some(certs) => Source::Files(certs.clone()),
        None => Source::SelfSigned(address),
    };
    let certificate = source.certificate()?;
    let (certificate_sha256, self_signed) = (certificate.sha256, certificate.self_signed);
    let (reloader, reloads) = certificate::reloader(source);
    let mut config = ServerConfig::builder()
        .with_bind_socket(socket)
        .with_custom_tls(certificate.tls)
        .build();
    // Keep-alive, idle timeout and the datagram buffers; a reload keeps them (`serve`).
    config
        .quic_config_mut()
        .transport_config(Arc::new(quic::transport_config(idle_timeout, keep_alive)?));
    Ok(Prepared {
        config,
        address,
        certificate_sha256,
        self_signed,
        reloader,
        reloads,
    })
}

/// Lowercase hex, as the log and the clients' options show a certificate hash.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Accepts connections until the server stops, handing each to a shard (see `spread`).
pub async fn serve(front: Rc<Front>, prepared: Prepared, spread: Spread) {
    let Prepared {
        config,
        address,
        certificate_sha256,
        self_signed,
        reloader: _,
        mut reloads,
    } = prepared;
    // What a reload keeps: everything but the certificate.
    let template = config.quic_config().clone();
    let endpoint = match Endpoint::server(config) {
        Ok(endpoint) => endpoint,
        Err(error) => {
            warn!(%error, "cannot start the WebTransport endpoint");
            return;
        }
    };
    info!(
        %address,
        certificate_sha256 = %hex(&certificate_sha256),
        self_signed,
        "WebTransport listening on {address} (certificate sha-256 {})",
        hex(&certificate_sha256)
    );
    let mut shutdown = front.shutdown();
    loop {
        let incoming = tokio::select! {
            _ = shutdown.changed() => break,
            incoming = endpoint.accept() => incoming,
            certificate = reloads.next() => {
                certificate::install(&endpoint, &template, address, certificate);
                continue;
            }
        };
        spread.hand(incoming);
    }
    // The sessions end themselves on shutdown (closing their connections); give their close
    // frames a moment to leave.
    let _ = tokio::time::timeout(Duration::from_secs(1), endpoint.wait_idle()).await;
}

/// Serves the sessions handed to this shard, each by its own task, until the server stops.
pub async fn serve_handed(front: Rc<Front>, mut handed: mpsc::UnboundedReceiver<Handed>) {
    let mut shutdown = front.shutdown();
    loop {
        let Handed { incoming, slot } = tokio::select! {
            _ = shutdown.changed() => break,
            handed = handed.recv() => match handed {
                Some(handed) => handed,
                None => break,
            },
        };
        tokio::task::spawn_local(session::serve_session(front.clone(), incoming, slot));
    }
}
