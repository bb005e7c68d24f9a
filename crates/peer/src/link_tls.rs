//! Mutual TLS on the node link (`--cluster-tls-cert`, `--cluster-tls-key`, `--cluster-ca`,
//! decision 59): the link carries every forwarded session, its credentials and pushes, and
//! the replicated logs, so it is encrypted, and both ends prove with a certificate of the
//! cluster's own CA that they are the node they claim to be.
//!
//! A node's certificate names the node: a SAN DNS name equal to its node id (`n2`). The
//! dialing node checks that the accepting one's certificate chains to the CA and names the
//! node it dials; the accepting node requires a certificate that chains to the CA, and once
//! the dialer has announced its id in the shared-secret handshake (which runs inside the TLS
//! stream, defence in depth), that the certificate names that id. A certificate from another
//! CA, or one node's certificate used by another, never gets a link.
//!
//! `--cluster-plaintext` keeps the link unencrypted, with the shared secret alone: for tests
//! on one machine. One of the two must be chosen (the command refuses to start otherwise).

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, PoisonError, RwLock};
use std::task::{Context, Poll};

use rustls::client::danger::ServerCertVerifier;
use rustls::client::{Resumption, WebPkiServerVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::{NoServerSessionStorage, ParsedCertificate, WebPkiClientVerifier};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::handshake::{self, HandshakeError};
use hearth_net::tls::{mismatch, read_pair, TlsError};

/// How the link's connections are protected: always the operator's choice.
#[derive(Debug, Clone)]
pub enum LinkSecurity {
    /// `--cluster-plaintext`: the shared secret alone, nothing encrypted (tests).
    Plaintext,
    /// Mutual TLS with the cluster's CA.
    Tls(Arc<LinkTls>),
}

/// Why the link's certificates cannot be used. Each names the flag and file to look at.
#[derive(Debug, thiserror::Error)]
pub enum LinkTlsError {
    #[error("the node link's certificate (--cluster-tls-cert, --cluster-tls-key): {0}")]
    Pair(#[from] TlsError),
    #[error("cannot read --cluster-ca {}: {reason}", file.display())]
    CaFile { file: PathBuf, reason: String },
    #[error("--cluster-ca {} holds no certificate (expected PEM blocks `BEGIN CERTIFICATE`)", file.display())]
    NoCa { file: PathBuf },
    #[error("--cluster-ca {} cannot be used: {reason}", file.display())]
    BadCa { file: PathBuf, reason: String },
    #[error("node id `{0}` cannot be a certificate's DNS name, which the node link's TLS needs (labels of letters, digits, `-` and `_` separated by `.`, none starting or ending with `-`, the last not all digits)")]
    NodeName(String),
    #[error("the certificate in --cluster-tls-cert {} is not one of node `{node}` under --cluster-ca {}: {reason}", cert.display(), ca.display())]
    NotThisNode {
        cert: PathBuf,
        ca: PathBuf,
        node: String,
        reason: String,
    },
}

/// This node's certificate, key and the cluster's CA, and the files they came from.
pub struct LinkTls {
    node: String,
    cert: PathBuf,
    key: PathBuf,
    ca: PathBuf,
    /// Read once per connection; replaced whole by a reload (SIGHUP).
    current: RwLock<Arc<Configs>>,
}

/// One reading of the three files: both sides of the link use the same.
struct Configs {
    server: Arc<ServerConfig>,
    client: Arc<ClientConfig>,
}

impl fmt::Debug for LinkTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LinkTls")
            .field("node", &self.node)
            .field("cert", &self.cert)
            .field("key", &self.key)
            .field("ca", &self.ca)
            .finish_non_exhaustive()
    }
}

impl LinkTls {
    /// Reads node `node`'s certificate chain and key and the CA (all PEM), and checks that the
    /// certificate chains to the CA, names the node and may serve both ends of a link: a
    /// node whose own certificate would be refused by every peer does not start.
    pub fn load(node: &str, cert: &Path, key: &Path, ca: &Path) -> Result<LinkTls, LinkTlsError> {
        let configs = Configs::read(node, cert, key, ca)?;
        Ok(LinkTls {
            node: node.to_owned(),
            cert: cert.to_owned(),
            key: key.to_owned(),
            ca: ca.to_owned(),
            current: RwLock::new(Arc::new(configs)),
        })
    }

