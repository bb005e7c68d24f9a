//! `hearth serve`: the server configured from its options, its authentication and cluster
//! settings, the cluster joined, and the signals it answers until it stops.

use std::time::Duration;

use anyhow::Context;
use hearth_server::auth::app_check::AppCheckConfig;
use hearth_server::auth::AuthConfig;
use hearth_server::budget::HttpBudgets;
use hearth_server::config::{AuditConfig, MetricsConfig, ServerTriggers};
use hearth_server::jwks::{FirebaseKeys, JwksSource, KeyPurpose};
use hearth_server::rules_file::load_rules;
use hearth_server::tls::TlsCerts;
use hearth_server::{ServeConfig, Server, DEFAULT_NAMESPACE};
use tracing::{info, warn};

use crate::cluster_link;
use crate::firebase_json::FirebaseJson;
use crate::serve_args::{persist_config, ReplicationArg, ServeArgs, MIB};

fn auth_config(args: &ServeArgs) -> anyhow::Result<AuthConfig> {
    let mut keys = Vec::new();
    for file in &args.jwt_keys {
        keys.extend(AuthConfig::load_keys(file, false)?);
    }
    let firebase_keys = args
        .firebase_project
        .as_ref()
        .map(|_| FirebaseKeys::default());
    Ok(AuthConfig {
        dev: args.dev,
        admin_token: args.admin_token.clone().filter(|token| !token.is_empty()),
        hs256_secret: args
            .jwt_secret
            .as_ref()
            .filter(|secret| !secret.is_empty())
            .map(|secret| secret.as_bytes().to_vec()),
        keys,
        firebase_project: args.firebase_project.clone(),
        firebase_keys,
        app_check: args
            .app_check_project_number
            .as_ref()
            .map(|number| AppCheckConfig {
                project_number: number.clone(),
                project_id: args.firebase_project.clone(),
                keys: Vec::new(),
                fetched: Some(FirebaseKeys::default()),
            }),
    })
}

/// Where the Firebase keys come from, when `--firebase-project` is set.
fn jwks_source(args: &ServeArgs, auth: &AuthConfig) -> anyhow::Result<Option<JwksSource>> {
    let Some(keys) = auth.firebase_keys.clone() else {
        return Ok(None);
    };
    let fallback = match &args.firebase_jwks {
        Some(file) => AuthConfig::load_keys(file, true)?,
        None => Vec::new(),
    };
    Ok(Some(JwksSource {
        purpose: KeyPurpose::IdTokens,
        url: args.firebase_jwks_url.clone(),
        fallback,
        min_refresh: Duration::from_millis(args.firebase_jwks_min_refresh_ms.max(1)),
        keys,
    }))
}

/// Where the App Check keys come from, when `--app-check-project-number` is set.
fn app_check_source(args: &ServeArgs, auth: &AuthConfig) -> anyhow::Result<Option<JwksSource>> {
    let Some(keys) = auth
        .app_check
        .as_ref()
        .and_then(|config| config.fetched.clone())
    else {
        return Ok(None);
    };
    let fallback = match &args.app_check_jwks {
        Some(file) => AuthConfig::load_keys(file, false)?,
        None => Vec::new(),
    };
    Ok(Some(JwksSource {
        purpose: KeyPurpose::AppCheck,
        url: args.app_check_jwks_url.clone(),
        fallback,
        min_refresh: Duration::from_millis(args.firebase_jwks_min_refresh_ms.max(1)),
        keys,
    }))
}

/// Fills --listen and --rules from a Firebase project file where they were not given.
pub(crate) fn apply_firebase_json(
    args: &mut ServeArgs,
    file: &std::path::Path,
    listen_given: bool,
    rules_given: bool,
) -> anyhow::Result<()> {
    let project = FirebaseJson::read(file)?;
    if !listen_given {
        if let Some(listen) = project.listen() {
            info!(listen = %listen, "listening where {} says", file.display());
            args.listen = listen;
        }
    }
    if !rules_given {
        if let Some(rules) = project.rules {
            info!(rules = %rules.display(), "rules from {}", file.display());
            args.rules = Some(rules);
        }
    }
    Ok(())
}

