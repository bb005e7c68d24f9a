//! The `hearth` command.

mod cluster_link;
mod config_file;
#[cfg(test)]
mod conventions;
mod emulator;
mod firebase_json;
mod layers;
mod logging;
#[cfg(test)]
mod options_table;
mod print_config;
mod serve;
mod serve_args;

use std::path::PathBuf;
use std::time::Duration;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use hearth_server::rules_file::load_rules;

use crate::logging::LogFormat;
use crate::serve::{apply_firebase_json, serve};
use crate::serve_args::ServeArgs;

#[derive(Parser)]
#[command(
    name = "hearth",
    version,
    about = "A self-hosted realtime JSON database that speaks the Firebase protocol"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server.
    Serve(Box<ServeArgs>),
    /// Check a security rules file, or get and set the rules of a running server, see their
    /// history and roll them back.
    #[command(subcommand)]
    Rules(RulesCommand),
    /// Read and change a database's settings on a running server (admins only):
    /// defaultWriteSizeLimit, strictTriggerValidation, appCheck, quotas, audit
    /// (docs/settings.md).
    #[command(subcommand)]
    Settings(SettingsCommand),
    /// Read a database's audit trail on a running server, or erase a user's part of it
    /// (admins only; docs/audit.md).
    #[command(subcommand)]
    Audit(AuditCommand),
    /// See a running server's declared triggers (counts, lag, errors) and act on their dead
    /// letters (admins only; docs/triggers.md). Each node answers for its own outbox.
    #[command(subcommand)]
    Triggers(TriggersCommand),
    /// Write a database as JSON (export form, priorities kept), from a stopped server's data
    /// directory or from a running server.
    Export(Box<hearth_tools::ExportArgs>),
    /// Replace a database with a JSON file, in a stopped server's data directory (atomic) or
    /// on a running server (member by member).
    Import(Box<hearth_tools::ImportArgs>),
    /// Read, write and watch the data of a running server.
    #[command(subcommand)]
    Data(hearth_tools::DataCommand),
    /// List the databases of a running server with their size and clients (admins only).
    Databases {
        /// The server's JSON instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        server: hearth_tools::ServerArgs,
    },
    /// Write a consistent backup of a running server into a new directory
    /// (`POST /.admin/backup`, as an admin); the server keeps serving meanwhile.
    Backup(Box<hearth_tools::BackupArgs>),
    /// Turn a backup directory into a new data directory that `hearth serve` starts from.
    Restore(Box<hearth_tools::RestoreArgs>),
    /// Look at a cluster of Hearth nodes in its etcd.
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// Run as the Firebase emulator suite's database emulator: firebase-tools' arguments
    /// (--host, --port, --functions_emulator_host, --functions_emulator_port), every database
    /// in memory, development credentials, database triggers delivered to the Functions
    /// emulator (docs/triggers.md).
    Emulator(Box<emulator::EmulatorArgs>),
}

#[derive(Subcommand)]
enum ClusterCommand {
    /// The nodes (address, lease, seconds left of it) and each claimed database's owner,
    /// follower and fencing epoch (the replication lag is in each owner's /metrics).
    Status {
        /// The etcd client URL (`http://127.0.0.1:2379`).
        #[arg(long)]
        etcd: String,
        /// JSON instead of tables.
        #[arg(long)]
        json: bool,
    },
    /// Move one database to its follower while every node stays up (for maintenance of its
    /// owner, or to spread the load): the owner stops its writes for a moment, waits until
    /// the follower has every one, and hands its claim over; clients kept by other nodes
    /// follow it, the owner's own clients reconnect. Exits with 1 if it did not move.
    Move {
        /// The etcd client URL (`http://127.0.0.1:2379`).
        #[arg(long)]
        etcd: String,
        /// The database (namespace) to move.
        #[arg(
            long,
            alias = "db",
            env = "HEARTH_NS",
            required_unless_present = "namespace"
        )]
        ns: Option<String>,
        /// The database as the positional argument it once was; hidden, kept so that scripts
        /// written for it still work.
        #[arg(hide = true)]
        namespace: Option<String>,
        /// How long to wait for the follower's claim.
        #[arg(long, default_value_t = 30)]
        wait_secs: u64,
    },
}

