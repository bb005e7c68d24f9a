//! What a new user trips over first, run as they would: a mistyped data directory given to
//! `export` or `import`, and the progress line of both on a terminal.

use std::path::PathBuf;
use std::process::{Command, Output};

fn hearth_path() -> &'static str {
    env!("CARGO_BIN_EXE_hearth")
}

fn hearth() -> Command {
    Command::new(hearth_path())
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hearth-first-run-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    dir
}

fn output(command: &mut Command) -> Output {
    command.output().expect("hearth runs")
}

#[test]
fn export_of_a_mistyped_data_directory_is_refused_and_creates_nothing() {
    let dir = temp_dir("typo");
    let typo = dir.join("hearth-dta");
    let out = output(
        hearth()
            .args(["export", "--quiet", "--db", "shop", "--data-dir"])
            .arg(&typo),
    );
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "no `null` is printed");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("does not exist"), "{stderr}");
    assert!(!typo.exists(), "nothing was created");
    // A directory that exists but is not a data directory is refused as well, and left as it is.
    let out = output(
        hearth()
            .args(["export", "--quiet", "--db", "shop", "--data-dir"])
            .arg(&dir),
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is not a Hearth data directory"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_dir(&dir).map(Iterator::count).ok(), Some(0));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn import_creates_a_data_directory_only_when_asked_to() {
    let dir = temp_dir("create");
    let file = dir.join("in.json");
    std::fs::write(&file, br#"{"a": 1}"#).expect("written");
    let data = dir.join("data");
    let import = |create: bool| {
        let mut command = hearth();
        command.args(["import", "--db", "shop", "--threads", "1"]);
        if create {
            command.arg("--create");
        }
        output(command.arg("--data-dir").arg(&data).arg(&file))
    };
    let refused = import(false);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("does not exist"));
    assert!(!data.exists());
    let created = import(true);
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    // Into an existing data directory, --create is not needed.
    let again = import(false);
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let exported = output(
        hearth()
            .args(["export", "--quiet", "--db", "shop", "--data-dir"])
            .arg(&data),
    );
    assert_eq!(
        String::from_utf8_lossy(&exported.stdout).trim(),
        r#"{"a":1}"#
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// Runs `command` with a pseudo-terminal as its stdin, stdout and stderr (`script`, from
/// util-linux, which every Debian has) and returns what the terminal received.
fn on_a_terminal(command: &str) -> String {
    let out = output(Command::new("script").args(["-q", "-e", "-c", command, "/dev/null"]));
    assert!(
        out.status.success(),
        "{command}: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn progress_lines_are_cleared_and_quiet_draws_none() {
    let dir = temp_dir("progress");
    let file = dir.join("in.json");
    std::fs::write(&file, br#"{"a": 1}"#).expect("written");
    let data = dir.join("data");
    let data = data.display();
    let file = file.display();
    let output = dir.join("out.json");
    let output = output.display();
    let hearth = hearth_path();
    // With --quiet, the terminal gets no bar at all (it used to get a "0 B" line).
    let quiet = on_a_terminal(&format!(
        "{hearth} import --quiet --create --threads 1 --db shop --data-dir {data} {file} && \
         {hearth} export --quiet --db shop --data-dir {data} -o {output}"
    ));
    assert!(!quiet.contains(" B"), "{quiet:?}");
    assert!(
        !quiet.contains("importing") && !quiet.contains("exporting"),
        "{quiet:?}"
    );
    // Without it, every bar drawn is cleared at the end: the last thing on the bar's line is
    // the erase-line sequence, and what follows it starts a clean line.
    let shown = on_a_terminal(&format!(
        "{hearth} export --db shop --data-dir {data} -o {output}"
    ));
    if let Some(drawn) = shown.rfind("exporting") {
        let erased = shown.rfind("\u{1b}[2K").unwrap_or(0);
        assert!(erased > drawn, "the bar was left on the screen: {shown:?}");
    }
    let _ = std::fs::remove_dir_all(dir);
}
