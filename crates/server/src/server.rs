//! Starting the shards and stopping them.

use std::net::{SocketAddr, TcpListener};
use std::rc::Rc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, watch};
use tokio::task::LocalSet;
use tracing::{debug, info, warn};

use crate::accept_backoff::AcceptBackoff;
use crate::config::ServeConfig;
use crate::edge::http::serve_http;
use crate::edge::socket::Accepted;
use crate::edge::websocket::serve_websocket;
use crate::http_head::{read_head, HeadError};
use crate::inbox::ShardMessage;
use crate::jwks::{JwksError, JwksRefresher};
use crate::link::ToEdge;
use crate::listener::{bind_listeners, Bound};
use crate::metrics::labels::{CloseCause, HttpRefusal};
use crate::metrics::{bind_metrics_listener, serve_metrics, Observer};
use crate::namespace::resolve;
use crate::owner::durability::{commit_loop, flush_at_shutdown, snapshot_all};
use crate::owner::rest::execute_durable;
use crate::owner::rest_precheck::refuse_early;
use crate::port_claim::PortClaim;
use crate::shard::Shard;
use crate::tls::handshake;
use crate::{edge, owner};
use hearth_persist::data_dir::{DataDir, DataDirError};
use hearth_persist::{
    open_shard_dir, open_storage, Durability, Loading, Opened, ShardStorage, ShardStore,
};

