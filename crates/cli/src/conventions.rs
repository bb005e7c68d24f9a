//! The conventions every subcommand of `hearth` keeps, checked on the command tree itself so
//! that a new command or option that breaks one fails here rather than in a user's shell:
//!
//! - a command that talks to a running server has `--url` (`HEARTH_URL`), `--admin-token`
//!   (`HEARTH_ADMIN_TOKEN`, its value hidden, no default: a --dev server's `owner` is given,
//!   never assumed), `--ca-cert` (`HEARTH_CA_CERT`) and `--timeout-secs`
//!   (`HEARTH_TIMEOUT_SECS`);
//! - a command that acts on one database names it `--ns` (`HEARTH_NS`), with `--db` kept as
//!   a hidden alias; a command that acts on a whole server or on nothing has no `--ns`;
//! - no visible option or positional is named `db`, `database` or `namespace`;
//! - every variable is `HEARTH_` and the option's long name in upper snake case.

use clap::{Arg, Command};

use crate::layers;

/// What a command acts on, which decides the options it must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// One database of a running server.
    Database,
    /// A running server as a whole.
    Server,
    /// One database, in a stopped server's data directory or on a running server.
    Either,
    /// One database, through a cluster's etcd.
    EtcdDatabase,
    /// A cluster's etcd, no database.
    Etcd,
    /// Local files only.
    Local,
    /// The server itself.
    Serve,
}

/// Every leaf command, by its path under `hearth`. A command missing here fails the test:
/// deciding its kind is deciding its options.
const KINDS: &[(&str, Kind)] = &[
    ("serve", Kind::Serve),
    ("emulator", Kind::Serve),
    ("rules check", Kind::Local),
    ("rules get", Kind::Database),
    ("rules set", Kind::Database),
    ("rules history", Kind::Database),
    ("rules rollback", Kind::Database),
    ("settings get", Kind::Database),
    ("settings set", Kind::Database),
    ("audit query", Kind::Database),
    ("audit erase", Kind::Database),
    ("triggers status", Kind::Server),
    ("triggers dead", Kind::Server),
    ("triggers retry", Kind::Server),
    ("triggers drop", Kind::Server),
    ("triggers get", Kind::Server),
    ("triggers set", Kind::Server),
    ("export", Kind::Either),
    ("import", Kind::Either),
    ("data get", Kind::Database),
    ("data set", Kind::Database),
    ("data update", Kind::Database),
    ("data push", Kind::Database),
    ("data remove", Kind::Database),
    ("data watch", Kind::Database),
    ("databases", Kind::Server),
    ("backup", Kind::Server),
    ("restore", Kind::Local),
    ("cluster status", Kind::Etcd),
    ("cluster move", Kind::EtcdDatabase),
];

/// Names a database option must not show under.
const OTHER_DATABASE_NAMES: [&str; 3] = ["db", "database", "namespace"];

fn hearth() -> Command {
    let mut command = layers::with_env_vars(<crate::Cli as clap::CommandFactory>::command());
    command.build();
    command
}

/// Every leaf command with its path (`data get`).
fn leaves(command: &Command, prefix: &str, out: &mut Vec<(String, Command)>) {
    for sub in command.get_subcommands() {
        if sub.get_name() == "help" {
            continue;
        }
        let path = format!("{prefix}{}", sub.get_name()).trim().to_owned();
        if sub.has_subcommands() {
            leaves(sub, &format!("{path} "), out);
        } else {
            out.push((path, sub.clone()));
        }
    }
}

fn long<'a>(command: &'a Command, name: &str) -> Option<&'a Arg> {
    command
        .get_arguments()
        .find(|arg| arg.get_long() == Some(name))
}

fn env_of(arg: &Arg) -> Option<String> {
    arg.get_env().map(|env| env.to_string_lossy().into_owned())
}

