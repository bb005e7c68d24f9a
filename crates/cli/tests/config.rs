//! `hearth serve` settings from flags, `HEARTH_*` variables and a config file, seen through
//! `--print-config` of the real binary: which layer wins, and how a bad file is refused.

mod common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use common::{free_port, hearth};

fn config_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hearth-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let file = dir.join(name);
    std::fs::write(&file, text).expect("the config file is written");
    file
}

fn output(command: &mut Command) -> Output {
    command.output().expect("hearth runs")
}

/// The effective settings, parsed back from `--print-config`, and the source comment of each.
fn effective(command: &mut Command) -> (toml::Table, String) {
    let out = output(command.arg("--print-config"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "--print-config failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = toml::from_str(&stdout).expect("--print-config prints TOML");
    (table, stdout)
}

fn line<'a>(printed: &'a str, key: &str) -> &'a str {
    printed
        .lines()
        .find(|line| line.starts_with(&format!("{key} = ")))
        .unwrap_or_else(|| panic!("no line for {key} in:\n{printed}"))
}

#[test]
fn a_flag_beats_the_environment_which_beats_the_file_which_beats_the_default() {
    let file = config_file(
        "precedence.toml",
        "threads = 3\nping_interval_secs = 7\nidle-timeout-secs = 70\n\
         jwt-keys = [\"a.pem\", \"b.pem\"]\ndev = true\n",
    );
    let (table, printed) = effective(
        hearth()
            .args(["serve", "--threads", "9", "--config"])
            .arg(&file)
            .env("HEARTH_THREADS", "5")
            .env("HEARTH_PING_INTERVAL_SECS", "6"),
    );
    // threads: flag 9 over env 5 over file 3.
    assert_eq!(table["threads"].as_integer(), Some(9));
    assert!(line(&printed, "threads").ends_with("# flag"));
    // ping-interval-secs: env 6 over file 7 (a variable that `layers` made, not declared).
    assert_eq!(table["ping-interval-secs"].as_integer(), Some(6));
    assert!(line(&printed, "ping-interval-secs").ends_with("# env HEARTH_PING_INTERVAL_SECS"));
    // idle-timeout-secs: file 70 over default 60.
    assert_eq!(table["idle-timeout-secs"].as_integer(), Some(70));
    assert!(line(&printed, "idle-timeout-secs").ends_with("# file"));
    // sse-keep-alive-secs: the default.
    assert_eq!(table["sse-keep-alive-secs"].as_integer(), Some(30));
    assert!(line(&printed, "sse-keep-alive-secs").ends_with("# default"));
    let keys = table["jwt-keys"].as_array().expect("an array");
    assert_eq!(keys.len(), 2);
    assert_eq!(table["dev"].as_bool(), Some(true));
    assert!(printed.contains(&format!("# config file: {}", file.display())));
}

#[test]
fn the_config_file_comes_from_the_environment_too_and_secrets_stay_hidden() {
    let file = config_file(
        "secrets.toml",
        "admin-token = \"file-secret\"\nlisten = \"127.0.0.1:9\"\n",
    );
    let (table, printed) = effective(
        hearth()
            .arg("serve")
            .env("HEARTH_CONFIG", &file)
            .env("HEARTH_JWT_SECRET", "env-secret"),
    );
    assert_eq!(table["listen"].as_str(), Some("127.0.0.1:9"));
    assert_eq!(table["admin-token"].as_str(), Some("<hidden>"));
    assert_eq!(table["jwt-secret"].as_str(), Some("<hidden>"));
    assert!(!printed.contains("secret\""), "{printed}");
    // A flag's variable takes 1/0 as well as true/false.
    let (table, _) = effective(hearth().arg("serve").env("HEARTH_DEV", "1"));
    assert_eq!(table["dev"].as_bool(), Some(true));
    let (table, _) = effective(hearth().arg("serve").env("HEARTH_DEV", "0"));
    assert_eq!(table["dev"].as_bool(), Some(false));
}

#[test]
fn a_partner_required_by_a_flag_may_come_from_the_file() {
    let file = config_file("partner.toml", "tls-key = \"key.pem\"\n");
    let (table, _) = effective(
        hearth()
            .args(["serve", "--tls-cert", "cert.pem", "--config"])
            .arg(&file),
    );
    assert_eq!(table["tls-key"].as_str(), Some("key.pem"));
    // Without the file, clap refuses the lone flag as it always did.
    let out = output(hearth().args(["serve", "--tls-cert", "cert.pem", "--print-config"]));
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn unknown_keys_and_wrong_types_are_refused_with_file_line_and_key() {
    for (text, line, expected) in [
        (
            "threads = 2\ndata-dri = \"x\"\n",
            2,
            "unknown key `data-dri`",
        ),
        (
            "\n\nthreads = \"four\"\n",
            3,
            "`threads`: invalid value 'four'",
        ),
        (
            "durability = \"sometimes\"\n",
            1,
            "`durability`: invalid value 'sometimes'",
        ),
        (
            "listen = [\"a\", \"b\"]\n",
            1,
            "`listen`: takes one value, not an array",
        ),
        ("dev = \"yes\"\n", 1, "`dev`: expected true or false"),
    ] {
        let file = config_file("bad.toml", text);
        let out = output(
            hearth()
                .args(["serve", "--print-config", "--config"])
                .arg(&file),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}: {stderr}");
        assert!(
            stderr.contains(&format!("{}:{line}: {expected}", file.display())),
            "{text}: {stderr}"
        );
        assert!(out.stdout.is_empty());
    }
    let out = output(hearth().args(["serve", "--config", "/nonexistent/hearth.toml"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/hearth.toml"));
}

/// Starts a server and returns its first `count` log lines (stderr), then stops it.
fn first_log_lines(command: &mut Command, count: usize) -> Vec<String> {
    let dir =
        std::env::temp_dir().join(format!("hearth-config-logs-{}-{count}", std::process::id()));
    let mut child = command
        .args(["--threads", "1", "--listen"])
        .arg(format!("127.0.0.1:{}", free_port()))
        .arg("--data-dir")
        .arg(&dir)
        .env_remove("RUST_LOG")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("the server starts");
    let stderr = child.stderr.take().expect("stderr is piped");
    let lines: Vec<String> = BufReader::new(stderr)
        .lines()
        .take(count)
        .map(|line| line.expect("a log line"))
        .collect();
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    lines
}

#[test]
fn json_logs_are_one_object_per_line() {
    let lines = first_log_lines(hearth().args(["serve", "--log-format", "json"]), 2);
    assert_eq!(lines.len(), 2);
    for line in &lines {
        let event: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|error| panic!("{line:?} is not JSON: {error}"));
        assert!(event["timestamp"].is_string(), "{line}");
        assert!(event["level"].is_string(), "{line}");
        assert!(event["fields"]["message"].is_string(), "{line}");
    }
    // The locked-by-default warning, as JSON, says how to open the server.
    let warning: serde_json::Value = serde_json::from_str(&lines[0]).expect("JSON");
    assert_eq!(warning["level"], "WARN");
    let message = warning["fields"]["message"].as_str().unwrap_or_default();
    for way in ["--dev", "--rules", "--admin-token"] {
        assert!(message.contains(way), "{message}");
    }
    // HEARTH_LOG_FORMAT=text (the default) is not JSON.
    let lines = first_log_lines(hearth().arg("serve").env("HEARTH_LOG_FORMAT", "text"), 1);
    assert!(serde_json::from_str::<serde_json::Value>(&lines[0]).is_err());
    assert!(lines[0].contains("WARN"), "{}", lines[0]);
}
