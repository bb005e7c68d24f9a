//! The workspace's crate graph, checked against every member's Cargo.toml.
//!
//! ARCHITECTURE.md ("The crates and their rules") states the rule: dependencies point one way,
//! `tree ← query ← rules ← sync ← wire ← server ← tools ← cli`, with `store` beside `wire`,
//! `cluster`, `load`, `alloc` and `uring` on their own, and `bench/ws` outside the product.
//! Reviews kept finding edges that broke it; this test finds them first. It lives in the
//! command's crate only because that crate already reads TOML (`toml`) and sits at the top of
//! the graph: it checks every member alike.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use toml::{Table, Value};

/// The one statement of which workspace crate may depend on which (normal, build and
/// dev-dependencies alike). Every member of the workspace needs a row: a new crate fails the
/// test until its place in the graph is declared here.
const ALLOWED: &[(&str, &[&str])] = &[
    // The data model that everything else is about, so it builds on nothing of ours.
    ("hearth-tree", &[]),
    // A query is a window over a tree.
    ("hearth-query", &["hearth-tree"]),
    // Rules read data and the query a client asked for (`query.orderByChild`), and know
    // nothing of connections.
    ("hearth-rules", &["hearth-tree", "hearth-query"]),
    // The state machine applies writes to trees, answers queries and asks the rules.
    (
        "hearth-sync",
        &["hearth-tree", "hearth-query", "hearth-rules"],
    ),
    // The wire format encodes what the state machine takes and emits. It is beside `store`:
    // neither knows the other, so the durable formats never follow the protocol's changes.
    (
        "hearth-wire",
        &["hearth-tree", "hearth-query", "hearth-rules", "hearth-sync"],
    ),
    // Durability logs the state machine's writes (beside `wire`, see above).
    (
        "hearth-store",
        &["hearth-tree", "hearth-query", "hearth-rules", "hearth-sync"],
    ),
    // The durability pipeline decides when the log is appended, synced and snapshotted and
    // holds messages until their writes are durable; it stores the state machine's writes
    // and knows no database, session or shard of the server that drives it.
    (
        "hearth-persist",
        &["hearth-tree", "hearth-sync", "hearth-store"],
    ),
    // Database triggers: the registrations of Cloud Functions and the delivery of their
    // events. It knows the state machine's changes, no shard and no connection.
    ("hearth-triggers", &["hearth-tree", "hearth-sync"]),
    // The audit trail's files and their thread: entries in, lines out. It knows nothing of
    // ours (the owner turns its writes into entries).
    ("hearth-audit", &[]),
    // Network plumbing that knows no database: listeners, TLS, HTTP heads, answer budgets,
    // the wall clock. It knows nothing of ours, so any role may stand on it.
    ("hearth-net", &[]),
    // Credentials: tokens checked against keys, and the auth object the rules see (the
    // state machine's `AuthState`, the protocol's `AuthRequest`).
    ("hearth-auth", &["hearth-sync", "hearth-wire", "hearth-net"]),
    // The values that cross cores and nodes, and the counters every role writes. It holds
    // no shard's state, so it may not depend on a role (`peer`, `server`).
    (
        "hearth-ground",
        &[
            "hearth-tree",
            "hearth-query",
            "hearth-rules",
            "hearth-sync",
            "hearth-wire",
            "hearth-persist",
            "hearth-net",
            "hearth-auth",
            "hearth-triggers",
            "hearth-audit",
        ],
    ),
    // The node link carries the ground's messages between nodes and follows placement; it
    // never reaches into a shard (the server hands it queues).
    (
        "hearth-peer",
        &[
            "hearth-sync",
            "hearth-store",
            "hearth-cluster",
            "hearth-net",
            "hearth-auth",
            "hearth-ground",
            "hearth-audit",
        ],
    ),
    // The server's settings, as the command line and the config file give them.
    (
        "hearth-config",
        &[
            "hearth-rules",
            "hearth-persist",
            "hearth-net",
            "hearth-auth",
            "hearth-ground",
            "hearth-cluster",
            "hearth-peer",
            "hearth-triggers",
            "hearth-audit",
        ],
    ),
    // The edge role's state and its sockets' plumbing: it knows no owner and no shard.
    (
        "hearth-edge",
        &[
            "hearth-tree",
            "hearth-sync",
            "hearth-wire",
            "hearth-persist",
            "hearth-net",
            "hearth-ground",
            "hearth-uring",
        ],
    ),
    // The owner role: its databases, their log and sessions. It names the edge's connection
    // types, never the shard or the transports that run connections (`server`).
    (
        "hearth-owner",
        &[
            "hearth-tree",
            "hearth-query",
            "hearth-rules",
            "hearth-sync",
            "hearth-wire",
            "hearth-store",
            "hearth-persist",
            "hearth-cluster",
            "hearth-net",
            "hearth-auth",
            "hearth-ground",
            "hearth-peer",
            "hearth-config",
            "hearth-edge",
            "hearth-triggers",
            "hearth-audit",
        ],
    ),
    // The transports run a connection from its accept to its close (WebSocket, HTTP, event
    // streams, long polling, WebTransport, the console). Each takes the core's front (its
    // owner, edge and queues), never the shard, and may not import the server that assembles
    // it: the server's own endpoints (scrapes, backups) reach it as a trait.
    (
        "hearth-transport",
        &[
            "hearth-tree",
            "hearth-rules",
            "hearth-sync",
            "hearth-wire",
            "hearth-store",
            "hearth-persist",
            "hearth-net",
            "hearth-ground",
            "hearth-peer",
            "hearth-config",
            "hearth-edge",
            "hearth-owner",
            "hearth-audit",
        ],
    ),
    // The server assembles a shard from the roles and the transports, starts its tasks
    // (replication's too) and stops them, and serves backups and the scrapes. It knows
    // nothing of the command line.
    (
        "hearth-server",
        &[
            "hearth-rules",
            "hearth-sync",
            "hearth-wire",
            "hearth-store",
            "hearth-persist",
            "hearth-cluster",
            "hearth-net",
            "hearth-auth",
            "hearth-ground",
            "hearth-peer",
            "hearth-config",
            "hearth-edge",
            "hearth-owner",
            "hearth-audit",
            "hearth-transport",
        ],
    ),
    // export, import and the admin CLI use the server library through a few public entry
    // points; membership is the server's and the command's business, not theirs.
    (
        "hearth-tools",
        &[
            "hearth-tree",
            "hearth-query",
            "hearth-rules",
            "hearth-sync",
            "hearth-wire",
            "hearth-store",
            "hearth-server",
        ],
    ),
    // The command is the only crate that knows both the server and the tools; it joins the
    // cluster and picks the process's allocator. It never links the load tester or a
    // benchmark.
    (
        "hearth",
        &[
            "hearth-tree",
            "hearth-query",
            "hearth-rules",
            "hearth-sync",
            "hearth-wire",
            "hearth-store",
            "hearth-server",
            "hearth-tools",
            "hearth-cluster",
            "hearth-alloc",
        ],
    ),
    // Membership and placement on etcd stand on their own, so a cluster bug can be tested
    // without a server and the server and the command share one copy of it.
    ("hearth-cluster", &[]),
    // The load tester speaks the protocol from the spec, so it can drive any compatible
    // server and cannot share a bug with Hearth's own codec.
    ("hearth-load", &[]),
    // Leaves: the allocator setting and the io_uring sends are the two crates allowed
    // `unsafe`, kept small by depending on nothing of ours.
    ("hearth-alloc", &[]),
    ("hearth-uring", &[]),
    // A benchmark of WebSocket libraries; nothing may depend on it (no row names it).
    ("hearth-bench-ws", &[]),
];

