//! What [`Server::start`](crate::server::Server::start) does before the shards run: the
//! metrics listener, the recovery of the data directory, the signing keys, the client
//! listeners, the WebTransport endpoint and the node link.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use tokio::sync::{mpsc, watch};
use tracing::{info, warn};

use crate::scrape::{bind_metrics_listener, serve_metrics, Observer};
use hearth_auth::jwks::{JwksError, JwksRefresher};
use hearth_config::ServeConfig;
use hearth_ground::cross_core::ToEdge;
use hearth_ground::inbox::ShardMessage;
use hearth_net::listener::{bind_listeners, Bound};
use hearth_persist::data_dir::{DataDir, DataDirError};
use hearth_persist::{open_shard_dir, open_storage, Durability, Loading, Opened, ShardStorage};

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot listen on {addresses}: {source}")]
    Bind {
        addresses: String,
        source: std::io::Error,
    },
    #[error("cannot start shard thread: {0}")]
    Thread(std::io::Error),
    #[error(transparent)]
    DataDir(#[from] DataDirError),
    #[error("--webtransport-listen: {0}")]
    WebTransport(#[from] hearth_transport::webtransport::WebTransportError),
    #[error("--firebase-jwks-url: {0}")]
    Jwks(#[from] JwksError),
    #[error("cannot recover shard {shard} from {dir}: {source}")]
    Recovery {
        shard: usize,
        dir: String,
        source: hearth_store::StoreError,
    },
}

/// The thread that serves `--metrics-listen`, and the address it serves on.
pub(crate) type MetricsThread = (JoinHandle<()>, Option<SocketAddr>);

/// Binds `--metrics-listen` and serves it on a thread of its own, when it is set: the thread
/// and the address it serves on.
pub(crate) fn start_metrics(
    config: &ServeConfig,
    observer: &Arc<Observer>,
    shutdown_rx: &watch::Receiver<bool>,
) -> Result<Option<MetricsThread>, StartError> {
    let Some(address) = config.metrics.listen else {
        return Ok(None);
    };
    let listener = bind_metrics_listener(address).map_err(|source| StartError::Bind {
        addresses: format!("--metrics-listen {address}"),
        source,
    })?;
    let metrics_address = listener.local_addr().ok();
    let thread = serve_metrics(listener, observer.clone(), shutdown_rx.clone())
        .map_err(StartError::Thread)?;
    Ok(Some((thread, metrics_address)))
}

/// Starts keeping the Firebase signing keys of `--firebase-jwks-url` and the App Check keys
/// of `--app-check-jwks-url` fresh, those that are set.
pub(crate) fn start_jwks(
    config: &ServeConfig,
    data_dir: Option<&DataDir>,
) -> Result<Vec<JwksRefresher>, StartError> {
    let mut refreshers = Vec::new();
    for source in [&config.firebase_jwks, &config.app_check_jwks]
        .into_iter()
        .flatten()
    {
        refreshers.push(hearth_auth::jwks::start(
            source.clone(),
            data_dir.map(|dir| dir.root().to_owned()),
        )?);
    }
    Ok(refreshers)
}

/// Binds the client listeners, `shards` sockets per address, with the first address bound.
pub(crate) fn bind(config: &ServeConfig, shards: usize) -> Result<(SocketAddr, Bound), StartError> {
    let bound = bind_listeners(&config.listen, shards).map_err(|source| StartError::Bind {
        addresses: format!("{:?}", config.listen),
        source,
    })?;
    let Some(&address) = bound.addresses.first() else {
        return Err(StartError::Bind {
            addresses: format!("{:?}", config.listen),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "no address"),
        });
    };
    Ok((address, bound))
}

/// The WebTransport endpoint of `--webtransport-listen`, when it is set.
pub(crate) fn prepare_webtransport(
    config: &ServeConfig,
) -> Result<Option<hearth_transport::webtransport::Prepared>, StartError> {
    Ok(match config.webtransport_listen {
        Some(listen) => Some(hearth_transport::webtransport::prepare(
            listen,
            config.tls.as_ref(),
            config.idle_timeout,
            config.ping_interval,
        )?),
        None => None,
    })
}

/// With a WebTransport endpoint, the queues through which the first shard hands each
/// session to a shard: the sending side, and each shard's receiving side.
pub(crate) fn spread_queues(
    webtransport: Option<&hearth_transport::webtransport::Prepared>,
    shards: usize,
) -> (
    Option<hearth_transport::webtransport::spread::Spread>,
    Vec<Option<mpsc::UnboundedReceiver<hearth_transport::webtransport::spread::Handed>>>,
) {
    match webtransport {
        Some(_) => {
            let (spread, handed) = hearth_transport::webtransport::spread::queues(shards);
            (Some(spread), handed.into_iter().map(Some).collect())
        }
        None => (None, Vec::new()),
    }
}

/// The certificates SIGHUP renews: the listeners', the node link's and the WebTransport
/// endpoint's.
pub(crate) fn certificates(
    config: &ServeConfig,
    webtransport: Option<&hearth_transport::webtransport::Prepared>,
) -> crate::reload::Certificates {
    crate::reload::Certificates {
        tls: config.tls.clone(),
        cluster: config
            .peers
            .as_ref()
            .and_then(|peers| match &peers.security {
                hearth_peer::LinkSecurity::Tls(tls) => Some(tls.clone()),
                hearth_peer::LinkSecurity::Plaintext => None,
            }),
        webtransport: webtransport.map(|prepared| prepared.reloader.clone()),
    }
}

/// Starts the node link of `--cluster-peers`, when it is set: its links become edges after
/// the local shards' (`edge_senders`), and the observer follows the other nodes.
pub(crate) fn start_peers(
    config: &ServeConfig,
    observer: &Arc<Observer>,
    senders: &[mpsc::UnboundedSender<ShardMessage>],
    edge_senders: &mut Vec<mpsc::UnboundedSender<ToEdge>>,
    shutdown_rx: &watch::Receiver<bool>,
) -> Result<Option<Arc<hearth_peer::Nodes>>, StartError> {
    let Some(cluster) = &config.peers else {
        return Ok(None);
    };
    let rest = hearth_peer::RestSettings {
        auth: config.auth.clone(),
        default_namespace: config.default_namespace.clone(),
        audit: config.audit.trail.clone(),
    };
    let started = hearth_peer::start(
        cluster,
        rest,
        senders.to_vec(),
        edge_senders.clone(),
        shutdown_rx.clone(),
    )
    .map_err(|source| StartError::Bind {
        addresses: format!(
            "the node link (this node's --cluster-peers entry or --advertise): {source}"
        ),
        source,
    })?;
    edge_senders.extend(started.edges);
    let lagged = started.nodes.clone();
    observer.follow(Box::new(move || lagged.lags()));
    let joining = started.nodes.clone();
    observer
        .health
        .wait_to_join(Box::new(move || joining.joining()));
    Ok(Some(started.nodes))
}

/// Starts the audit trail's thread over `<data dir>/audit` (docs/audit.md); without a data
/// directory there is none, and no database is audited.
pub(crate) fn start_audit(
    config: ServeConfig,
    data_dir: Option<&DataDir>,
) -> Result<ServeConfig, StartError> {
    let Some(data_dir) = data_dir else {
        return Ok(config);
    };
    let trail = hearth_audit::AuditTrail::start(data_dir.root().join("audit"))
        .map_err(StartError::Thread)?;
    Ok(ServeConfig {
        audit: hearth_config::AuditConfig {
            trail: Some(trail),
            ..config.audit
        },
        ..config
    })
}

/// Opens and locks the data directory and recovers every shard's store, the shards in
/// parallel. Nothing is opened with `--durability none`.
pub(crate) fn open_data_dir(
    config: &ServeConfig,
) -> Result<(Option<DataDir>, Vec<Option<Opened>>), StartError> {
    if config.persist.durability == Durability::None {
        return Ok((None, Vec::new()));
    }
    let requested = config.threads_from_flag.then_some(config.threads);
    let data_dir = DataDir::open(&config.data_dir, requested, config.threads.max(1))?;
    if config.persist.fault_storage.is_some() && data_dir.shards() != 1 {
        // One in-memory directory cannot stand for several shards' directories.
        return Err(DataDirError::BadShardCount(data_dir.shards()).into());
    }
    let started = Instant::now();
    let results: Vec<Result<Opened, StartError>> = std::thread::scope(|scope| {
        let tasks: Vec<_> = (0..data_dir.shards())
            .map(|shard| {
                let dir = data_dir.shard_dir(shard);
                let faults = config.persist.fault_storage.clone();
                scope.spawn(move || {
                    let opened = match faults {
                        Some(faults) => {
                            open_storage(ShardStorage::Faults(faults), Loading::OnFirstUse)
                        }
                        None => open_shard_dir(&dir, Loading::OnFirstUse),
                    };
                    opened.map_err(|source| StartError::Recovery {
                        shard,
                        dir: dir.display().to_string(),
                        source,
                    })
                })
            })
            .collect();
        tasks
            .into_iter()
            .map(|task| {
                task.join().unwrap_or_else(|_| {
                    Err(StartError::Thread(std::io::Error::other(
                        "a recovery thread panicked",
                    )))
                })
            })
            .collect()
    });
    let mut opened = Vec::with_capacity(results.len());
    for (shard, result) in results.into_iter().enumerate() {
        let result = result?;
        log_recovery(shard, &result.recovered);
        opened.push(Some(result));
    }
    info!(
        data_dir = %data_dir.root().display(),
        shards = data_dir.shards(),
        durability = ?config.persist.durability,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "data directory recovered"
    );
    Ok((Some(data_dir), opened))
}

fn log_recovery(shard: usize, recovered: &hearth_store::Recovered<ShardStorage>) {
    let report = &recovered.report;
    info!(
        shard,
        databases_loaded = recovered.databases.len(),
        databases_on_disk = recovered.on_disk.len(),
        snapshots = report.snapshots_loaded.len(),
        records_replayed = report.records_replayed,
        records_skipped = report.records_skipped,
        "shard recovered (databases on disk are loaded from their snapshot on first use)"
    );
    if let Some(cut) = &report.tail_cut {
        warn!(shard, ?cut, "recovery cut a torn or corrupt tail off the log (records after the last valid one, never acknowledged)");
    }
    for (name, reason) in &report.snapshots_unreadable {
        warn!(shard, snapshot = %name, %reason, "unreadable snapshot skipped; an older one and the log were used");
    }
    if !report.temporary_files_removed.is_empty() {
        info!(shard, files = ?report.temporary_files_removed, "removed leftover temporary files (unfinished snapshots, the spare log segment)");
    }
}
