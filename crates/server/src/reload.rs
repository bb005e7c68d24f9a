//! SIGHUP: the certificates read again. The TCP listeners' pair (`--tls-cert`, `--tls-key`)
//! is read once and serves both them and the WebTransport endpoint; without a pair the
//! endpoint's self-signed development certificate is made anew (a new key, 13 more days),
//! since browsers pin it by hash and refuse it once it expires. Connections and sessions
//! already open keep the certificate they have; a pair that cannot be used is logged and the
//! certificate in force stays, on both kinds of listener.

use std::sync::Arc;

use tracing::{info, warn};

use crate::tls::TlsCerts;
use crate::webtransport::certificate::Reloader;

/// What a reload renews.
pub(crate) struct Certificates {
    pub tls: Option<Arc<TlsCerts>>,
    pub webtransport: Option<Reloader>,
}

impl Certificates {
    pub fn reload(&self) {
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
            None if self.tls.is_none() => {
                info!("SIGHUP: nothing to reload (no --tls-cert, no --webtransport-listen)");
            }
            None => {}
        }
    }
}
