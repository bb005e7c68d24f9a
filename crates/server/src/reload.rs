//! SIGHUP: the certificates read again. The TCP listeners' pair (`--tls-cert`, `--tls-key`)
//! is read once and serves both them and the WebTransport endpoint; without a pair the
//! endpoint's self-signed development certificate is made anew (a new key, 13 more days),
//! since browsers pin it by hash and refuse it once it expires. Connections and sessions
//! already open keep the certificate they have; a pair that cannot be used is logged and the
//! certificate in force stays, on both kinds of listener. The node link's certificate, key
//! and CA (`--cluster-tls-cert`, `--cluster-tls-key`, `--cluster-ca`) are read again too, for
//! the link's connections made from then on; the links already up keep theirs.

use std::sync::Arc;

use tracing::{info, warn};

use hearth_net::tls::TlsCerts;
use hearth_peer::LinkTls;
use hearth_transport::webtransport::certificate::Reloader;

/// What a reload renews.
pub(crate) struct Certificates {
    pub tls: Option<Arc<TlsCerts>>,
    pub webtransport: Option<Reloader>,
    /// The node link's mutual TLS.
    pub cluster: Option<Arc<LinkTls>>,
}

impl Certificates {
    pub fn reload(&self) {
        // Independent of the client certificates: one failing leaves the other renewed.
        if let Some(cluster) = &self.cluster {
            let [cert, key, ca] = cluster.files();
            match cluster.reload() {
                Ok(()) => info!(
                    cert = %cert.display(),
                    key = %key.display(),
                    ca = %ca.display(),
                    "SIGHUP: node link certificate and CA reloaded; new link connections use them"
                ),
                Err(error) => warn!(
                    %error,
                    "SIGHUP: node link certificate not reloaded; the previous one stays in use"
                ),
            }
        }
        if let Some(tls) = &self.tls {
            match tls.reload() {
                Ok(()) => info!(
                    cert = %tls.cert_file().display(),
                    key = %tls.key_file().display(),
                    "SIGHUP: TLS certificate reloaded; new connections use it"
                ),
                Err(error) => {
                    warn!(%error, "SIGHUP: TLS certificate not reloaded; the previous one stays in use");
                    return;
                }
            }
        }
        match &self.webtransport {
            // The endpoint logs the new certificate's hash once it is in force.
            Some(reloader) => {
                if let Err(error) = reloader.reload() {
                    warn!(%error, "SIGHUP: WebTransport certificate not reloaded; the previous one stays in use");
                }
            }
            None if self.tls.is_none() && self.cluster.is_none() => {
                info!("SIGHUP: nothing to reload (no --tls-cert, no --webtransport-listen, no --cluster-tls-cert)");
            }
            None => {}
        }
    }
}
