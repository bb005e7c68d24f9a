//! `hearth emulator`: the server as the Firebase emulator suite's database emulator. It takes
//! the arguments firebase-tools gives the database emulator it starts (`--host`, `--port`,
//! `--functions_emulator_host`, `--functions_emulator_port`, `--single_project_mode`) and
//! serves as that emulator does: every database in memory, development credentials (the
//! token `owner` is an admin), open rules until the suite sets some, and the database
//! triggers of the Functions emulator delivered to it (docs/triggers.md).
//!
//! firebase-tools starts its database emulator as `java -jar PATH ARGS` (PATH from
//! `DATABASE_EMULATOR_BINARY_PATH`): `scripts/emulator-jar` builds a small jar
//! (`emulator/launcher/`) that runs this command with the same arguments.

use std::path::PathBuf;

use clap::Args;

#[derive(Args, Debug)]
pub(crate) struct EmulatorArgs {
    /// The address to listen on, as firebase-tools gives it (an IPv6 address unbracketed).
    #[arg(long, default_value = "localhost")]
    host: String,
    /// The port to listen on.
    #[arg(long, default_value_t = 9000)]
    port: u16,
    /// The Functions emulator's host, where database triggers are delivered.
    #[arg(long = "functions_emulator_host")]
    functions_emulator_host: Option<String>,
    /// The Functions emulator's port.
    #[arg(long = "functions_emulator_port")]
    functions_emulator_port: Option<u16>,
    /// Accepted for firebase-tools, which passes it; every database is served either way.
    #[arg(long = "single_project_mode")]
    single_project_mode: Option<String>,
    /// Where the in-memory server keeps its (empty) data directory; a new temporary one if
    /// not given, removed when the emulator stops.
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

/// `[::1]:9000` for an IPv6 host, `host:9000` otherwise.
fn address(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// What `hearth emulator` runs: `hearth serve` with these arguments, and the temporary data
/// directory to remove afterwards, if it made one.
pub(crate) struct ServeAsEmulator {
    pub(crate) argv: Vec<String>,
    pub(crate) temporary: Option<PathBuf>,
}

impl ServeAsEmulator {
    /// Removes the temporary data directory: nothing of value is in it, since the emulator
    /// keeps every database in memory.
    pub(crate) fn clean_up(&self) {
        if let Some(dir) = &self.temporary {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The `serve` command line that runs the server as the emulator suite's database emulator.
pub(crate) fn serve_arguments(args: EmulatorArgs) -> ServeAsEmulator {
    let temporary = args
        .data_dir
        .is_none()
        .then(|| std::env::temp_dir().join(format!("hearth-emulator-{}", std::process::id())));
    let data_dir = args
        .data_dir
        .or_else(|| temporary.clone())
        .unwrap_or_default();
    let mut argv = vec![
        "hearth".to_owned(),
        "serve".to_owned(),
        "--dev".to_owned(),
        "--durability".to_owned(),
        "none".to_owned(),
        "--listen".to_owned(),
        address(&args.host, args.port),
        "--data-dir".to_owned(),
        data_dir.display().to_string(),
    ];
    if let Some(port) = args.functions_emulator_port {
        let host = args
            .functions_emulator_host
            .as_deref()
            .unwrap_or("127.0.0.1");
        argv.push("--functions-emulator".to_owned());
        argv.push(address(host, port));
    }
    ServeAsEmulator { argv, temporary }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn firebase_tools_addresses_become_listen_addresses() {
        assert_eq!(address("127.0.0.1", 9000), "127.0.0.1:9000");
        assert_eq!(address("::1", 9000), "[::1]:9000");
        assert_eq!(address("[::1]", 9000), "[::1]:9000");
        assert_eq!(address("localhost", 9001), "localhost:9001");
    }

    #[derive(clap::Parser)]
    struct Command {
        #[command(flatten)]
        args: EmulatorArgs,
    }

    #[test]
    fn the_arguments_firebase_tools_passes_become_servers() {
        use clap::Parser;
        let command = Command::try_parse_from([
            "emulator",
            "--host",
            "127.0.0.1",
            "--port",
            "9000",
            "--single_project_mode",
            "Warning",
            "--functions_emulator_host",
            "127.0.0.1",
            "--functions_emulator_port",
            "5001",
        ])
        .expect("parses");
        let run = serve_arguments(command.args);
        let argv = run.argv.join(" ");
        assert!(argv.starts_with("hearth serve --dev --durability none --listen 127.0.0.1:9000"));
        assert!(
            argv.ends_with("--functions-emulator 127.0.0.1:5001"),
            "{argv}"
        );
        assert!(run.temporary.is_some());
    }
}