    /// Reads the three files again: connections made from now on use them, the links already
    /// up keep theirs. On an error nothing changes.
    pub fn reload(&self) -> Result<(), LinkTlsError> {
        let configs = Arc::new(Configs::read(&self.node, &self.cert, &self.key, &self.ca)?);
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = configs;
        Ok(())
    }

    /// The certificate, key and CA files.
    pub fn files(&self) -> [&Path; 3] {
        [&self.cert, &self.key, &self.ca]
    }

    fn configs(&self) -> Arc<Configs> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Configs {
    fn read(node: &str, cert: &Path, key: &Path, ca: &Path) -> Result<Configs, LinkTlsError> {
        let name = ServerName::try_from(node.to_owned())
            .map_err(|_| LinkTlsError::NodeName(node.into()))?;
        let (chain, private_key) = read_pair(cert, key)?;
        let roots = Arc::new(read_roots(ca)?);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let bad_ca = |error: rustls::client::VerifierBuilderError| LinkTlsError::BadCa {
            file: ca.to_owned(),
            reason: error.to_string(),
        };
        // Client certificates are required: the builder allows no unauthenticated peer.
        let clients = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
            .build()
            .map_err(bad_ca)?;
        let servers = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
            .build()
            .map_err(bad_ca)?;
        let not_this = |reason: String| LinkTlsError::NotThisNode {
            cert: cert.to_owned(),
            ca: ca.to_owned(),
            node: node.to_owned(),
            reason,
        };
        let Some((leaf, intermediates)) = chain.split_first() else {
            return Err(TlsError::NoCertificate {
                file: cert.to_owned(),
            }
            .into());
        };
        let now = UnixTime::now();
        servers
            .verify_server_cert(leaf, intermediates, &name, &[], now)
            .map_err(|error| not_this(format!("as the node dialed: {error}")))?;
        clients
            .verify_client_cert(leaf, intermediates, now)
            .map_err(|error| not_this(format!("as the dialing node: {error}")))?;
        let mismatch = |error: rustls::Error| LinkTlsError::from(mismatch(cert, key, error));
        let mut server = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(mismatch)?
            .with_client_cert_verifier(clients)
            .with_single_cert(chain.clone(), private_key.clone_key())
            .map_err(mismatch)?;
        // No resumption: every connection of the link proves both certificates anew, against
        // the CA in force (links are few and long-lived).
        server.session_storage = Arc::new(NoServerSessionStorage {});
        server.send_tls13_tickets = 0;
        let mut client = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(mismatch)?
            .with_webpki_verifier(servers)
            .with_client_auth_cert(chain, private_key)
            .map_err(mismatch)?;
        client.resumption = Resumption::disabled();
        Ok(Configs {
            server: Arc::new(server),
            client: Arc::new(client),
        })
    }
}

/// Every certificate of the CA file is trusted (a bundle, e.g. while the CA is replaced).
fn read_roots(ca: &Path) -> Result<RootCertStore, LinkTlsError> {
    let ca_error = |reason: String| LinkTlsError::CaFile {
        file: ca.to_owned(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(ca)
        .map_err(|error| ca_error(error.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| ca_error(error.to_string()))?;
    if certs.is_empty() {
        return Err(LinkTlsError::NoCa {
            file: ca.to_owned(),
        });
    }
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots.add(cert).map_err(|error| LinkTlsError::BadCa {
            file: ca.to_owned(),
            reason: error.to_string(),
        })?;
    }
    Ok(roots)
}

/// A connection of the link, past its handshakes.
pub enum LinkStream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::TlsStream<TcpStream>>),
}

/// The dialing side: TLS (checking that the peer's certificate names `peer`), then the
/// shared-secret handshake inside it. The caller bounds the whole by `HANDSHAKE_TIMEOUT`.
pub async fn dial(
    security: &LinkSecurity,
    stream: TcpStream,
    me: &str,
    peer: &str,
    secret: &[u8],
) -> Result<LinkStream, HandshakeError> {
    let mut stream = match security {
        LinkSecurity::Plaintext => LinkStream::Plain(stream),
        LinkSecurity::Tls(tls) => {
            let name = ServerName::try_from(peer.to_owned()).map_err(|_| {
                HandshakeError::Certificate(format!(
                    "node id `{peer}` cannot be a certificate's DNS name"
                ))
            })?;
            let connector = TlsConnector::from(tls.configs().client.clone());
            let stream = connector
                .connect(name, stream)
                .await
                .map_err(HandshakeError::Tls)?;
            LinkStream::Tls(Box::new(stream.into()))
        }
    };
    handshake::dial(&mut stream, me, peer, secret).await?;
    Ok(stream)
}

/// The accepting side, node `me`: the stream and the index of the node that proved who it
/// is, which `index_of` gives for the ids of the nodes that may link to this one. With TLS,
/// the dialer's certificate must also name the id it announces.
pub async fn accept(
    security: &LinkSecurity,
    stream: TcpStream,
    me: &str,
    secret: &[u8],
    index_of: impl FnOnce(&str) -> Option<usize>,
) -> Result<(LinkStream, usize), HandshakeError> {
    let known = |id: &str| index_of(id).ok_or_else(|| HandshakeError::Unknown(id.to_owned()));
    match security {
        LinkSecurity::Plaintext => {
            let mut stream = LinkStream::Plain(stream);
            let index = handshake::accept(&mut stream, me, secret, known).await?;
            Ok((stream, index))
        }
        LinkSecurity::Tls(tls) => {
            let acceptor = TlsAcceptor::from(tls.configs().server.clone());
            let stream = acceptor.accept(stream).await.map_err(HandshakeError::Tls)?;
            // The verifier has checked the chain; which node it names is checked once the
            // peer has said who it is.
            let leaf = stream
                .get_ref()
                .1
                .peer_certificates()
                .and_then(<[_]>::first)
                .cloned()
                .ok_or_else(|| HandshakeError::Certificate("no client certificate".into()))?;
            let mut stream = LinkStream::Tls(Box::new(stream.into()));
            let check = |id: &str| {
                let index = known(id)?;
                names(&leaf, id)?;
                Ok(index)
            };
            let index = handshake::accept(&mut stream, me, secret, check).await?;
            Ok((stream, index))
        }
    }
}

/// Whether certificate `leaf` names node `id` (a SAN DNS name; the CN is not looked at).
fn names(leaf: &CertificateDer<'_>, id: &str) -> Result<(), HandshakeError> {
    let refused = |why: String| {
        HandshakeError::Certificate(format!(
            "the peer announced node `{id}`, its certificate {why}"
        ))
    };
    let name = ServerName::try_from(id).map_err(|_| refused("cannot name it".into()))?;
    let parsed = ParsedCertificate::try_from(leaf)
        .map_err(|error| refused(format!("is unusable: {error}")))?;
    rustls::client::verify_server_name(&parsed, &name)
        .map_err(|error| refused(format!("names another node: {error}")))
}

impl LinkStream {
    /// The TCP connection beneath.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            LinkStream::Plain(stream) => stream,
            LinkStream::Tls(stream) => stream.get_ref().0,
        }
    }
}

