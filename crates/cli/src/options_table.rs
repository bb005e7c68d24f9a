//! The table of `hearth serve` options in README.md and `docs/configuration.md`, made from clap's own
//! description of the arguments, so that it cannot drift from the binary: the test fails when
//! an option is added or changed, and `HEARTH_UPDATE_DOCS=1 cargo test -p hearth --bin hearth
//! options_table` writes the new table.

use clap::{ArgAction, Command, CommandFactory};

use crate::layers::{self, env_name};
use crate::Cli;

const BEGIN: &str =
    "<!-- serve-options:begin (generated from clap: see crates/cli/src/options_table.rs) -->\n";
const END: &str = "<!-- serve-options:end -->\n";

fn serve_command() -> Command {
    let mut command = layers::with_env_vars(Cli::command());
    command.build();
    command
        .find_subcommand(layers::SERVE)
        .cloned()
        .expect("hearth has a serve subcommand")
}

/// The Markdown table: flag, variable, default, meaning.
fn table(serve: &Command) -> String {
    let mut out =
        String::from("| flag | environment variable | default | meaning |\n|---|---|---|---|\n");
    for arg in serve.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if matches!(arg.get_id().as_str(), "help" | "version") {
            continue;
        }
        let flag = match arg.get_action() {
            ArgAction::SetTrue => format!("`--{long}`"),
            action => {
                let value = arg
                    .get_value_names()
                    .and_then(|names| names.first())
                    .map_or_else(
                        || arg.get_id().as_str().to_uppercase(),
                        |name| name.to_string(),
                    );
                let repeat = if matches!(action, ArgAction::Append) {
                    " (repeatable)"
                } else {
                    ""
                };
                format!("`--{long} {value}`{repeat}")
            }
        };
        let env = arg.get_env().map_or_else(
            || "—".to_owned(),
            |name| format!("`{}`", name.to_string_lossy()),
        );
        let default = match arg.get_default_values() {
            [] => "none".to_owned(),
            values => values
                .iter()
                .map(|value| format!("`{}`", value.to_string_lossy()))
                .collect::<Vec<_>>()
                .join(", "),
        };
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(ToString::to_string)
            .unwrap_or_default();
        let mut meaning = help.split_whitespace().collect::<Vec<_>>().join(" ");
        if !meaning.ends_with('.') {
            meaning.push('.');
        }
        let possible: Vec<String> = arg
            .get_possible_values()
            .iter()
            .filter(|_| !matches!(arg.get_action(), ArgAction::SetTrue))
            .map(|value| format!("`{}`", value.get_name()))
            .collect();
        if !possible.is_empty() {
            meaning.push_str(&format!(" One of {}.", possible.join(", ")));
        }
        if arg.is_hide_env_values_set() {
            meaning.push_str(" A secret: never shown by `--help` or `--print-config`.");
        }
        let cells = [flag, env, default, meaning.replace('|', "\\|")];
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out
}

#[test]
fn the_documented_tables_list_every_option_as_clap_has_it() {
    let serve = serve_command();
    let expected = table(&serve);
    // The README's table and the configuration guide's are the same generated text.
    for file in ["README.md", "docs/configuration.md"] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(file);
        let doc = std::fs::read_to_string(&path).expect("the documentation file is readable");
        let (Some(begin), Some(end)) = (doc.find(BEGIN), doc.find(END)) else {
            panic!("{file} lacks the markers {BEGIN:?} and {END:?}");
        };
        let current = &doc[begin + BEGIN.len()..end];
        if current == expected {
            continue;
        }
        if std::env::var_os("HEARTH_UPDATE_DOCS").is_some() {
            let updated = format!("{}{BEGIN}{expected}{}", &doc[..begin], &doc[end..]);
            std::fs::write(&path, updated).expect("the documentation file is written");
            continue;
        }
        panic!(
            "the options table of {file} is out of date; run \
             HEARTH_UPDATE_DOCS=1 cargo test -p hearth --bin hearth options_table\n\nexpected:\n{expected}"
        );
    }
}

#[test]
fn every_option_has_its_variable_and_declared_ones_follow_the_rule() {
    let serve = serve_command();
    for arg in serve.get_arguments() {
        if layers::NO_ENV.contains(&arg.get_id().as_str()) {
            assert_eq!(arg.get_env(), None, "{:?} is an action", arg.get_id());
            continue;
        }
        let declared = arg
            .get_env()
            .map(|name| name.to_string_lossy().into_owned());
        assert_eq!(
            declared,
            env_name(arg),
            "the variable of {:?}",
            arg.get_id()
        );
    }
}
