//! The `hearth serve --config FILE` file: TOML whose keys are the long names of `serve`'s
//! options, each value turned into the command-line words that option would take.
//!
//! The file is checked against clap's own list of arguments, so an option added to `serve`
//! is accepted here with no code of its own, and a key or value clap would refuse is refused
//! with the file, the line and the key named.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::{Arg, ArgAction, Command};
use toml::{Spanned, Value};

/// The longest config file read: far more than every option takes, and small enough that a
/// wrong path (a log, a database file) is refused before it is read whole.
pub const MAX_CONFIG_FILE_BYTES: u64 = 1024 * 1024;

/// Arguments of `serve` that are actions or that choose the file itself, not settings.
pub const NOT_IN_FILE: &[&str] = &["config", "print_config", "help", "version"];

/// Why a config file was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    #[error("reading the config file {file}: {source}")]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("the config file {file} is larger than {MAX_CONFIG_FILE_BYTES} bytes")]
    TooLarge { file: PathBuf },
    #[error("the config file {file} is not valid TOML: {message}")]
    Syntax { file: PathBuf, message: String },
    #[error("{file}:{line}: {problem}")]
    Key {
        file: PathBuf,
        line: usize,
        problem: String,
    },
}

/// One option the file sets.
#[derive(Debug, Clone, PartialEq)]
pub struct FileSetting {
    /// The clap id of the argument.
    pub id: String,
    /// The words to append to the command line: `--name=value` once per value, `--name` for
    /// a flag set to true, nothing for a flag set to false.
    pub words: Vec<OsString>,
}

/// Reads `file` and checks it against the arguments of `serve`.
pub fn read(file: &Path, serve: &Command) -> Result<Vec<FileSetting>, ConfigFileError> {
    let read_error = |source| ConfigFileError::Read {
        file: file.to_owned(),
        source,
    };
    let size = std::fs::metadata(file).map_err(read_error)?.len();
    if size > MAX_CONFIG_FILE_BYTES {
        return Err(ConfigFileError::TooLarge {
            file: file.to_owned(),
        });
    }
    let text = std::fs::read_to_string(file).map_err(read_error)?;
    settings(&text, serve).map_err(|problem| match problem {
        Problem::Syntax(message) => ConfigFileError::Syntax {
            file: file.to_owned(),
            message,
        },
        Problem::Key { line, problem } => ConfigFileError::Key {
            file: file.to_owned(),
            line,
            problem,
        },
    })
}

#[derive(Debug)]
enum Problem {
    Syntax(String),
    Key { line: usize, problem: String },
}

fn settings(text: &str, serve: &Command) -> Result<Vec<FileSetting>, Problem> {
    let table: std::collections::BTreeMap<String, Spanned<Value>> =
        toml::from_str(text).map_err(|error| Problem::Syntax(error.to_string()))?;
    let mut entries: Vec<(String, Spanned<Value>)> = table.into_iter().collect();
    // Problems are reported in the order of the file.
    entries.sort_by_key(|(_, value)| value.span().start);
    let mut settings: Vec<FileSetting> = Vec::new();
    for (key, value) in entries {
        let line = line_of(text, value.span().start);
        let fail = |problem: String| Problem::Key { line, problem };
        let arg = find_arg(serve, &key).ok_or_else(|| {
            fail(format!(
                "unknown key `{key}`: not an option of `hearth serve` (see `hearth serve --help`)"
            ))
        })?;
        let id = arg.get_id().as_str().to_owned();
        if settings.iter().any(|setting| setting.id == id) {
            return Err(fail(format!(
                "`{key}` is set twice (`-` and `_` are the same)"
            )));
        }
        let words =
            words(arg, value.get_ref()).map_err(|problem| fail(format!("`{key}`: {problem}")))?;
        settings.push(FileSetting { id, words });
    }
    Ok(settings)
}

/// The argument a key names: its long name, with `_` taken for `-`.
pub fn find_arg<'a>(serve: &'a Command, key: &str) -> Option<&'a Arg> {
    let long = key.replace('_', "-");
    serve.get_arguments().find(|arg| {
        arg.get_long() == Some(long.as_str()) && !NOT_IN_FILE.contains(&arg.get_id().as_str())
    })
}