/// The node-to-node link's settings: with --cluster-peers its static placement, with
/// --cluster-etcd (`etcd`, already joined) and --cluster-secret-file etcd's; `None` without a
/// link (a single node, or etcd alone: each node serves only the databases it owns).
fn cluster_config(
    args: &ServeArgs,
    secret: Option<Vec<u8>>,
    security: Option<hearth_server::peer::LinkSecurity>,
    etcd: Option<&hearth_cluster::Placement>,
) -> anyhow::Result<Option<std::sync::Arc<hearth_server::peer::ClusterConfig>>> {
    use hearth_server::peer::{placement, ClusterConfig, Membership, Placement};
    let (Some(secret), Some(security)) = (secret, security) else {
        return Ok(None);
    };
    let membership = match etcd {
        Some(etcd) => Membership::Etcd(etcd.clone()),
        None if args.cluster_peers.is_empty() => return Ok(None),
        None => {
            let mut entries = Vec::with_capacity(args.cluster_peers.len());
            for entry in &args.cluster_peers {
                let (id, address) = placement::split_entry(entry.trim())?;
                let address = first_address("--cluster-peers", Some(address))?
                    .with_context(|| format!("--cluster-peers: `{address}` resolves to nothing"))?;
                entries.push((id.to_owned(), address));
            }
            let me = args
                .node_id
                .as_deref()
                .context("--cluster-peers needs --node-id")?;
            Membership::Static(Placement::new(entries, me)?)
        }
    };
    Ok(Some(std::sync::Arc::new(ClusterConfig {
        membership,
        secret,
        security,
        replication: args.replication.into(),
    })))
}

/// The cluster's shared secret, when --cluster-secret-file is given: read before the node
/// joins etcd, so that a bad file stops it before it holds a lease.
fn cluster_secret(args: &ServeArgs) -> anyhow::Result<Option<Vec<u8>>> {
    let Some(file) = &args.cluster_secret_file else {
        if !args.cluster_peers.is_empty() {
            anyhow::bail!("--cluster-peers needs --cluster-secret-file");
        }
        return Ok(None);
    };
    let mut secret = std::fs::read(file)
        .with_context(|| format!("reading --cluster-secret-file {}", file.display()))?;
    while secret.last().is_some_and(u8::is_ascii_whitespace) {
        secret.pop();
    }
    let (min, max) = (
        hearth_server::peer::MIN_SECRET_BYTES,
        hearth_server::peer::MAX_SECRET_BYTES,
    );
    if !(min..=max).contains(&secret.len()) {
        anyhow::bail!("--cluster-secret-file must hold {min} to {max} bytes");
    }
    Ok(Some(secret))
}

/// The first address of `address`, a `host:port` given to `flag`, if given.
fn first_address(
    flag: &str,
    address: Option<&str>,
) -> anyhow::Result<Option<std::net::SocketAddr>> {
    let Some(address) = address else {
        return Ok(None);
    };
    let resolved = hearth_server::resolve_listen(address)
        .with_context(|| format!("resolving {flag} {address}"))?;
    Ok(resolved.first().copied())
}

/// The database triggers: delivered to the Functions emulator at `functions` if given, and
/// those declared in the triggers file (`file`, else `DATA_DIR/triggers.json` if a new
/// declaration wrote one), from an outbox under `data_dir` (none when `durable` is false:
/// nothing is logged, so nothing may be declared); in a cluster (`clustered`) a database's
/// events wait until this node owns it.
fn server_triggers(
    functions: Option<&str>,
    file: Option<&std::path::Path>,
    data_dir: &std::path::Path,
    durable: bool,
    clustered: bool,
) -> anyhow::Result<ServerTriggers> {
    if !durable {
        return match functions {
            Some(functions) => ServerTriggers::delivering_to(functions)
                .context("starting the delivery of trigger events"),
            None => Ok(ServerTriggers::default()),
        };
    }
    let path = file.map_or_else(|| data_dir.join("triggers.json"), std::path::Path::to_owned);
    let declared = match std::fs::read(&path) {
        Ok(bytes) => hearth_server::config::triggers::declared::parse(&bytes)
            .with_context(|| format!("the triggers file {}", path.display()))?,
        // The default file exists only once triggers were declared through the API.
        Err(error) if file.is_none() && error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(error) => {
            return Err(error)
                .with_context(|| format!("reading the triggers file {}", path.display()))
        }
    };
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("creating the data directory {}", data_dir.display()))?;
    let outbox = data_dir.join("triggers");
    ServerTriggers::start(functions, declared, Some((&outbox, path)), clustered)
        .context("starting the delivery of trigger events")
}