#[derive(Subcommand)]
enum RulesCommand {
    /// Check a `database.rules.json` file; errors are printed with line and column.
    Check {
        /// The rules file.
        file: PathBuf,
    },
    /// Print the rules of a database of a running server (admins only).
    Get {
        #[command(flatten)]
        server: hearth_tools::DatabaseArgs,
    },
    /// Check a rules file as `rules check` does, then give it to a database of a running
    /// server (admins only).
    Set {
        /// The rules file.
        file: PathBuf,
        #[command(flatten)]
        server: hearth_tools::DatabaseArgs,
    },
    /// The database's rulesets, which is stable and canary, and every change of the labels
    /// (admins only; docs/settings.md).
    History {
        /// The server's JSON instead of tables.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        server: hearth_tools::DatabaseArgs,
    },
    /// Put an earlier ruleset back in effect: the stable one before the current one, or
    /// --to ID (admins only). The rollback is kept in the history too.
    Rollback {
        /// The ruleset to make stable (an id of `hearth rules history`).
        #[arg(long)]
        to: Option<String>,
        #[command(flatten)]
        server: hearth_tools::DatabaseArgs,
    },
}

#[derive(Subcommand)]
enum AuditCommand {
    /// Print the entries that match as JSON lines, oldest first.
    Query {
        #[command(flatten)]
        filter: hearth_tools::AuditFilter,
        #[command(flatten)]
        server: hearth_tools::DatabaseArgs,
    },
    /// Erase every entry of a user from the trail (each keeps its position only), and delete
    /// the data at each --data path.
    Erase {
        /// The user whose entries go.
        #[arg(long)]
        uid: String,
        /// A location of the user's data to delete too (repeatable).
        #[arg(long = "data", value_name = "PATH")]
        data: Vec<String>,
        #[command(flatten)]
        server: hearth_tools::DatabaseArgs,
    },
}

#[derive(Subcommand)]
enum TriggersCommand {
    /// Print each declared trigger's deliveries, failures, dead letters, pending events and
    /// lag.
    Status {
        /// The server's JSON, whole (per database too).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        server: hearth_tools::ServerArgs,
    },
    /// Print a trigger's dead letters, a JSON object per line.
    Dead {
        /// The trigger's name in the triggers file.
        name: String,
        #[command(flatten)]
        server: hearth_tools::ServerArgs,
    },
    /// Send a trigger's dead letters again (after their database's other events).
    Retry {
        /// The trigger's name in the triggers file.
        name: String,
        #[command(flatten)]
        server: hearth_tools::ServerArgs,
    },
    /// Drop a trigger's dead letters.
    Drop {
        /// The trigger's name in the triggers file.
        name: String,
        #[command(flatten)]
        server: hearth_tools::ServerArgs,
    },
    /// Print the triggers file in effect on the server.
    Get {
        #[command(flatten)]
        server: hearth_tools::ServerArgs,
    },
    /// Declare the triggers of FILE on the server in place of its current ones: checked
    /// whole, written to its triggers file, applied at once (docs/triggers.md).
    Set {
        /// A triggers file (JSON).
        file: std::path::PathBuf,
        #[command(flatten)]
        server: hearth_tools::ServerArgs,
    },
}

#[derive(Subcommand)]
enum SettingsCommand {
    /// Print a setting's value.
    Get {
        /// defaultWriteSizeLimit, strictTriggerValidation or appCheck.
        name: String,
        #[command(flatten)]
        server: hearth_tools::DatabaseArgs,
    },
    /// Set a setting: defaultWriteSizeLimit small|medium|large|unlimited,
    /// strictTriggerValidation true|false, appCheck enforced|unenforced, or quotas as a JSON
    /// object (docs/quotas.md).
    Set {
        /// defaultWriteSizeLimit, strictTriggerValidation or appCheck.
        name: String,
        /// The value.
        value: String,
        #[command(flatten)]
        server: hearth_tools::DatabaseArgs,
    },
}

