//! Where each `serve` setting comes from: a flag wins over the environment, which wins over
//! the config file, which wins over the default.
//!
//! Done once for every argument clap knows, so that an option added to `ServeArgs` gets its
//! `HEARTH_*` variable and its config-file key with no code of its own: every argument
//! without an `env` gets `HEARTH_<LONG_NAME_IN_UPPER_SNAKE>`, and the file's settings are
//! appended to the command line for exactly the arguments that neither a flag nor a variable
//! set (clap's `value_source`), then the whole line is parsed again, so that clap checks
//! the result (`requires`, conflicts) as it would a command line.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

use clap::parser::ValueSource;
use clap::{builder::FalseyValueParser, Arg, ArgAction, ArgMatches, Command};

use crate::config_file::{self, ConfigFileError, FileSetting};

/// The subcommand whose options have variables and a config file.
pub const SERVE: &str = "serve";

/// Arguments that are actions, not settings, and so have no variable: a `HEARTH_PRINT_CONFIG`
/// left in a service's environment would stop the server at every start.
pub const NO_ENV: &[&str] = &["print_config", "help", "version"];

/// Said under `hearth serve --help`.
const PRECEDENCE_HELP: &str = "Every option can also be set by an environment variable \
    (HEARTH_ and the option's name in upper case with '_' for '-', shown as [env: ...]) or as a \
    key of the TOML file given with --config (the long name without its dashes: \
    data-dir = \"/var/lib/hearth\"). A flag wins over a variable, a variable over the file, the \
    file over the default. `--print-config` shows what is in effect and where each value came \
    from.";

/// Where an effective value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Flag,
    Env,
    File,
    Default,
    /// Not set, and no default.
    Unset,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Flag => "flag",
            Source::Env => "env",
            Source::File => "file",
            Source::Default => "default",
            Source::Unset => "not set",
        }
    }
}

/// The command line, parsed with every layer applied.
pub struct Layered {
    pub matches: ArgMatches,
    /// The config file read, if any.
    pub config_file: Option<PathBuf>,
    /// The source of each `serve` argument, by clap id (only when the command is `serve`).
    pub sources: BTreeMap<String, Source>,
}

/// The environment variable of an argument: `HEARTH_` and its long name in upper snake case.
pub fn env_name(arg: &Arg) -> Option<String> {
    let long = arg.get_long()?;
    Some(format!(
        "HEARTH_{}",
        long.replace('-', "_").to_ascii_uppercase()
    ))
}

/// `command` with a variable for every `serve` argument that has none, and the precedence in
/// the help.
pub fn with_env_vars(command: Command) -> Command {
    command.mut_subcommand(SERVE, |serve| {
        serve.after_help(PRECEDENCE_HELP).mut_args(|arg| {
            if arg.get_env().is_some() || NO_ENV.contains(&arg.get_id().as_str()) {
                return arg;
            }
            let Some(name) = env_name(&arg) else {
                return arg;
            };
            // The command is built once per process; clap keeps `&'static str` names.
            let arg = arg.env(&*Box::leak(name.into_boxed_str()));
            // A flag's variable takes the usual spellings: 1/0, true/false, yes/no, on/off.
            if matches!(arg.get_action(), ArgAction::SetTrue) {
                arg.value_parser(FalseyValueParser::new())
            } else {
                arg
            }
        })
    })
}

/// Parses `argv` against `command` (already `with_env_vars`), with the config file of
/// `serve --config` under the flags and variables. Errors of the command line exit as clap
/// does (with usage); errors of the file are returned.
pub fn parse(command: Command, argv: Vec<OsString>) -> Result<Layered, ConfigFileError> {
    // A first, lenient pass learns which file to read and what the flags and variables
    // already set; a missing `requires` partner may well be in the file.
    let first = command
        .clone()
        .ignore_errors(true)
        .try_get_matches_from(argv.iter());
    let first_serve = first
        .as_ref()
        .ok()
        .and_then(|matches| matches.subcommand_matches(SERVE));
    let config_file = first_serve.and_then(|serve| serve.get_one::<PathBuf>("config").cloned());
    let mut from_file = Vec::new();
    if let (Some(file), Some(serve), Some(serve_command)) =
        (&config_file, first_serve, command.find_subcommand(SERVE))
    {
        from_file = config_file::read(file, serve_command)?
            .into_iter()
            .filter(|setting| !set_above_file(serve, setting))
            .collect();
    }
    let mut full = argv;
    full.extend(from_file.iter().flat_map(|setting| setting.words.clone()));
    let matches = command
        .clone()
        .try_get_matches_from(full)
        .unwrap_or_else(|error| error.exit());
    let sources = match (
        matches.subcommand_matches(SERVE),
        command.find_subcommand(SERVE),
    ) {
        (Some(serve), Some(serve_command)) => sources(serve_command, serve, &from_file),
        _ => BTreeMap::new(),
    };
    Ok(Layered {
        matches,
        config_file,
        sources,
    })
}

/// Whether a flag or a variable already set what `setting` would.
fn set_above_file(serve: &ArgMatches, setting: &FileSetting) -> bool {
    matches!(
        serve.value_source(&setting.id),
        Some(ValueSource::CommandLine | ValueSource::EnvVariable)
    )
}

fn sources(
    serve_command: &Command,
    serve: &ArgMatches,
    from_file: &[FileSetting],
) -> BTreeMap<String, Source> {
    serve_command
        .get_arguments()
        .map(|arg| {
            let id = arg.get_id().as_str();
            let source = if from_file.iter().any(|setting| setting.id == id) {
                Source::File
            } else {
                match serve.value_source(id) {
                    Some(ValueSource::CommandLine) => Source::Flag,
                    Some(ValueSource::EnvVariable) => Source::Env,
                    Some(ValueSource::DefaultValue) => Source::Default,
                    _ => Source::Unset,
                }
            };
            (id.to_owned(), source)
        })
        .collect()
}