/// Edges allowed in `[dev-dependencies]` only, on top of `ALLOWED`: test and benchmark code
/// may need a crate that the library itself must not.
const DEV_ONLY: &[(&str, &[&str])] = &[
    // The recovery benchmark measures memory under the allocator the server runs with.
    ("hearth-store", &["hearth-alloc"]),
];

/// The crates that never touch sockets, files, clocks or threads (ARCHITECTURE.md, decision
/// 1). Clippy reads `clippy.toml` from each crate's own directory and has no shared file that
/// only some crates see, so each keeps a copy; this list keeps the copies identical.
const PURE: &[&str] = &[
    "crates/tree",
    "crates/query",
    "crates/rules",
    "crates/sync",
    "crates/wire",
];

const RULE: &str = "dependencies point one way: tree ← query ← rules ← sync ← wire ← server ← \
                    tools ← cli, store beside wire, persist between store and server, net, auth, ground, peer, \
                    config, edge, owner and transport below server in that order, triggers on sync, cluster, load, alloc and uring on their own, \
                    bench/ws depended on by nothing (ARCHITECTURE.md, The crates and their rules)";

const TABLE: &str = "crates/cli/tests/crate_graph.rs";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read_toml(path: &Path) -> Table {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.parse::<Table>()
        .unwrap_or_else(|e| panic!("{} is not TOML: {e}", path.display()))
}

