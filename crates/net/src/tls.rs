//! TLS on the realtime port (`--tls-cert`, `--tls-key`): the certificate and key files, read
//! at start and again on request (the command reloads them on SIGHUP), and the handshake of a
//! new connection.
//!
//! Every handshake reads the configuration in force when it starts, so a reload changes what
//! new connections see and leaves the ones already open alone. A reload that fails keeps the
//! previous certificate: a half-renewed pair of files must not take the server off the air.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// How long a client may take from its connection to the end of the TLS handshake. A client
/// that sends nothing, or stops halfway, is dropped after this, like one that never sends a
/// request head (`http_head::HEAD_TIMEOUT`, which counts from the end of the handshake).
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The most encrypted bytes one connection's TLS session holds for the kernel (rustls' buffer
/// limit, set here for every connection). A WebSocket's outbox keeps what does not fit, counted
/// there (`edge/tls_socket.rs`); an HTTP answer waits in hyper, counted by its `WriteGuard`.
/// Bytes in this buffer have left those counts: at most this much per connection.
pub const MAX_TLS_BUFFER_BYTES: usize = 64 * 1024;

/// The first byte of every TLS connection: a handshake record.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// Why the certificate or key could not be used. Each names the file to look at.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read the TLS certificate file {}: {reason}", file.display())]
    CertFile { file: PathBuf, reason: String },
    #[error("the TLS certificate file {} holds no certificate (expected PEM blocks `BEGIN CERTIFICATE`)", file.display())]
    NoCertificate { file: PathBuf },
    #[error("cannot read the TLS key file {}: {reason}", file.display())]
    KeyFile { file: PathBuf, reason: String },
    #[error("the TLS key file {} holds no private key (expected a PEM block `BEGIN PRIVATE KEY`, `BEGIN RSA PRIVATE KEY` or `BEGIN EC PRIVATE KEY`)", file.display())]
    NoKey { file: PathBuf },
    #[error("the TLS key in {} cannot be used with the certificate in {}: {reason}", key.display(), cert.display())]
    Mismatch {
        cert: PathBuf,
        key: PathBuf,
        reason: String,
    },
}

/// The certificate a server presents, and the files it came from.
pub struct TlsCerts {
    cert: PathBuf,
    key: PathBuf,
    /// Read once per handshake; replaced whole by a reload.
    current: RwLock<Arc<Loaded>>,
}

/// One reading of the pair, for both kinds of listener: the TCP ports and the WebTransport
/// endpoint present the same certificate after a reload, never one each.
struct Loaded {
    tcp: Arc<ServerConfig>,
    quic: ServerConfig,
    leaf_sha256: [u8; 32],
}

impl fmt::Debug for TlsCerts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsCerts")
            .field("cert", &self.cert)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl TlsCerts {
    /// Reads the certificate chain from `cert` and the private key from `key` (both PEM) and
    /// checks that they belong together.
    pub fn load(cert: &Path, key: &Path) -> Result<TlsCerts, TlsError> {
        let loaded = Loaded::read(cert, key)?;
        Ok(TlsCerts {
            cert: cert.to_owned(),
            key: key.to_owned(),
            current: RwLock::new(Arc::new(loaded)),
        })
    }

    /// Reads both files again. New handshakes use them from now on (and so does the
    /// WebTransport endpoint once given [`TlsCerts::quic`] again); connections already open
    /// keep theirs. On an error nothing changes.
    pub fn reload(&self) -> Result<(), TlsError> {
        let loaded = Arc::new(Loaded::read(&self.cert, &self.key)?);
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = loaded;
        Ok(())
    }

    pub fn cert_file(&self) -> &Path {
        &self.cert
    }

    pub fn key_file(&self) -> &Path {
        &self.key
    }

    /// The configuration of the WebTransport endpoint (`--webtransport-listen`), from the
    /// pair in force: the same certificate and key, for TLS 1.3 (QUIC has no other) and
    /// HTTP/3; and the SHA-256 of the server's own certificate (the chain's first), as
    /// browsers pin it (`serverCertificateHashes`).
    pub fn quic(&self) -> (ServerConfig, [u8; 32]) {
        let loaded = self.loaded();
        (loaded.quic.clone(), loaded.leaf_sha256)
    }

    fn loaded(&self) -> Arc<Loaded> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.loaded().tcp.clone())
    }
}

impl Loaded {
    fn read(cert: &Path, key: &Path) -> Result<Loaded, TlsError> {
        use sha2::Digest;
        let (chain, private_key) = read_pair(cert, key)?;
        let leaf_sha256 = chain
            .first()
            .map(|leaf| sha2::Sha256::digest(leaf.as_ref()).into())
            .ok_or_else(|| TlsError::NoCertificate {
                file: cert.to_owned(),
            })?;
        let quic = server_config(cert, key, chain.clone(), private_key.clone_key(), Use::Quic)?;
        Ok(Loaded {
            tcp: Arc::new(server_config(cert, key, chain, private_key, Use::Tcp)?),
            quic,
            leaf_sha256,
        })
    }
}

