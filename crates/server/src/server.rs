//! Starting the shards and stopping them.

use std::net::{SocketAddr, TcpListener};
use std::rc::Rc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::LocalSet;
use tracing::{debug, info, warn};

use crate::scrape::Observer;
use crate::shard::{metrics_snapshot, Queues, Shard};
use crate::startup::{
    bind, certificates, open_data_dir, prepare_webtransport, spread_queues, start_audit,
    start_jwks, start_metrics, start_peers, StartError,
};
use hearth_auth::jwks::JwksRefresher;
use hearth_config::ServeConfig;
use hearth_ground::cross_core::ToEdge;
use hearth_ground::inbox::ShardMessage;
use hearth_ground::metrics::labels::CloseCause;
use hearth_ground::metrics::ShardCounters;
use hearth_net::listener::Bound;
use hearth_net::port_claim::PortClaim;
use hearth_owner::durability::{commit_loop, flush_at_shutdown, snapshot_all};
use hearth_owner::rest::execute_durable;
use hearth_owner::rest_precheck::refuse_early;
use hearth_persist::data_dir::DataDir;
use hearth_persist::{Opened, ShardStore};
use hearth_transport::Front;

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
    _jwks: Vec<JwksRefresher>,
    /// What SIGHUP renews.
    certificates: crate::reload::Certificates,
}