/// One member of the workspace: its package name, where its manifest is, and the workspace
/// crates it depends on, each with the table that names it.
struct Member {
    name: String,
    manifest: String,
    deps: Vec<Dep>,
}

struct Dep {
    package: String,
    table: String,
    dev: bool,
}

fn members() -> Vec<Member> {
    let root_manifest = read_toml(&root().join("Cargo.toml"));
    let workspace = root_manifest
        .get("workspace")
        .and_then(Value::as_table)
        .expect("the root Cargo.toml has a [workspace]");
    let paths: Vec<&str> = workspace
        .get("members")
        .and_then(Value::as_array)
        .expect("[workspace] lists its members")
        .iter()
        .map(|m| m.as_str().expect("a member is a path"))
        .collect();
    // `hearth-x = { workspace = true }` in a member means whatever `[workspace.dependencies]`
    // says, which may rename the package.
    let workspace_deps = workspace
        .get("dependencies")
        .and_then(Value::as_table)
        .cloned()
        .unwrap_or_default();

    let manifests: Vec<(String, Table)> = paths
        .iter()
        .map(|path| {
            assert!(
                !path.contains(['*', '?', '[']),
                "workspace member {path:?} is a glob: list members one by one, or teach {TABLE} \
                 to expand globs"
            );
            let manifest = format!("{path}/Cargo.toml");
            let table = read_toml(&root().join(&manifest));
            (manifest, table)
        })
        .collect();
    let names: BTreeSet<String> = manifests
        .iter()
        .map(|(manifest, table)| package_name(manifest, table))
        .collect();

    manifests
        .iter()
        .map(|(manifest, table)| {
            let mut deps = Vec::new();
            let mut scan = |tables: &Table, prefix: &str| {
                for (key, dev) in [
                    ("dependencies", false),
                    ("build-dependencies", false),
                    ("build_dependencies", false),
                    ("dev-dependencies", true),
                    ("dev_dependencies", true),
                ] {
                    let Some(entries) = tables.get(key).and_then(Value::as_table) else {
                        continue;
                    };
                    for (dep_key, spec) in entries {
                        let package = dependency_package(dep_key, spec, &workspace_deps);
                        if names.contains(&package) {
                            deps.push(Dep {
                                package,
                                table: format!("{prefix}{key}"),
                                dev,
                            });
                        }
                    }
                }
            };
            scan(table, "");
            // `[target.'cfg(...)'.dependencies]` are edges too.
            if let Some(targets) = table.get("target").and_then(Value::as_table) {
                for (cfg, tables) in targets {
                    if let Some(tables) = tables.as_table() {
                        scan(tables, &format!("target.{cfg}."));
                    }
                }
            }
            Member {
                name: package_name(manifest, table),
                manifest: manifest.clone(),
                deps,
            }
        })
        .collect()
}

fn package_name(manifest: &str, table: &Table) -> String {
    table
        .get("package")
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{manifest} has no package.name"))
        .to_string()
}

/// The package a dependency entry names: its key, unless `package = "..."` renames it (in the
/// entry or, for `workspace = true`, in `[workspace.dependencies]`).
fn dependency_package(key: &str, spec: &Value, workspace_deps: &Table) -> String {
    let renamed = |spec: &Value| {
        spec.get("package")
            .and_then(Value::as_str)
            .map(String::from)
    };
    if let Some(package) = renamed(spec) {
        return package;
    }
    if spec.get("workspace").and_then(Value::as_bool) == Some(true) {
        if let Some(package) = workspace_deps.get(key).and_then(renamed) {
            return package;
        }
    }
    key.to_string()
}