pub fn read_pair(
    cert: &Path,
    key: &Path,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let cert_error = |reason: String| TlsError::CertFile {
        file: cert.to_owned(),
        reason,
    };
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|error| cert_error(error.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| cert_error(error.to_string()))?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate {
            file: cert.to_owned(),
        });
    }
    let private_key = PrivateKeyDer::from_pem_file(key).map_err(|error| match error {
        pem::Error::NoItemsFound => TlsError::NoKey {
            file: key.to_owned(),
        },
        error => TlsError::KeyFile {
            file: key.to_owned(),
            reason: error.to_string(),
        },
    })?;
    Ok((chain, private_key))
}

pub fn mismatch(cert: &Path, key: &Path, error: rustls::Error) -> TlsError {
    TlsError::Mismatch {
        cert: cert.to_owned(),
        key: key.to_owned(),
        reason: match error {
            rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
                "it is the key of another certificate".to_owned()
            }
            error => error.to_string(),
        },
    }
}

/// What a listener speaks over TLS.
enum Use {
    /// The TCP ports: TLS 1.3 and 1.2, HTTP/1.1 only (hyper is built without HTTP/2;
    /// WebSocket upgrades need it anyway).
    Tcp,
    /// The WebTransport endpoint: TLS 1.3 (QUIC has no other) and HTTP/3.
    Quic,
}

fn server_config(
    cert: &Path,
    key: &Path,
    chain: Vec<CertificateDer<'static>>,
    private_key: PrivateKeyDer<'static>,
    usage: Use,
) -> Result<ServerConfig, TlsError> {
    let mismatch = |error: rustls::Error| mismatch(cert, key, error);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let (versions, alpn): (&[_], &[u8]) = match usage {
        Use::Tcp => (rustls::DEFAULT_VERSIONS, b"http/1.1"),
        Use::Quic => (&[&rustls::version::TLS13], b"h3"),
    };
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .map_err(mismatch)?
        .with_no_client_auth()
        .with_single_cert(chain, private_key)
        .map_err(mismatch)?;
    config.alpn_protocols = vec![alpn.to_vec()];
    Ok(config)
}

/// Why a connection on a TLS port was not served.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error("the TLS handshake did not finish within {TLS_HANDSHAKE_TIMEOUT:?}")]
    Timeout,
    #[error("a plain HTTP request arrived on the TLS port")]
    PlainHttp,
    #[error("TLS handshake failed: {0}")]
    Io(#[from] io::Error),
}

/// What a plain HTTP client on the TLS port is told before the connection closes.
const PLAIN_HTTP_REFUSAL: &[u8] = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: 71\r\nconnection: close\r\n\r\n{\"error\":\"This port speaks HTTPS: use https:// and wss:// to connect.\"}";

/// Completes the TLS handshake of a new connection, within [`TLS_HANDSHAKE_TIMEOUT`]. A client
/// that speaks plain HTTP instead gets a 400 that says so.
pub async fn handshake(
    certs: &TlsCerts,
    stream: TcpStream,
) -> Result<TlsStream<TcpStream>, HandshakeError> {
    let acceptor = certs.acceptor();
    let handshake = async move {
        let mut first = [0u8; 1];
        let peeked = stream.peek(&mut first).await?;
        if peeked == 1 && first[0] != TLS_HANDSHAKE_RECORD {
            refuse_plain(stream).await;
            return Err(HandshakeError::PlainHttp);
        }
        let mut stream = acceptor.accept(stream).await?;
        stream
            .get_mut()
            .1
            .set_buffer_limit(Some(MAX_TLS_BUFFER_BYTES));
        Ok(stream)
    };
    tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, handshake)
        .await
        .map_err(|_| HandshakeError::Timeout)?
}

