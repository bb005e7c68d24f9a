//! The TLS side of the online tools: the `--ca-cert` roots, and what to do about a server
//! certificate the handshake refused.

use std::io::Read;
use std::path::Path;

use ureq::tls::{Certificate, PemItem, RootCerts};

use crate::error::{Result, ToolsError};

/// The largest `--ca-cert` file read.
pub const MAX_CA_FILE_BYTES: u64 = 1024 * 1024;

/// Said when the server's certificate is signed by a CA the client does not trust.
pub const UNKNOWN_ISSUER_HINT: &str = "the server's certificate is not signed by a CA this \
    command trusts: give that CA's certificate with --ca-cert FILE (or HEARTH_CA_CERT)";

/// Said when the server presents a CA certificate as its own: what a lone
/// `openssl req -x509` makes (it marks the certificate `CA:TRUE`), which TLS clients refuse
/// as a server's certificate even when it is trusted.
pub const CA_AS_SERVER_HINT: &str = "the server's certificate is a CA certificate (`CA:TRUE`, \
    as a lone `openssl req -x509` makes) used as the server's own, which TLS refuses: make a \
    CA, sign a server certificate with it for the server's name (docs/tls.md, 'Making a \
    certificate'), serve that one, and give the CA to --ca-cert FILE";

/// What to do about a certificate the TLS handshake refused, if the refusal is one a user can
/// fix here. rustls reports it directly or inside the I/O error of the handshake.
pub(crate) fn certificate_hint(error: &ureq::Error) -> Option<&'static str> {
    let rustls_error = match error {
        ureq::Error::Rustls(error) => Some(error),
        ureq::Error::Io(error) => error
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>()),
        _ => None,
    }?;
    let rustls::Error::InvalidCertificate(certificate) = rustls_error else {
        return None;
    };
    match certificate {
        rustls::CertificateError::UnknownIssuer => Some(UNKNOWN_ISSUER_HINT),
        // rustls passes webpki's `CaUsedAsEndEntity` on as `Other`, whose type this crate
        // would need rustls-webpki of its own to name; its text is the variant's name.
        rustls::CertificateError::Other(other) if other.to_string() == "CaUsedAsEndEntity" => {
            Some(CA_AS_SERVER_HINT)
        }
        _ => None,
    }
}

/// The certificates of a PEM file, as the only roots to trust.
pub(crate) fn read_ca_certs(path: &Path) -> Result<RootCerts> {
    let bad = |reason: String| ToolsError::CaCert {
        path: path.to_owned(),
        reason,
    };
    let mut pem = Vec::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(MAX_CA_FILE_BYTES).read_to_end(&mut pem))
        .map_err(|error| bad(error.to_string()))?;
    let mut certs: Vec<Certificate<'static>> = Vec::new();
    for item in ureq::tls::parse_pem(&pem) {
        if let PemItem::Certificate(cert) = item.map_err(|error| bad(error.to_string()))? {
            certs.push(cert);
        }
    }
    if certs.is_empty() {
        return Err(bad("no certificate in it".to_owned()));
    }
    Ok(RootCerts::new_with_certs(&certs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_without_certificates_is_refused() {
        let path = std::env::temp_dir().join(format!("hearth-ca-{}.pem", std::process::id()));
        let _ = std::fs::write(&path, "not a certificate");
        assert!(matches!(
            read_ca_certs(&path),
            Err(ToolsError::CaCert { .. })
        ));
        let _ = std::fs::remove_file(path);
    }
}