fn table_of(
    rows: &[(&'static str, &'static [&'static str])],
) -> BTreeMap<&'static str, &'static [&'static str]> {
    let mut map = BTreeMap::new();
    for &(name, allowed) in rows {
        assert!(
            map.insert(name, allowed).is_none(),
            "{TABLE} lists {name} twice"
        );
    }
    map
}

#[test]
fn every_member_has_a_row_and_every_row_a_member() {
    let allowed = table_of(ALLOWED);
    let members = members();
    let names: BTreeSet<&str> = members.iter().map(|m| m.name.as_str()).collect();
    let mut problems = Vec::new();
    for member in &members {
        if !allowed.contains_key(member.name.as_str()) {
            problems.push(format!(
                "{} ({}) is a workspace crate with no row in ALLOWED: add one to {TABLE} saying \
                 which workspace crates it may depend on, and why ({RULE})",
                member.name, member.manifest
            ));
        }
    }
    for name in allowed.keys() {
        if !names.contains(name) {
            problems.push(format!(
                "ALLOWED in {TABLE} has a row for {name}, which is not a workspace member: \
                 remove or rename the row"
            ));
        }
    }
    for (name, _) in DEV_ONLY {
        if !names.contains(name) {
            problems.push(format!(
                "DEV_ONLY in {TABLE} has a row for {name}, which is not a workspace member"
            ));
        }
    }
    assert!(problems.is_empty(), "\n{}\n", problems.join("\n"));
}

#[test]
fn workspace_crates_depend_only_on_what_the_graph_allows() {
    let allowed = table_of(ALLOWED);
    let dev_only = table_of(DEV_ONLY);
    let mut problems = Vec::new();
    for member in members() {
        // A missing row is the other test's failure; here it allows nothing.
        let may = allowed.get(member.name.as_str()).copied().unwrap_or(&[]);
        let may_in_dev = dev_only.get(member.name.as_str()).copied().unwrap_or(&[]);
        for dep in &member.deps {
            let ok = may.contains(&dep.package.as_str())
                || (dep.dev && may_in_dev.contains(&dep.package.as_str()));
            if !ok {
                problems.push(format!(
                    "{} depends on {} ([{}] in {}), which {TABLE} does not allow: {RULE}. {} may \
                     depend on: {}{}",
                    member.name,
                    dep.package,
                    dep.table,
                    member.manifest,
                    member.name,
                    if may.is_empty() {
                        "no workspace crate".to_string()
                    } else {
                        may.join(", ")
                    },
                    if may_in_dev.is_empty() {
                        String::new()
                    } else {
                        format!("; in dev-dependencies also {}", may_in_dev.join(", "))
                    },
                ));
            }
        }
    }
    assert!(problems.is_empty(), "\n{}\n", problems.join("\n"));
}

#[test]
fn pure_crates_share_one_clippy_toml() {
    let read = |dir: &str| {
        let path = root().join(dir).join("clippy.toml");
        std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{dir}/clippy.toml is missing ({e}): every pure crate keeps a copy, so clippy \
                 refuses clocks, files, sockets and threads in it"
            )
        })
    };
    let first = read(PURE[0]);
    for dir in &PURE[1..] {
        assert!(
            read(dir) == first,
            "{dir}/clippy.toml differs from {}/clippy.toml: the pure crates' copies must stay \
             identical (edit them all alike)",
            PURE[0]
        );
    }
    // A clippy.toml above the crates would reach every crate that has none of its own, the
    // server's included, which needs sockets and clocks.
    for file in [
        "clippy.toml",
        ".clippy.toml",
        "crates/clippy.toml",
        "crates/.clippy.toml",
    ] {
        assert!(
            !root().join(file).exists(),
            "{file} would apply to every crate without a clippy.toml of its own: keep the pure \
             crates' rules in their own directories"
        );
    }
}