pub(crate) fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let listen = hearth_server::resolve_listen(&args.listen)
        .with_context(|| format!("resolving --listen {}", args.listen))?;
    let default_rules = match &args.rules {
        Some(file) => Some(std::sync::Arc::new(load_rules(file)?)),
        None => None,
    };
    if default_rules.is_none() && !args.dev {
        warn!(
            "every database is locked: only admins can read or write, because neither --rules \
             nor --dev was given. To open it: --dev for development (open rules, emulator \
             credentials), --rules FILE for rules every database starts with, or \
             --admin-token TOKEN to act as an admin (and set rules per database with \
             PUT /.settings/rules.json?ns=NAME)"
        );
    }
    let auth = auth_config(&args)?;
    let firebase_jwks = jwks_source(&args, &auth)?;
    let app_check_jwks = app_check_source(&args, &auth)?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(std::sync::Arc::new(TlsCerts::load(cert, key)?)),
        _ => None,
    };
    let metrics_listen = first_address("--metrics-listen", args.metrics_listen.as_deref())?;
    let webtransport_listen =
        first_address("--webtransport-listen", args.webtransport_listen.as_deref())?;
    let secret = cluster_secret(&args)?;
    let security = cluster_link::security(&cluster_link::Flags::of(&args))?;
    let cluster = start_cluster(&args)?;
    let peers = match cluster_config(&args, secret, security, cluster.as_ref()) {
        Ok(peers) => peers,
        Err(error) => {
            if let Some(cluster) = &cluster {
                cluster.stop();
            }
            return Err(error);
        }
    };
    let persist = persist_config(&args);
    if args.audit && persist.durability == hearth_server::persist::Durability::None {
        anyhow::bail!(
            "--audit needs a data directory: the trail is copied from the log (leave out --durability none)"
        );
    }
    if args.triggers.is_some() && persist.durability == hearth_server::persist::Durability::None {
        anyhow::bail!(
            "--triggers needs a data directory: events are delivered from the log (leave out --durability none)"
        );
    }
    let config = ServeConfig {
        triggers: server_triggers(
            args.functions_emulator.as_deref(),
            args.triggers.as_deref(),
            &args.data_dir,
            persist.durability != hearth_server::persist::Durability::None,
            peers.is_some(),
        )?,
        cluster: cluster.clone(),
        peers,
        webtransport_listen,
        auth,
        firebase_jwks,
        app_check_jwks,
        app_check_enforced: args.app_check_enforce,
        audit: AuditConfig {
            by_default: args.audit,
            retention_days: args.audit_retention_days,
            trail: None,
        },
        default_rules,
        listen,
        persist,
        data_dir: args.data_dir,
        threads,
        threads_from_flag: args.threads.is_some(),
        dev: args.dev,
        ping_interval: Duration::from_secs(args.ping_interval_secs.max(1)),
        idle_timeout: Duration::from_secs(args.idle_timeout_secs.max(2)),
        default_namespace: DEFAULT_NAMESPACE.to_owned(),
        sse_keep_alive: Duration::from_secs(args.sse_keep_alive_secs.max(1)),
        volatile_hz: args.volatile_hz,
        rest_cache_bytes: args.rest_cache_mib.saturating_mul(MIB),
        io_uring_sends: args.io_uring_sends,
        http: std::sync::Arc::new(HttpBudgets::new(
            args.body_budget_mib.saturating_mul(MIB),
            args.answer_budget_mib.saturating_mul(MIB),
            Duration::from_secs(args.http_write_timeout_secs.max(1)),
        )),
        tls,
        metrics: MetricsConfig {
            listen: metrics_listen,
            public: args.metrics_public,
        },
    };
    // Listening before the start, so that a SIGHUP during recovery does not end the process.
    let signals = Signals::listen().context("listening for signals")?;
    let server = match Server::start(config) {
        Ok(server) => server,
        Err(error) => {
            // Leave the cluster at once rather than when the lease runs out.
            if let Some(cluster) = &cluster {
                cluster.stop();
            }
            let hint = port_in_use_hint(&error);
            let error = anyhow::Error::new(error).context("starting the server");
            return Err(match hint {
                Some(hint) => error.context(hint),
                None => error,
            });
        }
    };
    signals
        .wait(&server)
        .context("waiting for a shutdown signal")?;
    info!("shutting down");
    server.stop();
    if let Some(cluster) = cluster {
        cluster.stop();
    }
    info!("stopped");
    Ok(())
}