impl Server {
    /// Binds the listeners and starts one pinned thread per shard.
    pub fn start(config: ServeConfig) -> Result<Server, StartError> {
        let (shutdown, shutdown_rx) = watch::channel(false);
        let observer = Observer::new(config.http.clone());
        // Bound and served before the data directory is recovered: `/readyz` says so
        // meanwhile. A failed start drops `shutdown`, which stops it.
        let metrics_thread = start_metrics(&config, &observer, &shutdown_rx)?;
        let (data_dir, opened) = open_data_dir(&config)?;
        let config = start_audit(config, data_dir.as_ref())?;
        // Before the listeners: the first tokens find the keys in place.
        let jwks = start_jwks(&config, data_dir.as_ref())?;
        let shards = data_dir
            .as_ref()
            .map_or(config.threads.max(1), DataDir::shards);
        let (
            address,
            Bound {
                per_shard: listeners,
                addresses: bound,
                claims,
            },
        ) = bind(&config, shards)?;
        let config = ServeConfig {
            listen: bound.clone(),
            ..config
        };
        // Accepted by the first shard, served by all (see `webtransport`).
        let webtransport = prepare_webtransport(&config)?;
        let webtransport_info = webtransport
            .as_ref()
            .map(|prepared| (prepared.address, prepared.certificate_sha256));
        let certificates = certificates(&config, webtransport.as_ref());
        // The first shard accepts every session and hands each to a shard (`spread`).
        let (spread, handed) = spread_queues(webtransport.as_ref(), shards);
        let (senders, receivers): (Vec<_>, Vec<_>) =
            (0..shards).map(|_| mpsc::unbounded_channel()).unzip();
        observer.connect(senders.clone());
        if let Some(placement) = &config.cluster {
            observer.join_cluster(placement.clone());
        }
        observer.watch_triggers(config.triggers.clone());
        if let Some(trail) = &config.audit.trail {
            observer.watch_audit(trail.clone());
        }
        if config.auth.app_check.is_some() {
            observer.watch_app_check();
        }
        let (mut edge_senders, edge_receivers): (Vec<_>, Vec<_>) =
            (0..shards).map(|_| mpsc::unbounded_channel()).unzip();
        // The other nodes are edges of every shard's owner role after the local shards.
        let nodes = start_peers(
            &config,
            &observer,
            &senders,
            &mut edge_senders,
            &shutdown_rx,
        )?;
        let shared = Shared {
            config,
            owners: senders,
            edges: edge_senders,
            nodes,
            shutdown: shutdown_rx,
            observer: observer.clone(),
        };
        let channels = receivers.into_iter().zip(edge_receivers);
        let threads = spawn_shards(
            &shared,
            listeners,
            channels,
            opened,
            webtransport.zip(spread),
            handed,
        )?;
        for address in &bound {
            info!(%address, shards, dev = shared.config.dev, "listening on {address}");
        }
        if let Some(first) = bound.first() {
            info!(
                "{}",
                ready_line(*first, shared.config.tls.is_some(), shared.config.dev)
            );
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

/// What every shard's thread is given a copy of: the configuration, the channels to the
/// other shards and nodes, and the server's shutdown and observer.
#[derive(Clone)]
struct Shared {
    config: ServeConfig,
    owners: Vec<mpsc::UnboundedSender<ShardMessage>>,
    edges: Vec<mpsc::UnboundedSender<ToEdge>>,
    nodes: Option<Arc<hearth_peer::Nodes>>,
    shutdown: watch::Receiver<bool>,
    observer: Arc<Observer>,
}

/// The receiving ends of a shard's channels: as an owner, and as an edge.
type Receivers = (
    mpsc::UnboundedReceiver<ShardMessage>,
    mpsc::UnboundedReceiver<ToEdge>,
);

/// Starts one pinned thread per shard, each with its share: its listeners, its recovered
/// store, its channels' receiving ends and, for the first shard, the WebTransport endpoint.
fn spawn_shards(
    shared: &Shared,
    listeners: Vec<Vec<TcpListener>>,
    channels: impl Iterator<Item = Receivers>,
    mut opened: Vec<Option<Opened>>,
    mut webtransport: Option<(
        hearth_transport::webtransport::Prepared,
        hearth_transport::webtransport::spread::Spread,
    )>,
    mut handed: Vec<
        Option<mpsc::UnboundedReceiver<hearth_transport::webtransport::spread::Handed>>,
    >,
) -> Result<Vec<JoinHandle<()>>, StartError> {
    let cores = core_affinity::get_core_ids().unwrap_or_default();
    let mut threads = Vec::with_capacity(listeners.len());
    for (index, (listeners, (receiver, edge_receiver))) in
        listeners.into_iter().zip(channels).enumerate()
    {
        let shared = shared.clone();
        let opened = opened.get_mut(index).and_then(Option::take);
        let core = (!cores.is_empty()).then(|| cores[index % cores.len()]);
        let sockets = Sockets {
            listeners,
            webtransport: webtransport.take(),
            handed: handed.get_mut(index).and_then(Option::take),
        };
        let thread = std::thread::Builder::new()
            .name(format!("hearth-shard-{index}"))
            .spawn(move || {
                if let Some(core) = core {
                    core_affinity::set_for_current(core);
                }
                let links = Links {
                    owner_rx: receiver,
                    owners: shared.owners,
                    edge_rx: edge_receiver,
                    edges: shared.edges,
                    nodes: shared.nodes,
                };
                let Shared {
                    config,
                    shutdown,
                    observer,
                    ..
                } = shared;
                run_shard(index, config, opened, sockets, links, shutdown, observer);
            })
            .map_err(StartError::Thread)?;
        threads.push(thread);
    }
    Ok(threads)
}

/// What a shard serves clients on: its share of the TCP listeners, the WebTransport
/// endpoint and the spread of its sessions (the first shard's, when there is one), and the
/// WebTransport sessions handed to this shard.
struct Sockets {
    listeners: Vec<TcpListener>,
    webtransport: Option<(
        hearth_transport::webtransport::Prepared,
        hearth_transport::webtransport::spread::Spread,
    )>,
    handed: Option<mpsc::UnboundedReceiver<hearth_transport::webtransport::spread::Handed>>,
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
    nodes: Option<Arc<hearth_peer::Nodes>>,
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
    let queues = Queues {
        peers: links.owners,
        edges: links.edges,
    };
    let shard = Shard::with_store(
        index,
        Rc::new(config),
        shutdown,
        queues,
        store,
        observer,
        links.nodes,
    );
    let shard = Rc::new(shard);
    shard.owner().add_recovered(recovered);
    // Before any write of this shard: the trail copies what the log holds and it lacks.
    hearth_owner::side::catch_up(shard.owner());
    shard.observer().health.shard_started();
    let front = shard.front().clone();
    let local = LocalSet::new();
    local.block_on(&runtime, async move {
        tokio::task::spawn_local(receive_for_owner(front.clone(), links.owner_rx));
        tokio::task::spawn_local(receive_batches(front.clone(), links.edge_rx));
        let outgoing = shard.owner().outgoing().clone();
        tokio::task::spawn_local(async move { outgoing.run().await });
        tokio::task::spawn_local(commit_loop(shard.owner().clone()));
        tokio::task::spawn_local(hearth_owner::replica::run(shard.owner().clone()));
        tokio::task::spawn_local(hearth_owner::volatile::tick_loop(shard.owner().clone()));
        if let Some((prepared, spread)) = webtransport {
            tokio::task::spawn_local(hearth_transport::webtransport::serve(
                front.clone(),
                prepared,
                spread,
            ));
        }
        if let Some(handed) = handed {
            tokio::task::spawn_local(hearth_transport::webtransport::serve_handed(
                front.clone(),
                handed,
            ));
        }
        let mut accepting = Vec::new();
        for listener in listeners {
            match tokio::net::TcpListener::from_std(listener) {
                Ok(listener) => accepting.push(tokio::task::spawn_local(
                    hearth_transport::accept::accept_loop(front.clone(), listener),
                )),
                Err(error) => warn!(%error, shard = index, "cannot register a listener"),
            }
        }
        for task in accepting {
            let _ = task.await;
        }
        shard.drain(SHUTDOWN_GRACE).await;
        flush_at_shutdown(shard.owner()).await;
        snapshot_all(shard.owner());
        log_stopped(index, front.counters());
    });
}

/// Logs what a shard that stopped did: its connections and their closes by cause.
fn log_stopped(index: usize, counters: &ShardCounters) {
    let counters = counters.snapshot();
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
}

/// Writes the batches other shards' databases send to the connections this shard holds.
async fn receive_batches(front: Rc<Front>, mut receiver: mpsc::UnboundedReceiver<ToEdge>) {
    while let Some(batch) = receiver.recv().await {
        hearth_transport::serve::on_batch(&front, batch);
    }
}

async fn receive_for_owner(front: Rc<Front>, mut receiver: mpsc::UnboundedReceiver<ShardMessage>) {
    while let Some(message) = receiver.recv().await {
        // A scrape is answered even while an edge is behind: it must show that state.
        if front.owner().outgoing().is_full() && !matches!(message, ShardMessage::Metrics(_)) {
            // An edge is far behind on what this shard's databases sent it: take no new
            // request until it catches up.
            front.owner().outgoing().room().await;
        }
        match message {
            ShardMessage::Owner(message) => {
                // The pushes it makes to this core's sockets leave together.
                let _sends = front.edge().send_batch();
                hearth_owner::intake::on_link_message(front.owner(), message);
            }
            ShardMessage::Metrics(reply) => {
                let _ = reply.send(metrics_snapshot(&front, receiver.len()));
            }
            ShardMessage::Databases(reply) => {
                let _ = reply.send(hearth_transport::admin::local_databases(front.owner()));
            }
            ShardMessage::Precheck(precheck) => {
                let _ = precheck
                    .reply
                    .send(refuse_early(front.owner(), &precheck.check));
            }
            ShardMessage::BackupCut(reply) => {
                let front = front.clone();
                tokio::task::spawn_local(async move {
                    let _ =
                        reply.send(crate::backup::cut::take(front.inboxes(), front.owner()).await);
                });
            }
            ShardMessage::BackupDone => crate::backup::cut::release(front.owner()),
            ShardMessage::Replica(message) => {
                hearth_owner::replica::on_message(front.owner(), message)
            }
            // A poll of a session this core holds, which landed on another core.
            ShardMessage::LongPoll(forwarded) => {
                let forwarded = *forwarded;
                hearth_transport::longpoll::on_request(&front, forwarded.request, forwarded.reply);
            }
            // A WebSocket taking over a session this core holds, which landed on another.
            ShardMessage::Upgrade(moved) => {
                tokio::task::spawn_local(hearth_transport::longpoll::secondary::serve_moved(
                    front.clone(),
                    *moved,
                ));
            }
            ShardMessage::Rest(forwarded) => {
                // Answered at once: the request was read and checked on the shard that
                // received it, so only the database work is left.
                let forwarded = *forwarded;
                let front = front.clone();
                tokio::task::spawn_local(async move {
                    let response = execute_durable(front.owner(), forwarded.call).await;
                    let _ = forwarded.reply.send(response);
                });
            }
        }
    }
}

/// The line that tells a newcomer where to go once the server listens: the URL the SDKs take
/// (`databaseURL`), the console, and in development the admin token.
fn ready_line(address: SocketAddr, tls: bool, dev: bool) -> String {
    let scheme = if tls { "https" } else { "http" };
    // A server on every address is reached on this machine through loopback.
    let host = match address.ip() {
        ip if ip.is_unspecified() => format!("localhost:{}", address.port()),
        _ => address.to_string(),
    };
    let mut line = format!(
        "ready: give the SDKs databaseURL {scheme}://{host}?ns=<database>; the console is at \
         {scheme}://{host}{}/",
        hearth_transport::console::CONSOLE_PATH
    );
    if dev {
        line.push_str(" (--dev: `owner` is an admin token)");
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ready_line_names_the_sdk_url_and_the_console() {
        let line = ready_line(SocketAddr::from(([0, 0, 0, 0], 9000)), false, true);
        assert_eq!(
            line,
            "ready: give the SDKs databaseURL http://localhost:9000?ns=<database>; the console \
             is at http://localhost:9000/_/console/ (--dev: `owner` is an admin token)"
        );
        let tls = ready_line(SocketAddr::from(([10, 0, 0, 2], 443)), true, false);
        assert!(tls.starts_with("ready: give the SDKs databaseURL https://10.0.0.2:443?ns="));
        assert!(!tls.contains("owner"));
    }
}
