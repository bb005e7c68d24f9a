//! The online commands over `https`: a server whose certificate a private CA signed is
//! refused until `--ca-cert` names that CA.
//!
//! The certificates in `tests/data/tls` were made once with openssl (P-256, valid until 2126):
//! `ca.pem` a CA whose key was thrown away, `server.pem` and `server.key` a certificate it
//! signed for `localhost` and `127.0.0.1`; `lone.pem` and `lone.key` what a lone
//! `openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost
//! -addext subjectAltName=DNS:localhost,IP:127.0.0.1` makes (a certificate marked `CA:TRUE`).

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{hearth, output};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/tls")
        .join(name)
}

/// A TLS server on loopback that answers every request that completes a handshake with
/// `body`, and hands back the request heads it got.
fn tls_server(
    connections: usize,
    body: &'static str,
) -> (u16, std::thread::JoinHandle<Vec<String>>) {
    tls_server_with("server", connections, body)
}

/// [`tls_server`] with the certificate `NAME.pem` and key `NAME.key` of the fixtures.
fn tls_server_with(
    name: &str,
    connections: usize,
    body: &'static str,
) -> (u16, std::thread::JoinHandle<Vec<String>>) {
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(fixture(&format!("{name}.pem")))
            .expect("the certificate file")
            .collect::<Result<_, _>>()
            .expect("certificates");
    let key = PrivateKeyDer::from_pem_file(fixture(&format!("{name}.key"))).expect("the key");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("a server configuration");
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = listener.local_addr().expect("an address").port();
    let handle = std::thread::spawn(move || {
        let mut heads = Vec::new();
        for _ in 0..connections {
            let (socket, _) = listener.accept().expect("a connection");
            let connection = rustls::ServerConnection::new(config.clone()).expect("TLS");
            let mut tls = rustls::StreamOwned::new(connection, socket);
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            // A client that refuses the certificate ends the handshake: no request comes.
            while !head.ends_with(b"\r\n\r\n") {
                if tls.read_exact(&mut byte).is_err() {
                    break;
                }
                head.push(byte[0]);
            }
            if !head.ends_with(b"\r\n\r\n") {
                continue;
            }
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = tls.write_all(answer.as_bytes());
            let _ = tls.flush();
            heads.push(String::from_utf8_lossy(&head).into_owned());
        }
        heads
    });
    (port, handle)
}

#[test]
fn https_needs_the_private_ca_and_works_with_it() {
    let (port, server) = tls_server(2, "{\"over\":\"tls\"}");
    let url = format!("https://127.0.0.1:{port}");
    let unknown = output(
        hearth().args(["data", "get", "/a", "--ns", "shop", "--url", &url]),
        "",
    );
    assert_eq!(
        unknown.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&unknown.stderr)
    );
    let message = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        message.starts_with(&format!("cannot reach the server at {url}: "))
            && message.contains("UnknownIssuer")
            && message.contains(
                "the server's certificate is not signed by a CA this command trusts: give \
                 that CA's certificate with --ca-cert FILE (or HEARTH_CA_CERT)"
            )
            && !message.contains("is the server running"),
        "{message}"
    );
    let trusted = output(
        hearth()
            .args(["data", "get", "/a", "--url", &url])
            .env("HEARTH_NS", "shop")
            .env("HEARTH_CA_CERT", fixture("ca.pem")),
        "",
    );
    assert!(
        trusted.status.success(),
        "{}",
        String::from_utf8_lossy(&trusted.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&trusted.stdout),
        "{\"over\":\"tls\"}\n"
    );
    let heads = server.join().expect("the server thread");
    assert_eq!(heads.len(), 1, "one request got through: {heads:?}");
    assert!(
        heads[0].starts_with("GET /a.json?ns=shop HTTP/1.1\r\n"),
        "{heads:?}"
    );
}

#[test]
fn a_lone_self_signed_certificate_is_explained() {
    let (port, server) = tls_server_with("lone", 1, "{}");
    let url = format!("https://127.0.0.1:{port}");
    let refused = output(
        hearth()
            .args([
                "data",
                "get",
                "/a",
                "--ns",
                "shop",
                "--url",
                &url,
                "--ca-cert",
            ])
            .arg(fixture("lone.pem")),
        "",
    );
    assert_eq!(refused.status.code(), Some(3));
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(
        message.contains("CaUsedAsEndEntity")
            && message.contains(
                "the server's certificate is a CA certificate (`CA:TRUE`, as a lone `openssl \
                 req -x509` makes) used as the server's own"
            ),
        "{message}"
    );
    assert_eq!(server.join().expect("the server thread").len(), 0);
}