/// How long shutdown waits for connections to close and run their onDisconnect queues.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// A running server.
pub struct Server {
    pub address: SocketAddr,
    /// Where `--metrics-listen` serves, once bound.
    pub metrics_address: Option<SocketAddr>,
    /// Where `--webtransport-listen` serves, and its certificate's SHA-256 at start (SIGHUP
    /// may replace it: `reload_certificates`).
    pub webtransport: Option<(SocketAddr, [u8; 32])>,
    observer: Arc<Observer>,
    shutdown: watch::Sender<bool>,
    threads: Vec<JoinHandle<()>>,
    /// The locked data directory; released when the server is dropped, after the shards
    /// stopped.
    _data_dir: Option<DataDir>,
    /// The ports no other Hearth server may join while this one runs.
    _port_claims: Vec<PortClaim>,
    /// Keeps the Firebase signing keys fresh; stopped when the server is dropped.
    _jwks: Option<JwksRefresher>,
    /// What SIGHUP renews.
    certificates: crate::reload::Certificates,
}

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
    WebTransport(#[from] crate::webtransport::WebTransportError),
    #[error("--firebase-jwks-url: {0}")]
    Jwks(#[from] JwksError),
    #[error("cannot recover shard {shard} from {dir}: {source}")]
    Recovery {
        shard: usize,
        dir: String,
        source: hearth_store::StoreError,
    },
}

impl Server {
    /// Binds the listeners and starts one pinned thread per shard.
    pub fn start(config: ServeConfig) -> Result<Server, StartError> {
        let (shutdown, shutdown_rx) = watch::channel(false);
        let observer = Observer::new(config.http.clone());
        // Bound and served before the data directory is recovered: `/readyz` says so
        // meanwhile. A failed start drops `shutdown`, which stops it.
        let metrics_thread = match config.metrics.listen {
            Some(address) => {
                let listener =
                    bind_metrics_listener(address).map_err(|source| StartError::Bind {
                        addresses: format!("--metrics-listen {address}"),
                        source,
                    })?;
                let metrics_address = listener.local_addr().ok();
                let thread = serve_metrics(listener, observer.clone(), shutdown_rx.clone())
                    .map_err(StartError::Thread)?;
                Some((thread, metrics_address))
            }
            None => None,
        };
        let (data_dir, mut opened) = open_data_dir(&config)?;
        // Before the listeners: the first tokens find the keys in place.
        let jwks = match &config.firebase_jwks {
            Some(source) => Some(crate::jwks::start(
                source.clone(),
                data_dir.as_ref().map(|dir| dir.root().to_owned()),
            )?),
            None => None,
        };
        let shards = data_dir
            .as_ref()
            .map_or(config.threads.max(1), DataDir::shards);
        let Bound {
            per_shard: listeners,
            addresses: bound,
            claims,
        } = bind_listeners(&config.listen, shards).map_err(|source| StartError::Bind {
            addresses: format!("{:?}", config.listen),
            source,
        })?;
        let Some(&address) = bound.first() else {
            return Err(StartError::Bind {
                addresses: format!("{:?}", config.listen),
                source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "no address"),
            });
        };
        let config = ServeConfig {
            listen: bound.clone(),
            ..config
        };
        // Accepted by the first shard, served by all (see `webtransport`).
        let mut webtransport = match config.webtransport_listen {
            Some(listen) => Some(crate::webtransport::prepare(
                listen,
                config.tls.as_ref(),
                config.idle_timeout,
                config.ping_interval,
            )?),
            None => None,
        };
        let webtransport_info = webtransport
            .as_ref()
            .map(|prepared| (prepared.address, prepared.certificate_sha256));
        let certificates = crate::reload::Certificates {
            tls: config.tls.clone(),
            cluster: config
                .peers
                .as_ref()
                .and_then(|peers| match &peers.security {
                    crate::peer::LinkSecurity::Tls(tls) => Some(tls.clone()),
                    crate::peer::LinkSecurity::Plaintext => None,
                }),
            webtransport: webtransport
                .as_ref()
                .map(|prepared| prepared.reloader.clone()),
        };
        // The first shard accepts every session and hands each to a shard (`spread`).
        let (mut spread, mut handed) = match &webtransport {
            Some(_) => {
                let (spread, handed) = crate::webtransport::spread::queues(shards);
                (Some(spread), handed.into_iter().map(Some).collect())
            }
            None => (None, Vec::new()),
        };
        let (senders, receivers): (Vec<_>, Vec<_>) =
            (0..shards).map(|_| mpsc::unbounded_channel()).unzip();
        observer.connect(senders.clone());
        if let Some(placement) = &config.cluster {
            observer.join_cluster(placement.clone());
        }
        let (mut edge_senders, edge_receivers): (Vec<_>, Vec<_>) =
            (0..shards).map(|_| mpsc::unbounded_channel()).unzip();
        // The other nodes are edges of every shard's owner role after the local shards.
        let nodes = match &config.peers {
            Some(cluster) => {
                let rest = crate::peer::RestSettings {
                    auth: config.auth.clone(),
                    default_namespace: config.default_namespace.clone(),
                };
                let started = crate::peer::start(
                    cluster,
                    rest,
                    senders.clone(),
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
                Some(started.nodes)
            }
            None => None,
        };
        let cores = core_affinity::get_core_ids().unwrap_or_default();
        let mut threads = Vec::with_capacity(shards);
        let channels = receivers.into_iter().zip(edge_receivers);
        for (index, (listeners, (receiver, edge_receiver))) in
            listeners.into_iter().zip(channels).enumerate()
        {
            let config = config.clone();
            let edge_senders = edge_senders.clone();
            let opened = opened.get_mut(index).and_then(Option::take);
            let shutdown_rx = shutdown_rx.clone();
            let senders = senders.clone();
            let observer = observer.clone();
            let core = (!cores.is_empty()).then(|| cores[index % cores.len()]);
            let webtransport = webtransport.take().zip(spread.take());
            let handed = handed.get_mut(index).and_then(Option::take);
            let nodes = nodes.clone();
            let thread = std::thread::Builder::new()
                .name(format!("hearth-shard-{index}"))
                .spawn(move || {
                    if let Some(core) = core {
                        core_affinity::set_for_current(core);
                    }
                    run_shard(
                        index,
                        config,
                        opened,
                        Sockets {
                            listeners,
                            webtransport,
                            handed,
                        },
                        Links {
                            owner_rx: receiver,
                            owners: senders,
                            edge_rx: edge_receiver,
                            edges: edge_senders,
                            nodes,
                        },
                        shutdown_rx,
                        observer,
                    );
                })
                .map_err(StartError::Thread)?;
            threads.push(thread);
        }
        for address in &bound {
            info!(%address, shards, dev = config.dev, "listening on {address}");
        }
        let (metrics_address, threads) = match metrics_thread {
            Some((thread, address)) => (address, threads.into_iter().chain([thread]).collect()),
            None => (None, threads),
        };
        Ok(Server {
            address,
            metrics_address,
            webtransport: webtransport_info,
            observer,
            shutdown,
            threads,
            _data_dir: data_dir,
            _port_claims: claims,
            _jwks: jwks,
            certificates,
        })
    }

    /// Reads the TLS certificate and key again (SIGHUP), for the TCP listeners and the
    /// WebTransport endpoint, or makes the endpoint a new self-signed certificate: new
    /// connections and sessions get it, open ones keep theirs. Logs what happened.
    pub fn reload_certificates(&self) {
        self.certificates.reload();
    }

    /// Stops accepting, closes every connection (running onDisconnect queues) and waits for
    /// the shards to finish.
    pub fn stop(self) {
        self.observer.health.stopping();
        let _ = self.shutdown.send(true);
        for thread in self.threads {
            let _ = thread.join();
        }
    }
}

/// Opens and locks the data directory and recovers every shard's store, the shards in
/// parallel. Nothing is opened with `--durability none`.
fn open_data_dir(
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

/// What a shard serves clients on: its share of the TCP listeners, the WebTransport
/// endpoint and the spread of its sessions (the first shard's, when there is one), and the
/// WebTransport sessions handed to this shard.
struct Sockets {
    listeners: Vec<TcpListener>,
    webtransport: Option<(
        crate::webtransport::Prepared,
        crate::webtransport::spread::Spread,
    )>,
    handed: Option<mpsc::UnboundedReceiver<crate::webtransport::spread::Handed>>,
}

/// A shard's channels to and from the other shards.
struct Links {
    /// Connections, REST requests and sessions' messages for this shard's databases.
    owner_rx: mpsc::UnboundedReceiver<ShardMessage>,
    owners: Vec<mpsc::UnboundedSender<ShardMessage>>,
    /// Batches for the connections this shard holds.
    edge_rx: mpsc::UnboundedReceiver<ToEdge>,
    edges: Vec<mpsc::UnboundedSender<ToEdge>>,
    /// The other nodes of a cluster, whose links are owners and edges past the shards.
    nodes: Option<Arc<crate::peer::Nodes>>,
}

fn run_shard(
    index: usize,
    config: ServeConfig,
    opened: Option<Opened>,
    sockets: Sockets,
    links: Links,
    shutdown: watch::Receiver<bool>,
    observer: Arc<Observer>,
) {
    let Sockets {
        listeners,
        webtransport,
        handed,
    } = sockets;
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            warn!(%error, shard = index, "cannot build the shard runtime");
            return;
        }
    };
    let persist = config.persist.clone();
    let (store, recovered) = match opened {
        Some(opened) => {
            let (store, recovered) = ShardStore::new(opened, persist);
            (Some(store), recovered)
        }
        None => (None, Default::default()),
    };
    let mut shard = Shard::with_store(
        index,
        Rc::new(config),
        shutdown,
        links.owners,
        links.edges,
        store,
        observer,
    );
    shard.replication = (links.nodes.as_ref())
        .map(|nodes| crate::replica::replication::Replication::new(nodes, index));
    shard.nodes = links.nodes;
    let shard = Rc::new(shard);
    shard.add_recovered(recovered);
    shard.observer.health.shard_started();
    let local = LocalSet::new();
    local.block_on(&runtime, async move {
        tokio::task::spawn_local(receive_for_owner(shard.clone(), links.owner_rx));
        tokio::task::spawn_local(receive_batches(shard.clone(), links.edge_rx));
        let outgoing = shard.owner.outgoing().clone();
        tokio::task::spawn_local(async move { outgoing.run().await });
        tokio::task::spawn_local(commit_loop(shard.clone()));
        tokio::task::spawn_local(crate::replica::run(shard.clone()));
        tokio::task::spawn_local(crate::owner::volatile::tick_loop(shard.clone()));
        if let Some((prepared, spread)) = webtransport {
            tokio::task::spawn_local(crate::webtransport::serve(shard.clone(), prepared, spread));
        }
        if let Some(handed) = handed {
            tokio::task::spawn_local(crate::webtransport::serve_handed(shard.clone(), handed));
        }
        let mut accepting = Vec::new();
        for listener in listeners {
            match tokio::net::TcpListener::from_std(listener) {
                Ok(listener) => accepting.push(tokio::task::spawn_local(accept_loop(
                    shard.clone(),
                    listener,
                ))),
                Err(error) => warn!(%error, shard = index, "cannot register a listener"),
            }
        }
        for task in accepting {
            let _ = task.await;
        }
        shard.drain(SHUTDOWN_GRACE).await;
        flush_at_shutdown(&shard).await;
        snapshot_all(&shard);
        let counters = shard.counters.snapshot();
        let closes: Vec<_> = CloseCause::ALL
            .iter()
            .zip(&counters.closes)
            .filter(|(_, count)| **count > 0)
            .map(|(cause, count)| format!("{}={count}", cause.label()))
            .collect();
        info!(
            shard = index,
            websockets_opened = counters.websockets_opened,
            held_for_others = counters.held_for_others,
            closes = closes.join(" "),
            "shard stopped"
        );
        debug!(shard = index, ?counters, "shard stopped");
    });
}