async fn refuse_plain(mut stream: TcpStream) {
    use tokio::io::AsyncWriteExt;
    if stream.write_all(PLAIN_HTTP_REFUSAL).await.is_ok() {
        // Read what the client sent, briefly, so that closing with unread bytes does not
        // reset the connection before the client has read the answer.
        let _ = stream.shutdown().await;
        let mut sink = [0u8; 4096];
        let drain = async {
            use tokio::io::AsyncReadExt;
            while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
        };
        let _ = tokio::time::timeout(Duration::from_secs(1), drain).await;
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;

    pub fn testdata(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("testdata/tls")
            .join(name)
    }

    #[test]
    fn plain_http_refusal_announces_its_length() {
        let text = std::str::from_utf8(PLAIN_HTTP_REFUSAL).expect("ascii");
        let (head, body) = text.split_once("\r\n\r\n").expect("a head");
        assert!(head.contains(&format!("content-length: {}", body.len())));
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_never_finishes_its_handshake_is_dropped() {
        let certs = TlsCerts::load(&testdata("server.pem"), &testdata("server-key.pem"))
            .expect("test certificate");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address");
        // Connects, sends the first byte of a handshake record, then nothing.
        let mut silent = TcpStream::connect(address).await.expect("connect");
        tokio::io::AsyncWriteExt::write_all(&mut silent, &[TLS_HANDSHAKE_RECORD])
            .await
            .expect("write");
        let (stream, _) = listener.accept().await.expect("accept");
        let started = tokio::time::Instant::now();
        let error = handshake(&certs, stream)
            .await
            .expect_err("never completes");
        assert!(matches!(error, HandshakeError::Timeout), "{error:?}");
        assert_eq!(started.elapsed(), TLS_HANDSHAKE_TIMEOUT);
    }

    #[test]
    fn a_matching_pair_loads() {
        let certs = TlsCerts::load(&testdata("server.pem"), &testdata("server-key.pem"))
            .expect("a valid pair");
        assert_eq!(certs.cert_file(), testdata("server.pem"));
        certs.reload().expect("still valid");
    }

    #[test]
    fn the_webtransport_side_speaks_http3_with_the_same_certificate() {
        use sha2::Digest;
        let certs = TlsCerts::load(&testdata("server.pem"), &testdata("server-key.pem"))
            .expect("a valid pair");
        let (quic, hash) = certs.quic();
        assert_eq!(quic.alpn_protocols, vec![b"h3".to_vec()]);
        assert_eq!(
            certs.acceptor().config().alpn_protocols,
            vec![b"http/1.1".to_vec()]
        );
        let leaf = CertificateDer::pem_file_iter(testdata("server.pem"))
            .expect("readable")
            .next()
            .expect("a certificate")
            .expect("PEM");
        assert_eq!(hash, <[u8; 32]>::from(sha2::Sha256::digest(leaf.as_ref())));
    }

    #[test]
    fn a_missing_file_is_named() {
        let missing = testdata("nowhere.pem");
        let error = TlsCerts::load(&missing, &testdata("server-key.pem")).expect_err("missing");
        assert!(matches!(error, TlsError::CertFile { .. }), "{error:?}");
        let text = error.to_string();
        assert!(
            text.contains("certificate file") && text.contains("nowhere.pem"),
            "{text}"
        );
        let error = TlsCerts::load(&testdata("server.pem"), &missing).expect_err("missing");
        assert!(matches!(error, TlsError::KeyFile { .. }), "{error:?}");
        assert!(error.to_string().contains("nowhere.pem"), "{error}");
    }

    #[test]
    fn files_of_the_wrong_kind_are_named() {
        // A key where the certificate should be, and a certificate where the key should be.
        let error = TlsCerts::load(&testdata("server-key.pem"), &testdata("server-key.pem"))
            .expect_err("no certificate");
        assert!(matches!(error, TlsError::NoCertificate { .. }), "{error:?}");
        assert!(error.to_string().contains("server-key.pem"), "{error}");
        let error =
            TlsCerts::load(&testdata("server.pem"), &testdata("server.pem")).expect_err("no key");
        assert!(matches!(error, TlsError::NoKey { .. }), "{error:?}");
        assert!(error.to_string().contains("server.pem"), "{error}");
    }

    #[test]
    fn a_key_of_another_certificate_is_refused() {
        let error = TlsCerts::load(&testdata("server.pem"), &testdata("other-key.pem"))
            .expect_err("mismatch");
        assert!(matches!(error, TlsError::Mismatch { .. }), "{error:?}");
        let text = error.to_string();
        assert!(
            text.contains("other-key.pem") && text.contains("server.pem"),
            "{text}"
        );
        assert!(
            text.ends_with("it is the key of another certificate"),
            "{text}"
        );
    }

    #[test]
    fn a_failed_reload_keeps_the_certificate_in_force() {
        let dir = std::env::temp_dir().join(format!("hearth-tls-reload-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory");
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        std::fs::copy(testdata("server.pem"), &cert).expect("copy");
        std::fs::copy(testdata("server-key.pem"), &key).expect("copy");
        let certs = TlsCerts::load(&cert, &key).expect("valid");
        let before = certs.acceptor().config().clone();
        let (_, hash) = certs.quic();
        std::fs::copy(testdata("other-key.pem"), &key).expect("copy");
        let error = certs.reload().expect_err("the key no longer matches");
        assert!(matches!(error, TlsError::Mismatch { .. }), "{error:?}");
        assert!(Arc::ptr_eq(&before, certs.acceptor().config()));
        assert_eq!(certs.quic().1, hash);
        std::fs::copy(testdata("server-key.pem"), &key).expect("copy");
        certs.reload().expect("valid again");
        assert!(!Arc::ptr_eq(&before, certs.acceptor().config()));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