/// What to do when the server's port is taken by a process that is not a Hearth server: the
/// kernel's "Address already in use" alone does not say which option moves it. (A Hearth
/// server's port claim already says "stop it or choose another --listen".)
fn port_in_use_hint(error: &hearth_server::StartError) -> Option<String> {
    let hearth_server::StartError::Bind { addresses, source } = error else {
        return None;
    };
    if source.kind() != std::io::ErrorKind::AddrInUse || source.to_string().contains("--listen") {
        return None;
    }
    let option = if addresses.starts_with("--metrics-listen") {
        "another --metrics-listen"
    } else if addresses.starts_with("the node link") {
        "another port for this node in --cluster-peers or --advertise"
    } else {
        "another --listen"
    };
    Some(format!(
        "cannot listen on {addresses}: another program already listens there (`ss -ltnp` \
         names it); stop it or choose {option}"
    ))
}

/// Joins the cluster of `--cluster-etcd`, if given: the node's lease is granted and the
/// node registered before the server starts, so a node that cannot reach etcd does not start.
fn start_cluster(args: &ServeArgs) -> anyhow::Result<Option<hearth_cluster::Placement>> {
    let (Some(etcd), Some(node_id), Some(advertise)) =
        (&args.cluster_etcd, &args.node_id, &args.advertise)
    else {
        return Ok(None);
    };
    let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if node_id.is_empty() || node_id.len() > 64 || !node_id.chars().all(valid) {
        anyhow::bail!(
            "--node-id {node_id:?}: 1 to 64 letters, digits, '-', '_' or '.' are allowed"
        );
    }
    let Some(advertise) = first_address("--advertise", Some(advertise))? else {
        anyhow::bail!("--advertise {advertise}: no address");
    };
    let placement = hearth_cluster::Placement::start(hearth_cluster::ClusterConfig {
        etcd: etcd.clone(),
        node_id: node_id.clone(),
        advertise,
        lease_ttl: Duration::from_secs(args.cluster_lease_ttl_secs),
        // The sync set guards failover only where logs are shipped (the link's secret).
        sync_set: matches!(args.replication, ReplicationArg::Sync)
            && args.cluster_secret_file.is_some(),
    })
    .with_context(|| format!("joining the cluster at {etcd}"))?;
    Ok(Some(placement))
}

/// The signals `hearth serve` answers.
struct Signals {
    runtime: tokio::runtime::Runtime,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

impl Signals {
    fn listen() -> anyhow::Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let _entered = runtime.enter();
        let terminate = signal(SignalKind::terminate())?;
        let hangup = signal(SignalKind::hangup())?;
        Ok(Signals {
            runtime,
            terminate,
            hangup,
        })
    }

    /// Blocks until SIGINT or SIGTERM. SIGHUP renews the certificates
    /// (`Server::reload_certificates`: the TLS pair read again, for TCP and WebTransport, or a
    /// new self-signed WebTransport certificate; new connections get it, open ones keep
    /// theirs); a pair that cannot be used is logged and the one in force stays.
    fn wait(mut self, server: &Server) -> anyhow::Result<()> {
        self.runtime.block_on(async {
            loop {
                tokio::select! {
                    result = tokio::signal::ctrl_c() => return result,
                    _ = self.terminate.recv() => return Ok(()),
                    _ = self.hangup.recv() => server.reload_certificates(),
                }
            }
        })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::port_in_use_hint;
    use hearth_server::StartError;
    use std::io::{Error, ErrorKind};

    fn bind_error(addresses: &str, message: &str) -> StartError {
        StartError::Bind {
            addresses: addresses.to_owned(),
            source: Error::new(ErrorKind::AddrInUse, message.to_owned()),
        }
    }

    #[test]
    fn a_port_in_use_names_the_option_that_moves_it() {
        assert_eq!(
            port_in_use_hint(&bind_error("--metrics-listen 127.0.0.1:9100", "in use")),
            Some(
                "cannot listen on --metrics-listen 127.0.0.1:9100: another program already \
                 listens there (`ss -ltnp` names it); stop it or choose another \
                 --metrics-listen"
                    .to_owned()
            )
        );
        // A Hearth server's port claim already says what to do: nothing is added.
        let claimed = "Address already in use: another Hearth server listens on 127.0.0.1:9000 \
                       (or on every address of port 9000); stop it or choose another --listen";
        assert_eq!(
            port_in_use_hint(&bind_error("[127.0.0.1:9000]", claimed)),
            None
        );
        let other = StartError::Bind {
            addresses: "[127.0.0.1:9000]".to_owned(),
            source: Error::new(ErrorKind::PermissionDenied, "denied"),
        };
        assert_eq!(port_in_use_hint(&other), None);
    }
}