async fn accept_loop(shard: Rc<Shard>, listener: tokio::net::TcpListener) {
    let mut shutdown = shard.shutdown.clone();
    let mut backoff = AcceptBackoff::default();
    loop {
        if shard.is_shutting_down() {
            return;
        }
        let pause = tokio::select! {
            _ = shutdown.changed() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    backoff.succeeded();
                    let _ = stream.set_nodelay(true);
                    if shard.config.tls.is_some() {
                        tokio::task::spawn_local(route_tls_connection(shard.clone(), stream));
                    } else {
                        tokio::task::spawn_local(route_connection(shard.clone(), stream));
                    }
                    continue;
                }
                Err(error) => {
                    // Running out of file descriptors must not end the loop; wait and retry.
                    let after = backoff.failed(Instant::now());
                    if let Some(unlogged) = after.log {
                        warn!(%error, unlogged, pause = ?after.pause, "accept failed; backing off");
                    }
                    after.pause
                }
            },
        };
        tokio::select! {
            _ = shutdown.changed() => return,
            () = tokio::time::sleep(pause) => {}
        }
    }
}

/// Writes the batches other shards' databases send to the connections this shard holds.
async fn receive_batches(shard: Rc<Shard>, mut receiver: mpsc::UnboundedReceiver<ToEdge>) {
    while let Some(batch) = receiver.recv().await {
        edge::on_batch(&shard, batch);
    }
}

