//! The WebTransport endpoint's certificate: the `--tls-cert` pair, or without it a
//! self-signed development certificate, made at start and made again on SIGHUP.
//!
//! A reload swaps only the TLS part of the endpoint's QUIC configuration (its transport
//! settings stay as the start made them): sessions already open keep the certificate they
//! were opened with, new ones get the new one. The certificate is made where the reload is
//! asked for (the signal's thread: files read, a key generated) and handed whole to the task
//! that owns the endpoint, which only installs it.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::mpsc;
use tracing::{info, warn};
use wtransport::quinn::crypto::rustls::QuicServerConfig;
use wtransport::{Endpoint, Identity, ServerConfig};

use crate::webtransport::{hex, WebTransportError, SELF_SIGNED_VALIDITY_DAYS};
use hearth_net::tls::TlsCerts;

/// Where the endpoint's certificate comes from.
#[derive(Clone)]
pub enum Source {
    /// `--tls-cert` and `--tls-key`, as last read (at start or by a successful reload).
    Files(Arc<TlsCerts>),
    /// A self-signed certificate for `localhost`, loopback and this listen address.
    SelfSigned(SocketAddr),
}

/// A certificate ready for the endpoint.
pub struct Certificate {
    /// TLS 1.3 with the certificate and key, announcing HTTP/3.
    pub(super) tls: rustls::ServerConfig,
    /// The SHA-256 of the leaf certificate, for `serverCertificateHashes`.
    pub sha256: [u8; 32],
    pub self_signed: bool,
}

impl Source {
    /// The certificate to present now: the pair in force, or a new self-signed one (a new
    /// key, valid for [`SELF_SIGNED_VALIDITY_DAYS`] from now).
    pub fn certificate(&self) -> Result<Certificate, WebTransportError> {
        match self {
            Source::Files(certs) => {
                let (tls, sha256) = certs.quic();
                Ok(Certificate {
                    tls,
                    sha256,
                    self_signed: false,
                })
            }
            Source::SelfSigned(address) => self_signed(*address),
        }
    }
}

fn self_signed(address: SocketAddr) -> Result<Certificate, WebTransportError> {
    let mut names = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    if !address.ip().is_unspecified() && !address.ip().is_loopback() {
        names.push(address.ip().to_string());
    }
    let identity = Identity::self_signed_builder()
        .subject_alt_names(names)
        .from_now_utc()
        .validity_days(SELF_SIGNED_VALIDITY_DAYS)
        .build()
        .map_err(|error| WebTransportError::SelfSigned(error.to_string()))?;
    let sha256 = identity
        .certificate_chain()
        .as_slice()
        .first()
        .map(|certificate| *certificate.hash().as_ref())
        .ok_or_else(|| WebTransportError::SelfSigned("no certificate".into()))?;
    Ok(Certificate {
        tls: wtransport::tls::server::build_default_tls_config(identity),
        sha256,
        self_signed: true,
    })
}

/// Asks the endpoint to present a new certificate. Held by the server (for SIGHUP); the
/// endpoint's task holds the other end, [`Reloads`].
#[derive(Clone)]
pub struct Reloader {
    source: Source,
    endpoint: mpsc::UnboundedSender<Certificate>,
}

/// The endpoint's end of a [`Reloader`].
pub struct Reloads(mpsc::UnboundedReceiver<Certificate>);

/// A reloader for the endpoint whose certificate comes from `source`.
pub fn reloader(source: Source) -> (Reloader, Reloads) {
    let (endpoint, reloads) = mpsc::unbounded_channel();
    (Reloader { source, endpoint }, Reloads(reloads))
}

impl Reloader {
    /// Makes the certificate anew (for `--tls-cert`: from the pair the TCP listeners just
    /// reloaded) and hands it to the endpoint, which logs its hash once it is in force. On an
    /// error the endpoint keeps the one it has.
    pub fn reload(&self) -> Result<(), WebTransportError> {
        let certificate = self.source.certificate()?;
        self.endpoint
            .send(certificate)
            .map_err(|_| WebTransportError::Stopped)
    }
}

impl Reloads {
    /// The next certificate to install; pending forever once the server dropped its reloader.
    pub async fn next(&mut self) -> Certificate {
        match self.0.recv().await {
            Some(certificate) => certificate,
            None => std::future::pending().await,
        }
    }
}

/// Installs `certificate` for the endpoint's new sessions: `template` (the endpoint's QUIC
/// configuration at start) with the new TLS configuration.
pub fn install(
    endpoint: &Endpoint<wtransport::endpoint::endpoint_side::Server>,
    template: &wtransport::quinn::ServerConfig,
    address: SocketAddr,
    certificate: Certificate,
) {
    let crypto = match QuicServerConfig::try_from(certificate.tls) {
        Ok(crypto) => crypto,
        Err(error) => {
            warn!(%error, "SIGHUP: WebTransport certificate not reloaded; the previous one stays in use");
            return;
        }
    };
    let mut quic = template.clone();
    quic.crypto = Arc::new(crypto);
    let config = ServerConfig::builder()
        .with_bind_address(address)
        .build_with_quic_config(quic);
    // Without a rebind the address is not used: the endpoint keeps its socket.
    if let Err(error) = endpoint.reload_config(config, false) {
        warn!(%error, "SIGHUP: WebTransport certificate not reloaded; the previous one stays in use");
        return;
    }
    info!(
        certificate_sha256 = %hex(&certificate.sha256),
        self_signed = certificate.self_signed,
        "SIGHUP: WebTransport certificate reloaded; new sessions use it (certificate sha-256 {})",
        hex(&certificate.sha256)
    );
}
