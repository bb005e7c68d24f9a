//! `hearth serve --print-config`: the settings in effect, as a config file that would give
//! them, each value followed by where it came from.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use clap::{ArgAction, ArgMatches, Command};
use toml::Value;

use crate::config_file::NOT_IN_FILE;
use crate::layers::Source;

/// What a secret is shown as. Secrets are the arguments whose variable's value clap hides.
pub const HIDDEN: &str = "<hidden>";

/// The effective configuration of `serve` as TOML.
pub fn render(
    serve_command: &Command,
    serve: &ArgMatches,
    sources: &BTreeMap<String, Source>,
    config_file: Option<&Path>,
) -> String {
    let mut out = String::from(
        "# hearth serve: the configuration in effect; after each value, where it came from\n\
         # (a flag wins over the environment, the environment over the file, the file over the\n\
         # default).\n",
    );
    if let Some(file) = config_file {
        let _ = writeln!(out, "# config file: {}", file.display());
    }
    for arg in serve_command.get_arguments() {
        let id = arg.get_id().as_str();
        let Some(long) = arg.get_long() else { continue };
        if NOT_IN_FILE.contains(&id) {
            continue;
        }
        let source = sources.get(id).copied().unwrap_or(Source::Unset);
        let value = if matches!(arg.get_action(), ArgAction::SetTrue) {
            Some(Value::Boolean(serve.get_flag(id)))
        } else {
            raw_value(serve, id, matches!(arg.get_action(), ArgAction::Append))
        };
        let Some(value) = value else {
            let _ = writeln!(out, "# {long} = (not set)");
            continue;
        };
        let value = if arg.is_hide_env_values_set() {
            Value::String(HIDDEN.to_owned())
        } else {
            value
        };
        let origin = match (source, arg.get_env()) {
            (Source::Env, Some(name)) => format!("env {}", name.to_string_lossy()),
            _ => source.as_str().to_owned(),
        };
        let _ = writeln!(out, "{long} = {value} # {origin}");
    }
    out
}

/// The raw text of an argument's values, typed as TOML would hold them: numbers as numbers,
/// the rest as strings.
fn raw_value(serve: &ArgMatches, id: &str, many: bool) -> Option<Value> {
    let values: Vec<Value> = serve
        .get_raw(id)?
        .map(|raw| typed(&raw.to_string_lossy()))
        .collect();
    if many {
        Some(Value::Array(values))
    } else {
        values.into_iter().next()
    }
}

fn typed(text: &str) -> Value {
    match text.parse::<i64>() {
        Ok(number) => Value::Integer(number),
        Err(_) => Value::String(text.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Arg;

    #[test]
    fn values_are_typed_secrets_hidden_and_sources_named() {
        let command = Command::new("serve")
            .arg(
                Arg::new("listen")
                    .long("listen")
                    .default_value("localhost:9000"),
            )
            .arg(Arg::new("threads").long("threads"))
            .arg(Arg::new("dev").long("dev").action(ArgAction::SetTrue))
            .arg(
                Arg::new("admin_token")
                    .long("admin-token")
                    .env("HEARTH_TEST_UNSET_ADMIN_TOKEN")
                    .hide_env_values(true),
            )
            .arg(Arg::new("keys").long("jwt-keys").action(ArgAction::Append))
            .arg(Arg::new("rules").long("rules"));
        let matches = command.clone().get_matches_from([
            "serve",
            "--threads=4",
            "--dev",
            "--admin-token=s3cret",
            "--jwt-keys=a.pem",
            "--jwt-keys=b \"c\".pem",
        ]);
        let sources = BTreeMap::from([
            ("listen".to_owned(), Source::Default),
            ("threads".to_owned(), Source::File),
            ("dev".to_owned(), Source::Flag),
            ("admin_token".to_owned(), Source::Flag),
            ("keys".to_owned(), Source::Flag),
        ]);
        let text = render(&command, &matches, &sources, Some(Path::new("h.toml")));
        assert!(!text.contains("s3cret"), "{text}");
        assert!(text.contains("# config file: h.toml"), "{text}");
        assert!(
            text.contains("listen = \"localhost:9000\" # default\n"),
            "{text}"
        );
        assert!(text.contains("threads = 4 # file\n"), "{text}");
        assert!(text.contains("# rules = (not set)\n"), "{text}");
        let parsed: toml::Table = toml::from_str(&text).expect("the output is TOML");
        assert_eq!(parsed["dev"], Value::Boolean(true));
        assert_eq!(parsed["admin-token"], Value::String(HIDDEN.to_owned()));
        assert_eq!(
            parsed["jwt-keys"],
            Value::Array(vec![
                Value::String("a.pem".to_owned()),
                Value::String("b \"c\".pem".to_owned())
            ])
        );
    }
}