async fn receive_for_owner(shard: Rc<Shard>, mut receiver: mpsc::UnboundedReceiver<ShardMessage>) {
    while let Some(message) = receiver.recv().await {
        // A scrape is answered even while an edge is behind: it must show that state.
        if shard.owner.outgoing().is_full() && !matches!(message, ShardMessage::Metrics(_)) {
            // An edge is far behind on what this shard's databases sent it: take no new
            // request until it catches up.
            shard.owner.outgoing().room().await;
        }
        match message {
            ShardMessage::Owner(message) => {
                // The pushes it makes to this core's sockets leave together.
                let _sends = shard.edge.send_batch();
                owner::on_link_message(&shard, message);
            }
            ShardMessage::Metrics(reply) => {
                let _ = reply.send(shard.metrics_snapshot(receiver.len()));
            }
            ShardMessage::Databases(reply) => {
                let _ = reply.send(crate::admin::local_databases(&shard));
            }
            ShardMessage::Precheck(precheck) => {
                let _ = precheck.reply.send(refuse_early(&shard, &precheck.check));
            }
            ShardMessage::BackupCut(reply) => {
                let shard = shard.clone();
                tokio::task::spawn_local(async move {
                    let _ = reply.send(crate::backup::cut::take(&shard).await);
                });
            }
            ShardMessage::BackupDone => crate::backup::cut::release(&shard),
            ShardMessage::Replica(message) => crate::replica::on_message(&shard, message),
            // A poll of a session this core holds, which landed on another core.
            ShardMessage::LongPoll(forwarded) => {
                let forwarded = *forwarded;
                crate::longpoll::on_request(&shard, forwarded.request, forwarded.reply);
            }
            // A WebSocket taking over a session this core holds, which landed on another.
            ShardMessage::Upgrade(moved) => {
                tokio::task::spawn_local(crate::longpoll::secondary::serve_moved(
                    shard.clone(),
                    *moved,
                ));
            }
            ShardMessage::Rest(forwarded) => {
                // Answered at once: the request was read and checked on the shard that
                // received it, so only the database work is left.
                let forwarded = *forwarded;
                let shard = shard.clone();
                tokio::task::spawn_local(async move {
                    let response = execute_durable(&shard, forwarded.call).await;
                    let _ = forwarded.reply.send(response);
                });
            }
        }
    }
}