impl AsyncRead for LinkStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            LinkStream::Plain(stream) => Pin::new(stream).poll_read(cx, buf),
            LinkStream::Tls(stream) => Pin::new(stream.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for LinkStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            LinkStream::Plain(stream) => Pin::new(stream).poll_write(cx, buf),
            LinkStream::Tls(stream) => Pin::new(stream.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            LinkStream::Plain(stream) => Pin::new(stream).poll_flush(cx),
            LinkStream::Tls(stream) => Pin::new(stream.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            LinkStream::Plain(stream) => Pin::new(stream).poll_shutdown(cx),
            LinkStream::Tls(stream) => Pin::new(stream.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const SECRET: &[u8] = b"a secret of sixteen bytes";

    fn data(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("testdata/link")
            .join(name)
    }

    fn load(node: &str, file: &str, ca: &Path) -> Result<LinkTls, LinkTlsError> {
        let (cert, key) = (
            data(&format!("{file}.pem")),
            data(&format!("{file}-key.pem")),
        );
        LinkTls::load(node, &cert, &key, ca)
    }

    /// Node `node` with its certificate `file` of the cluster's CA.
    fn node(node: &str, file: &str) -> LinkSecurity {
        LinkSecurity::Tls(Arc::new(load(node, file, &data("ca.pem")).expect("usable")))
    }

    fn index_of(id: &str) -> Option<usize> {
        ["n1", "n2", "n_3"].iter().position(|node| *node == id)
    }

    /// `dialer` dials as node `me`, expecting `peer`; `acceptor` accepts as node `at`.
    async fn link(
        dialer: &LinkSecurity,
        me: &str,
        peer: &str,
        acceptor: &LinkSecurity,
        at: &str,
    ) -> (
        Result<LinkStream, HandshakeError>,
        Result<(LinkStream, usize), HandshakeError>,
    ) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address");
        let dialing = async {
            let stream = TcpStream::connect(address).await.expect("connect");
            dial(dialer, stream, me, peer, SECRET).await
        };
        let accepting = async {
            let (stream, _) = listener.accept().await.expect("accept");
            accept(acceptor, stream, at, SECRET, index_of).await
        };
        // A bound against a hang, not a measure of speed.
        tokio::time::timeout(std::time::Duration::from_secs(60), async {
            tokio::join!(dialing, accepting)
        })
        .await
        .expect("both ends finish")
    }

    #[tokio::test]
    async fn two_nodes_of_the_ca_link_over_tls_and_talk() {
        let (dialed, accepted) = link(&node("n1", "n1"), "n1", "n2", &node("n2", "n2"), "n2").await;
        let mut dialed = dialed.expect("dialed");
        let (mut accepted, index) = accepted.expect("accepted");
        assert_eq!(index, 0);
        assert!(matches!(dialed, LinkStream::Tls(_)));
        dialed.write_all(b"frame").await.expect("write");
        dialed.flush().await.expect("flush");
        let mut read = [0; 5];
        accepted.read_exact(&mut read).await.expect("read");
        assert_eq!(&read, b"frame");
    }

    #[tokio::test]
    async fn an_underscore_in_a_node_id_is_a_certificate_name() {
        let (dialed, accepted) =
            link(&node("n1", "n1"), "n1", "n_3", &node("n_3", "n_3"), "n_3").await;
        dialed.expect("dialed");
        // The index of the dialer, n1.
        assert_eq!(accepted.expect("accepted").1, 0);
    }

    #[tokio::test]
    async fn plaintext_links_with_the_secret_alone() {
        let plain = LinkSecurity::Plaintext;
        let (dialed, accepted) = link(&plain, "n1", "n2", &plain, "n2").await;
        assert!(matches!(dialed.expect("dialed"), LinkStream::Plain(_)));
        accepted.expect("accepted");
    }

    #[tokio::test]
    async fn a_certificate_of_another_ca_is_refused_by_both_ends() {
        // The impostor trusts both CAs, so that it is the cluster's nodes that refuse it.
        let dir = std::env::temp_dir().join(format!("hearth-link-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory");
        let bundle = dir.join("both.pem");
        let both = [data("ca.pem"), data("other-ca.pem")]
            .iter()
            .map(|file| std::fs::read_to_string(file).expect("readable"))
            .collect::<String>();
        std::fs::write(&bundle, both).expect("written");
        let impostor = LinkSecurity::Tls(Arc::new(
            load("n2", "other-n2", &bundle).expect("valid under its own CA"),
        ));
        let _ = std::fs::remove_dir_all(&dir);
        // It dials node n_3: n_3 refuses its certificate.
        let (dialed, accepted) = link(&impostor, "n2", "n_3", &node("n_3", "n_3"), "n_3").await;
        assert!(dialed.is_err());
        let error = accepted.err().expect("refused");
        assert!(matches!(error, HandshakeError::Tls(_)), "{error}");
        assert!(error.to_string().contains("UnknownIssuer"), "{error}");
        // Node n1 dials it: n1 refuses its certificate.
        let (dialed, accepted) = link(&node("n1", "n1"), "n1", "n2", &impostor, "n2").await;
        assert!(accepted.is_err());
        let error = dialed.err().expect("refused");
        assert!(error.to_string().contains("UnknownIssuer"), "{error}");
    }

    #[tokio::test]
    async fn a_dialer_must_be_the_node_its_certificate_names() {
        // Node n2's certificate, announcing n_3.
        let (dialed, accepted) =
            link(&node("n2", "n2"), "n_3", "n1", &node("n1", "n1"), "n1").await;
        assert!(dialed.is_err());
        let error = accepted.err().expect("refused");
        assert!(matches!(error, HandshakeError::Certificate(_)), "{error}");
        assert!(error.to_string().contains("`n_3`"), "{error}");
    }

    #[tokio::test]
    async fn the_dialer_checks_the_name_of_the_node_it_dials() {
        // Dialing for n_3 reaches n2.
        let (dialed, accepted) =
            link(&node("n1", "n1"), "n1", "n_3", &node("n2", "n2"), "n2").await;
        assert!(accepted.is_err());
        let error = dialed.err().expect("refused");
        assert!(matches!(error, HandshakeError::Tls(_)), "{error}");
        assert!(
            error.to_string().contains("not valid for name \"n_3\""),
            "{error}"
        );
    }

    #[tokio::test]
    async fn a_plain_dialer_is_refused_before_its_magic_is_read() {
        let (dialed, accepted) = link(
            &LinkSecurity::Plaintext,
            "n1",
            "n2",
            &node("n2", "n2"),
            "n2",
        )
        .await;
        assert!(dialed.is_err());
        let error = accepted.err().expect("refused");
        assert!(matches!(error, HandshakeError::Tls(_)), "{error}");
    }

    #[test]
    fn unusable_files_and_ids_are_named() {
        let ca = data("ca.pem");
        let error = load("1", "n1", &ca).expect_err("all digits");
        assert!(matches!(error, LinkTlsError::NodeName(_)), "{error}");
        let error = load("n1", "n2", &ca).expect_err("another node's");
        assert!(matches!(error, LinkTlsError::NotThisNode { .. }), "{error}");
        assert!(error.to_string().contains("n2.pem"), "{error}");
        let error = load("n2", "other-n2", &ca).expect_err("another CA's");
        assert!(error.to_string().contains("UnknownIssuer"), "{error}");
        let key = data("n2-key.pem");
        let error = LinkTls::load("n1", &data("n1.pem"), &key, &ca).expect_err("mismatch");
        assert!(
            matches!(error, LinkTlsError::Pair(TlsError::Mismatch { .. })),
            "{error}"
        );
        assert!(error.to_string().contains("--cluster-tls-key"), "{error}");
        let error = load("n1", "n1", &data("nowhere.pem")).expect_err("no CA file");
        assert!(matches!(error, LinkTlsError::CaFile { .. }), "{error}");
        let error = load("n1", "n1", &data("n1-key.pem")).expect_err("no CA in it");
        assert!(matches!(error, LinkTlsError::NoCa { .. }), "{error}");
    }

    #[test]
    fn a_reload_that_fails_keeps_the_configuration() {
        let dir = std::env::temp_dir().join(format!("hearth-link-reload-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory");
        let [cert, key, ca] = ["n1.pem", "n1-key.pem", "ca.pem"].map(|name| dir.join(name));
        for (from, to) in [("n1.pem", &cert), ("n1-key.pem", &key), ("ca.pem", &ca)] {
            std::fs::copy(data(from), to).expect("copy");
        }
        let tls = LinkTls::load("n1", &cert, &key, &ca).expect("usable");
        let before = tls.configs();
        std::fs::copy(data("n2-key.pem"), &key).expect("copy");
        let error = tls.reload().expect_err("the key no longer matches");
        assert!(matches!(error, LinkTlsError::Pair(_)), "{error}");
        assert!(Arc::ptr_eq(&before, &tls.configs()));
        std::fs::copy(data("n1-key.pem"), &key).expect("copy");
        tls.reload().expect("usable again");
        assert!(!Arc::ptr_eq(&before, &tls.configs()));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