/// The command-line words for `value`, each checked by the argument's own parser.
fn words(arg: &Arg, value: &Value) -> Result<Vec<OsString>, String> {
    let long = arg.get_long().unwrap_or_default();
    let flag = matches!(arg.get_action(), ArgAction::SetTrue);
    let many = matches!(arg.get_action(), ArgAction::Append);
    let values: Vec<&Value> = match value {
        Value::Array(items) if many => items.iter().collect(),
        Value::Array(_) => return Err("takes one value, not an array".to_owned()),
        other => vec![other],
    };
    let mut words = Vec::new();
    for value in values {
        let text = match value {
            Value::String(text) => text.clone(),
            Value::Integer(number) => number.to_string(),
            Value::Float(number) => number.to_string(),
            Value::Boolean(set) if flag => {
                if *set {
                    words.push(OsString::from(format!("--{long}")));
                }
                continue;
            }
            Value::Boolean(set) => set.to_string(),
            Value::Datetime(_) | Value::Array(_) | Value::Table(_) => {
                return Err(format!(
                    "expected {}, found a {}",
                    expected(arg),
                    value.type_str()
                ))
            }
        };
        if flag {
            return Err(format!("expected true or false, found {value}"));
        }
        check_value(arg, &text)?;
        words.push(OsString::from(format!("--{long}={text}")));
    }
    Ok(words)
}

fn expected(arg: &Arg) -> &'static str {
    match arg.get_action() {
        ArgAction::SetTrue => "true or false",
        ArgAction::Append => "a value or an array of values",
        _ => "a value",
    }
}

/// Runs clap's parser of `arg` on `text` alone: the file's value is refused exactly as the
/// same value given as a flag would be, but with the file and line named.
fn check_value(arg: &Arg, text: &str) -> Result<(), String> {
    let alone = arg
        .clone()
        .env(None)
        .default_value(None)
        .required(false)
        .requires(clap::builder::Resettable::Reset);
    let probe = Command::new("hearth-serve-config")
        .no_binary_name(true)
        .disable_help_flag(true)
        .arg(alone);
    let word = format!("--{}={text}", arg.get_long().unwrap_or_default());
    match probe.try_get_matches_from([word]) {
        Ok(_) => Ok(()),
        Err(error) => Err(first_line(&error.to_string())),
    }
}

/// The message of a clap error without its `error:` prefix and usage lines.
fn first_line(message: &str) -> String {
    let line = message.lines().next().unwrap_or_default();
    line.strip_prefix("error: ").unwrap_or(line).to_owned()
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serve() -> Command {
        Command::new("serve")
            .arg(Arg::new("data_dir").long("data-dir").default_value("./d"))
            .arg(
                Arg::new("threads")
                    .long("threads")
                    .value_parser(clap::value_parser!(usize)),
            )
            .arg(Arg::new("dev").long("dev").action(ArgAction::SetTrue))
            .arg(Arg::new("keys").long("jwt-keys").action(ArgAction::Append))
            .arg(Arg::new("config").long("config"))
    }

    fn words_of(text: &str) -> Result<Vec<String>, Problem> {
        Ok(settings(text, &serve())?
            .into_iter()
            .flat_map(|setting| setting.words)
            .map(|word| word.to_string_lossy().into_owned())
            .collect())
    }

    fn problem(text: &str) -> (usize, String) {
        match settings(text, &serve()) {
            Err(Problem::Key { line, problem }) => (line, problem),
            other => panic!("expected a key problem, got {other:?}"),
        }
    }

    #[test]
    fn values_become_the_words_of_their_flags() -> Result<(), Problem> {
        let text = "threads = 4\ndata_dir = \"/var/lib/hearth\"\ndev = true\n\
                    jwt-keys = [\"a.pem\", \"b.pem\"]\n";
        let mut words = words_of(text)?;
        words.sort();
        assert_eq!(
            words,
            [
                "--data-dir=/var/lib/hearth",
                "--dev",
                "--jwt-keys=a.pem",
                "--jwt-keys=b.pem",
                "--threads=4"
            ]
        );
        assert_eq!(words_of("dev = false")?, Vec::<String>::new());
        assert_eq!(words_of("jwt-keys = \"one.pem\"")?, ["--jwt-keys=one.pem"]);
        Ok(())
    }

    #[test]
    fn unknown_keys_and_wrong_types_name_the_key_and_line() {
        let (line, message) = problem("threads = 2\n\n  colour = \"blue\"\n");
        assert_eq!(line, 3);
        assert!(message.contains("unknown key `colour`"), "{message}");
        let (line, message) = problem("# comment\nthreads = \"four\"\n");
        assert_eq!(line, 2);
        assert!(
            message.starts_with("`threads`: invalid value 'four'"),
            "{message}"
        );
        assert!(problem("threads = [1, 2]").1.contains("not an array"));
        assert!(problem("dev = \"yes\"").1.contains("true or false"));
        assert!(problem("threads = { a = 1 }").1.contains("found a table"));
        assert!(problem("config = \"other.toml\"")
            .1
            .contains("unknown key `config`"));
        assert!(problem("data-dir = \"a\"\ndata_dir = \"b\"")
            .1
            .contains("set twice"));
        assert!(matches!(
            settings("threads = ", &serve()),
            Err(Problem::Syntax(_))
        ));
    }
}