/// Answers a request head that cannot be served (too large or malformed) before closing, so
/// that an HTTP client learns why. Connections that closed or timed out get nothing.
async fn refuse_head<S: AsyncWrite + Unpin>(stream: &mut S, error: &HeadError) {
    let status = match error {
        HeadError::TooLarge => "431 Request Header Fields Too Large",
        HeadError::Malformed(_) => "400 Bad Request",
        HeadError::Closed | HeadError::Timeout | HeadError::Io(_) => return,
    };
    let body = serde_json::json!({ "error": error.to_string() }).to_string();
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(
        Duration::from_secs(5),
        stream.write_all(response.as_bytes()),
    )
    .await;
}

/// Completes the TLS handshake in the connection's own task (the shard's loop goes on
/// meanwhile), then serves the connection like a plain one.
async fn route_tls_connection(shard: Rc<Shard>, stream: tokio::net::TcpStream) {
    let Some(certs) = shard.config.tls.clone() else {
        return;
    };
    match handshake(&certs, stream).await {
        // A task of its own, sized for what the connection does next: this one holds the
        // handshake's state, kilobytes that an idle connection would otherwise keep.
        Ok(stream) => drop(tokio::task::spawn_local(route_connection(shard, stream))),
        Err(error) => debug!(%error, "dropping connection before a request"),
    }
}

/// Reads the first request head and serves the connection here: as a WebSocket connection,
/// or over HTTP.
async fn route_connection<S: Accepted>(shard: Rc<Shard>, mut stream: S) {
    let read = match read_head(&mut stream).await {
        Ok(read) => read,
        Err(error) => {
            debug!(%error, "dropping connection before a request");
            match error {
                HeadError::TooLarge => shard.counters.http_refused(HttpRefusal::HeadTooLarge),
                HeadError::Malformed(_) => shard.counters.http_refused(HttpRefusal::HeadMalformed),
                HeadError::Closed | HeadError::Timeout | HeadError::Io(_) => {}
            }
            refuse_head(&mut stream, &error).await;
            return;
        }
    };
    // A connection stays where it landed: its requests go to their database's owner
    // (`link`).
    if read.head.is_realtime_upgrade() {
        let namespace = resolve(
            read.head.query_param("ns"),
            read.head.header("host"),
            &shard.config.default_namespace,
        );
        let (head, leftover) = read.after_head();
        if head.query_param("s").is_some() {
            // The web SDK moving a long-polling session onto a WebSocket.
            crate::longpoll::secondary::serve(shard, stream, head, leftover, namespace).await;
        } else {
            // A task of its own, sized for the connection's life: this one also holds what
            // reading the head and serving HTTP need (BENCHMARKS.md §9, idle connections).
            drop(tokio::task::spawn_local(serve_websocket(
                shard, stream, head, leftover, namespace,
            )));
        }
    } else {
        serve_http(shard, stream, read.buffered).await;
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;

    use tokio::net::TcpStream;

    use super::*;
    use crate::http_head::Head;

    fn future_bytes<A, B, F: Future>(_: impl Fn(A, B) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// An idle WebSocket connection keeps its task for its whole life: the task holds the
    /// connection's loop only, not what reading the head, serving HTTP or a TLS handshake
    /// needed (each kilobytes: 2.6 KiB in all for a plain connection, 8 KiB over TLS, when
    /// one task did everything). Sizes of a debug build, which are larger than a release's.
    #[test]
    fn a_websocket_connection_task_holds_only_its_loop() {
        let websocket = future_bytes(|shard: Rc<Shard>, (stream, head): (TcpStream, Head)| {
            serve_websocket(shard, stream, head, Vec::new(), Ok(String::new()))
        });
        let http = future_bytes(|shard: Rc<Shard>, stream: TcpStream| {
            serve_http(shard, stream, Vec::new())
        });
        let routing = future_bytes(route_connection::<TcpStream>);
        let tls = future_bytes(route_tls_connection);
        eprintln!("websocket {websocket}, http {http}, routing {routing}, tls {tls}");
        assert!(
            websocket <= 2560,
            "the WebSocket task grew to {websocket} bytes"
        );
    }
}