/// `hearth emulator`: `hearth serve` as the emulator suite's database emulator.
fn run_emulator(args: emulator::EmulatorArgs) -> anyhow::Result<()> {
    let run = emulator::serve_arguments(args);
    let served = match Cli::try_parse_from(&run.argv).map(|cli| cli.command) {
        Ok(Command::Serve(args)) => serve(*args),
        Ok(_) => Err(anyhow::anyhow!("the emulator runs the server")),
        Err(error) => Err(anyhow::Error::new(error).context("the emulator's arguments")),
    };
    run.clean_up();
    served
}

fn main() -> anyhow::Result<()> {
    hearth_alloc::return_freed_memory_at_once();
    let command = layers::with_env_vars(Cli::command());
    let layered = match layers::parse(command.clone(), std::env::args_os().collect()) {
        Ok(layered) => layered,
        Err(error) => {
            // A config file is refused like a command line: a message, exit code 2.
            eprintln!("error: {error}");
            std::process::exit(2);
        }
    };
    let cli = Cli::from_arg_matches(&layered.matches).unwrap_or_else(|error| error.exit());
    if let Some(message) = both_places(&layered.matches) {
        eprintln!("error: {message}");
        std::process::exit(2);
    }
    if let Command::Serve(args) = cli.command {
        if args.print_config {
            let (Some(serve_command), Some(serve)) = (
                command.find_subcommand(layers::SERVE),
                layered.matches.subcommand_matches(layers::SERVE),
            ) else {
                anyhow::bail!("no serve options to print");
            };
            print!(
                "{}",
                print_config::render(
                    serve_command,
                    serve,
                    &layered.sources,
                    layered.config_file.as_deref()
                )
            );
            return Ok(());
        }
        logging::init(args.log_format, args.log_level.as_deref())?;
        let mut args = *args;
        if let Some(file) = args.firebase_json.clone() {
            let given = |id: &str| {
                !matches!(
                    layered.sources.get(id),
                    None | Some(layers::Source::Default | layers::Source::Unset)
                )
            };
            apply_firebase_json(&mut args, &file, given("listen"), given("rules"))?;
        }
        return serve(args);
    }
    logging::init(LogFormat::Text, None)?;
    if let Command::Emulator(args) = cli.command {
        return run_emulator(*args);
    }
    let tool = match cli.command {
        Command::Serve(_) | Command::Emulator(_) => return Ok(()),
        Command::Rules(RulesCommand::Check { file }) => return check_rules(&file),
        Command::Rules(RulesCommand::Get { server }) => hearth_tools::rules_get(&server),
        Command::Rules(RulesCommand::Set { file, server }) => {
            hearth_tools::rules_set(&server, &file)
        }
        Command::Rules(RulesCommand::History { json, server }) => {
            hearth_tools::rules_history(&server, json)
        }
        Command::Rules(RulesCommand::Rollback { to, server }) => {
            hearth_tools::rules_rollback(&server, to.as_deref())
        }
        Command::Settings(SettingsCommand::Get { name, server }) => {
            hearth_tools::settings_get(&server, &name)
        }
        Command::Settings(SettingsCommand::Set {
            name,
            value,
            server,
        }) => hearth_tools::settings_set(&server, &name, &value),
        Command::Audit(AuditCommand::Query { filter, server }) => {
            hearth_tools::audit_query(&server, &filter)
        }
        Command::Audit(AuditCommand::Erase { uid, data, server }) => {
            hearth_tools::audit_erase(&server, &uid, &data)
        }
        Command::Triggers(TriggersCommand::Status { json, server }) => {
            hearth_tools::triggers_status(&server, json)
        }
        Command::Triggers(TriggersCommand::Dead { name, server }) => {
            hearth_tools::triggers_dead(&server, &name)
        }
        Command::Triggers(TriggersCommand::Retry { name, server }) => {
            hearth_tools::triggers_retry(&server, &name)
        }
        Command::Triggers(TriggersCommand::Drop { name, server }) => {
            hearth_tools::triggers_drop(&server, &name)
        }
        Command::Triggers(TriggersCommand::Get { server }) => hearth_tools::triggers_get(&server),
        Command::Triggers(TriggersCommand::Set { file, server }) => {
            hearth_tools::triggers_set(&server, &file)
        }
        Command::Export(args) => hearth_tools::export(*args),
        Command::Import(args) => hearth_tools::import(*args),
        Command::Data(command) => hearth_tools::data(command),
        Command::Databases { json, server } => hearth_tools::databases(&server, json),
        Command::Backup(args) => hearth_tools::backup(*args),
        Command::Restore(args) => hearth_tools::restore(*args),
        Command::Cluster(ClusterCommand::Status { etcd, json }) => {
            return cluster_status(&etcd, json)
        }
        Command::Cluster(ClusterCommand::Move {
            etcd,
            ns,
            namespace,
            wait_secs,
        }) => {
            let Some(namespace) = namespace.or(ns) else {
                anyhow::bail!("no database given: add --ns NAME");
            };
            return cluster_move(&etcd, &namespace, wait_secs);
        }
    };
    if let Err(error) = tool {
        // The tools' errors are written for people: no "Error:" debug form, and an exit
        // code a script can tell apart (unreachable, refused credential, anything else).
        eprintln!("{error}");
        std::process::exit(error.exit_code());
    }
    Ok(())
}

