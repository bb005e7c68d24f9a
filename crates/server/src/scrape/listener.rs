//! `--metrics-listen`: `/metrics`, `/healthz` and `/readyz` on an address of their own, served
//! by a thread of their own, so that a scrape or a probe never waits behind client traffic in
//! a shard's accept queue and works while the shards are still recovering. Nothing here needs
//! a credential: operators bind it to an address only their monitoring reaches.

use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use hearth_net::local_thread::spawn_local_thread;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::endpoint::{answer, Caller};
use super::Observer;
use hearth_edge::http_body::HearthBody;
use hearth_ground::rest::RestResponse;

/// How long a metrics connection may stay idle or take to send a request head.
const METRICS_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// The most connections the metrics listener serves at once; more wait in the kernel's
/// queue. Scrapers and probes open a few.
pub const MAX_METRICS_CONNECTIONS: usize = 64;

/// Binds the metrics address (before the data directory is recovered, so that `/readyz` says
/// so meanwhile).
pub fn bind_metrics_listener(address: SocketAddr) -> std::io::Result<TcpListener> {
    let listener = TcpListener::bind(address)?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// Serves the metrics listener on a thread of its own until `shutdown` turns true or its
/// sender is dropped.
pub fn serve_metrics(
    listener: TcpListener,
    observer: Arc<Observer>,
    shutdown: watch::Receiver<bool>,
) -> std::io::Result<JoinHandle<()>> {
    let address = listener.local_addr()?;
    spawn_local_thread("hearth-metrics", "metrics listener", move || {
        accept(listener, address, observer, shutdown)
    })
}

async fn accept(
    listener: TcpListener,
    address: SocketAddr,
    observer: Arc<Observer>,
    mut shutdown: watch::Receiver<bool>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(error) => {
            warn!(%error, "cannot register the metrics listener");
            return;
        }
    };
    info!(%address, "serving /metrics, /healthz and /readyz on {address}");
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_METRICS_CONNECTIONS));
    loop {
        if *shutdown.borrow() {
            return;
        }
        // A slot first, then a connection; shutdown (or a failed start, which drops the
        // sender) ends the wait for either.
        let next = async {
            let slot = slots.clone().acquire_owned().await;
            (slot, listener.accept().await)
        };
        let (slot, accepted) = tokio::select! {
            changed = shutdown.changed() => {
                if changed.is_err() {
                    return;
                }
                continue;
            }
            next = next => next,
        };
        let Ok(slot) = slot else {
            return;
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => {
                debug!(%error, "metrics accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let observer = observer.clone();
        tokio::task::spawn_local(async move {
            let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                let observer = observer.clone();
                async move {
                    let (parts, _) = request.into_parts();
                    let response = answer(&observer, &parts, Caller::Open, None)
                        .await
                        .unwrap_or_else(|| {
                            RestResponse::error(
                                404,
                                "this address serves /metrics, /healthz and /readyz only",
                            )
                        });
                    Ok::<_, Infallible>(response.into_http::<HearthBody>())
                }
            });
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(METRICS_IDLE_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            if let Err(error) = connection.await {
                debug!(%error, "metrics connection ended with an error");
            }
            drop(slot);
        });
    }
}