/// The convention's breaches in one command, as sentences.
fn breaches(path: &str, kind: Kind, command: &Command) -> Vec<String> {
    let mut found = Vec::new();
    let online = matches!(kind, Kind::Database | Kind::Server | Kind::Either);
    if online {
        for (name, env) in [
            ("url", "HEARTH_URL"),
            ("admin-token", "HEARTH_ADMIN_TOKEN"),
            ("ca-cert", "HEARTH_CA_CERT"),
            ("timeout-secs", "HEARTH_TIMEOUT_SECS"),
        ] {
            match long(command, name) {
                None => found.push(format!("{path}: no --{name}")),
                Some(arg) if env_of(arg).as_deref() != Some(env) => {
                    found.push(format!("{path}: --{name} does not read {env}"));
                }
                Some(_) => {}
            }
        }
    }
    if let Some(token) = long(command, "admin-token") {
        if !token.get_default_values().is_empty() {
            found.push(format!("{path}: --admin-token has a default"));
        }
        if !token.is_hide_env_values_set() {
            found.push(format!(
                "{path}: --admin-token shows the value of its variable"
            ));
        }
    }
    let one_database = matches!(kind, Kind::Database | Kind::Either | Kind::EtcdDatabase);
    match (one_database, long(command, "ns")) {
        (true, None) => found.push(format!("{path}: acts on one database but has no --ns")),
        (true, Some(ns)) => {
            if env_of(ns).as_deref() != Some("HEARTH_NS") {
                found.push(format!("{path}: --ns does not read HEARTH_NS"));
            }
            let hidden = ns.get_aliases().unwrap_or_default();
            if !hidden.contains(&"db") {
                found.push(format!("{path}: --ns has no hidden alias --db"));
            }
        }
        (false, Some(_)) => found.push(format!("{path}: has --ns, which means nothing there")),
        (false, None) => {}
    }
    for arg in command.get_arguments() {
        let visible_names = arg
            .get_long()
            .filter(|_| !arg.is_hide_set())
            .into_iter()
            .chain(arg.get_visible_aliases().unwrap_or_default());
        for name in visible_names {
            if OTHER_DATABASE_NAMES.contains(&name) {
                found.push(format!("{path}: a visible --{name}; the database is --ns"));
            }
        }
        if arg.is_positional() && !arg.is_hide_set() {
            let id = arg.get_id().as_str();
            if OTHER_DATABASE_NAMES.contains(&id) || id == "ns" {
                found.push(format!(
                    "{path}: the database as a positional {id}; it is --ns"
                ));
            }
        }
        if let (Some(env), Some(expected)) = (env_of(arg), layers::env_name(arg)) {
            if env != expected {
                found.push(format!(
                    "{path}: --{} reads {env}, not {expected}",
                    arg.get_long().unwrap_or_default()
                ));
            }
        }
    }
    found
}

#[test]
fn every_subcommand_keeps_the_conventions() {
    let mut all = Vec::new();
    leaves(&hearth(), "", &mut all);
    let mut found = Vec::new();
    for (path, command) in &all {
        match KINDS.iter().find(|(known, _)| known == path) {
            Some((_, kind)) => found.extend(breaches(path, *kind, command)),
            None => found.push(format!("{path}: not in KINDS; say what it acts on")),
        }
    }
    for (known, _) in KINDS {
        if !all.iter().any(|(path, _)| path == known) {
            found.push(format!("{known}: in KINDS but not a command"));
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_check_finds_what_it_is_meant_to_find() {
    // A command with the spellings this convention replaced: each must be reported.
    let old = Command::new("old")
        .arg(Arg::new("db").long("db").required(true))
        .arg(
            Arg::new("admin_token")
                .long("admin-token")
                .default_value("owner"),
        )
        .arg(Arg::new("url").long("url"))
        .arg(Arg::new("namespace").required(false));
    let found = breaches("old", Kind::Database, &old).join("\n");
    for expected in [
        "old: no --ca-cert",
        "old: --url does not read HEARTH_URL",
        "old: --admin-token has a default",
        "old: acts on one database but has no --ns",
        "old: a visible --db; the database is --ns",
        "old: the database as a positional namespace; it is --ns",
    ] {
        assert!(found.contains(expected), "{expected:?} not in:\n{found}");
    }
    let whole = Command::new("whole").arg(Arg::new("ns").long("ns"));
    assert!(breaches("whole", Kind::Local, &whole)
        .contains(&"whole: has --ns, which means nothing there".to_owned()));
}

#[test]
fn the_old_spellings_still_parse() {
    use clap::Parser;
    let parse = |line: &[&str]| crate::Cli::try_parse_from(line).map(|cli| cli.command);
    assert!(matches!(
        parse(&["hearth", "export", "--db", "shop", "--data-dir", "d"]),
        Ok(crate::Command::Export(args)) if args.target.ns == "shop"
    ));
    assert!(matches!(
        parse(&["hearth", "data", "get", "/", "--db", "shop"]),
        Ok(crate::Command::Data(hearth_tools::DataCommand::Get(args)))
            if args.server.ns.as_deref() == Some("shop")
    ));
    assert!(matches!(
        parse(&["hearth", "cluster", "move", "--etcd", "http://e:2379", "chat"]),
        Ok(crate::Command::Cluster(crate::ClusterCommand::Move { namespace: Some(name), .. }))
            if name == "chat"
    ));
    // The options that meant nothing are refused now.
    assert!(parse(&["hearth", "databases", "--ns", "shop"]).is_err());
    assert!(parse(&["hearth", "backup", "--ns", "shop", "--out", "b"]).is_err());
    assert!(parse(&[
        "hearth",
        "export",
        "--ns",
        "s",
        "--threads",
        "2",
        "--data-dir",
        "d"
    ])
    .is_err());
}
