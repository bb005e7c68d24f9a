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

/// The filter without `--log-level` or `RUST_LOG`: `info`, but rustls's complaints about what a
/// client sent in its handshake (an IP address as the server name, which browsers and Node send
/// when the URL names an address) only when they are errors: the operator can do nothing about
/// them.
pub const DEFAULT_FILTER: &str = "info,rustls::msgs::handshake=error";

/// Installs the global subscriber. `level` is a filter in `RUST_LOG` syntax (`info`,
/// `hearth_server=debug,info`); without one, `RUST_LOG` is used, else [`DEFAULT_FILTER`].
pub fn init(format: LogFormat, level: Option<&str>) -> anyhow::Result<()> {
    let filter = match level {
        Some(level) => EnvFilter::try_new(level)
            .map_err(|error| anyhow::anyhow!("--log-level {level:?}: {error}"))?,
        None => {
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER))
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A writer into a shared buffer, for reading what the subscriber printed.
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            if let Ok(mut buffer) = self.0.lock() {
                buffer.extend_from_slice(bytes);
            }
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_default_filter_keeps_warnings_but_not_rustls_handshake_complaints() {
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(EnvFilter::new(DEFAULT_FILTER))
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(target: "rustls::msgs::handshake", "Illegal SNI extension");
            tracing::warn!(target: "hearth_server::replica", "replication degraded");
            tracing::info!(target: "hearth_server", "listening");
        });
        let printed = String::from_utf8(buffer.0.lock().map(|b| b.clone()).unwrap_or_default())
            .unwrap_or_default();
        assert!(!printed.contains("Illegal SNI"), "{printed}");
        assert!(printed.contains("replication degraded"), "{printed}");
        assert!(printed.contains("listening"), "{printed}");
    }
}