/// An export or import given both `--data-dir` and `--url` on its command line: it cannot do
/// both. A `--url` from HEARTH_URL is not counted, so that a shell set up for the online
/// commands can still export a stopped server's directory.
fn both_places(matches: &clap::ArgMatches) -> Option<String> {
    let (name, command) = matches.subcommand()?;
    let given = |id: &str| {
        command.try_contains_id(id).unwrap_or(false)
            && command.value_source(id) == Some(clap::parser::ValueSource::CommandLine)
    };
    (matches!(name, "export" | "import") && given("data_dir") && given("url")).then(|| {
        format!("{name} takes --data-dir (a stopped server) or --url (a running one), not both")
    })
}

/// `hearth cluster status`: exits with 1 when etcd cannot be read.
fn cluster_status(url: &str, json: bool) -> anyhow::Result<()> {
    let etcd = hearth_cluster::etcd::Etcd::new(url, Duration::from_secs(10));
    match hearth_cluster::status::read(&etcd) {
        Ok(status) if json => println!("{}", serde_json::to_string_pretty(&status)?),
        Ok(status) => print!("{status}"),
        Err(error) => {
            eprintln!("{error}");
            std::process::exit(1);
        }
    }
    Ok(())
}

/// `hearth cluster move`: exits with 1 when the database did not move.
fn cluster_move(url: &str, namespace: &str, wait_secs: u64) -> anyhow::Result<()> {
    let etcd = hearth_cluster::etcd::Etcd::new(url, Duration::from_secs(10));
    let wait = Duration::from_secs(wait_secs.max(1));
    match hearth_cluster::moves::request(&etcd, namespace, wait) {
        Ok(moved) => println!(
            "{namespace}: moved from {} to {} (epoch {})",
            moved.from, moved.to, moved.epoch
        ),
        Err(error) => {
            eprintln!("{error}");
            std::process::exit(1);
        }
    }
    Ok(())
}

/// `hearth rules check FILE`: exits non-zero, with the error, for an invalid file.
fn check_rules(file: &std::path::Path) -> anyhow::Result<()> {
    match load_rules(file) {
        Ok(rules) => {
            println!("{}: ok", file.display());
            // The limits per caller it declares, as the server will count them.
            for spec in rules.limits() {
                println!("  {}: {}", spec.pattern, spec.describe());
            }
            Ok(())
        }
        Err(error) => {
            eprintln!("{error}");
            std::process::exit(1);
        }
    }
}
