//! Logs on stderr, as text for people or as one JSON object per line for log collectors.

use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One line of text per event, colored on a terminal.
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, `fields` (with `message`).
    Json,
}

/// Installs the global subscriber. `level` is a filter in `RUST_LOG` syntax (`info`,
/// `hearth_server=debug,info`); without one, `RUST_LOG` is used, else `info`.
pub fn init(format: LogFormat, level: Option<&str>) -> anyhow::Result<()> {
    let filter = match level {
        Some(level) => EnvFilter::try_new(level)
            .map_err(|error| anyhow::anyhow!("--log-level {level:?}: {error}"))?,
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        // Colors only on a terminal: log files and tests that read them get plain text.
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        LogFormat::Json => builder.json().with_ansi(false).init(),
    }
    Ok(())
}
