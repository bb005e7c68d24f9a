//! `hearth import`: a JSON file (export form) becomes a database's whole contents.
//!
//! Offline, the tree is built one top-level member at a time and written as a snapshot of the
//! database that covers the shard's log up to now: atomic (the old contents stay until the
//! snapshot is renamed into place) and never one huge log record. The database's rules are
//! kept. Online, the whole file is read and checked first (keys, values, depth, as the server
//! checks them), so that a document the server would refuse changes nothing; then each
//! top-level member is sent as its own `PUT` (each at most the server's request limit) and
//! members the file does not have are deleted afterwards: readers see the database change
//! member by member. If the server refuses a member all the same (its rules, its limits, or
//! it went away), the error says which members were written and that running the import
//! again finishes it.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::PathBuf;

use hearth_store::write_database_snapshot;
use hearth_tree::{Key, Node, Path, Priority};
use serde_json::{Map, Value};

use super::client::{data_path, encode_component, Call, Client};
use super::error::{Result, ToolsError};
use super::progress::Progress;
use super::stream::{for_each_member, Piece};
use crate::target::{open_shard, Place, Target};

#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    #[command(flatten)]
    pub target: Target,
    /// The JSON file (plain, or export form with `.priority` and `.value`).
    pub file: PathBuf,
    /// Offline: make --data-dir a new data directory (with --threads shards) if it is not one
    /// yet. Without it, a path that is not a data directory is refused, so that a typo does not
    /// become a new, empty data directory that no server reads.
    #[arg(long, requires = "data_dir")]
    pub create: bool,
    /// Offline: the shard count of the data directory --create makes (defaults to the number
    /// of cores, as `hearth serve` does); for an existing one, checked against its count.
    #[arg(long, requires = "data_dir")]
    pub threads: Option<usize>,
}

pub fn import(args: ImportArgs) -> Result<()> {
    let target = &args.target;
    let place = target.place()?;
    match place {
        Place::Offline(dir) => {
            let (reader, progress) = open_with_progress(&args.file, target.quiet)?;
            offline(&args, dir, reader, &progress)
        }
        Place::Online(url) => {
            // Read twice, first to check it whole: a pipe or a device is copied first.
            let document = Rereadable::of(&args.file)?;
            let checking = format!("reading {}", args.file.display());
            let unread = File::open(&document.path).map_err(ToolsError::io(checking))?;
            check_document(BufReader::with_capacity(1 << 20, unread)).map_err(|error| {
                ToolsError::Usage(format!(
                    "{} is not a document the server would take ({error}); nothing was \
                     changed",
                    args.file.display()
                ))
            })?;
            let (reader, _progress) = open_with_progress(&document.path, target.quiet)?;
            online(&target.client(url)?, reader)
        }
    }
}

/// The file, read through a progress bar of its size.
fn open_with_progress(path: &std::path::Path, quiet: bool) -> Result<(impl Read, Progress)> {
    let opening = format!("opening {}", path.display());
    let file = File::open(path).map_err(ToolsError::io(opening.clone()))?;
    let size = file.metadata().map_err(ToolsError::io(opening))?.len();
    let progress = Progress::bytes(Some(size), quiet, "importing");
    let reader = BufReader::with_capacity(1 << 20, progress.bar().wrap_read(file));
    Ok((reader, progress))
}

/// A document that can be read twice: the file itself, or a copy in the temporary directory
/// of what a pipe or a device gives (`/dev/stdin`), removed when dropped.
struct Rereadable {
    path: PathBuf,
    copied: bool,
}

impl Rereadable {
    fn of(path: &std::path::Path) -> Result<Rereadable> {
        let opening = format!("opening {}", path.display());
        let metadata = std::fs::metadata(path).map_err(ToolsError::io(opening.clone()))?;
        if metadata.is_file() {
            return Ok(Rereadable {
                path: path.to_path_buf(),
                copied: false,
            });
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos());
        let copy =
            std::env::temp_dir().join(format!("hearth-import-{}-{nanos}.json", std::process::id()));
        let document = Rereadable {
            path: copy.clone(),
            copied: true,
        };
        let copying = format!("copying {} to {}", path.display(), copy.display());
        let mut from = File::open(path).map_err(ToolsError::io(opening))?;
        let mut to = File::create(&copy).map_err(ToolsError::io(copying.clone()))?;
        std::io::copy(&mut from, &mut to).map_err(ToolsError::io(copying))?;
        Ok(document)
    }
}

impl Drop for Rereadable {
    fn drop(&mut self) {
        if self.copied {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn offline(
    args: &ImportArgs,
    dir: &std::path::Path,
    reader: impl Read,
    progress: &Progress,
) -> Result<()> {
    let target = &args.target;
    let (_lock, opened) = open_shard(target, dir, args.threads, args.create, true)?;
    let root = build_tree(reader).map_err(|error| ToolsError::InFile {
        file: args.file.clone(),
        source: Box::new(error),
    })?;
    // The rules and settings stay as they were: an import replaces the data.
    let existing = opened.recovered.databases.get(target.ns.as_str());
    let rules = existing.and_then(|database| database.rules.clone());
    let settings = existing.and_then(|database| database.settings.clone());
    let covered = opened.recovered.wal.last_seq();
    let info = write_database_snapshot(
        &*opened.storage,
        &target.ns,
        covered,
        0,
        rules.as_deref(),
        settings.as_deref(),
        &root,
    )?;
    progress.clear();
    if target.quiet {
        return Ok(());
    }
    eprintln!(
        "imported {} into {}: a snapshot of {} bytes ({})",
        target.ns,
        dir.display(),
        info.bytes,
        info.name
    );
    Ok(())
}

/// What a document holds besides its ordinary top-level members: the whole document when it
/// is not an object, or its keys that start with `.` (`.priority`, `.value`).
enum Rest {
    Whole(Value),
    Special(Map<String, Value>),
}

/// Reads a document member by member, each key and value checked as the server checks them,
/// and hands each ordinary member to `on_member`.
fn read_members(
    reader: impl Read,
    on_member: &mut dyn FnMut(Key, Node) -> Result<()>,
) -> Result<Rest> {
    let mut special = Map::new();
    let mut whole = None;
    for_each_member(reader, &mut |piece| {
        match piece {
            Piece::Member(key, value) if key.starts_with('.') => {
                special.insert(key, value);
            }
            Piece::Member(key, value) => {
                let key = Key::new(&key)?;
                let child = Node::from_json_at(&value, &Path::root().child(key.clone()))?;
                on_member(key, child)?;
            }
            Piece::Whole(value) => whole = Some(value),
        }
        Ok(())
    })?;
    Ok(whole.map_or(Rest::Special(special), Rest::Whole))
}

/// The document's tree: `root`, its ordinary members, with what `rest` says.
fn finish(mut root: Node, rest: Rest) -> Result<Node> {
    let special = match rest {
        Rest::Whole(value) => return Ok(Node::from_json(&value)?),
        Rest::Special(special) => special,
    };
    if special.contains_key(".value") {
        // A prioritized leaf at the root: only `.value` and `.priority` may be there.
        return Ok(Node::from_json(&Value::Object(special))?);
    }
    for (key, value) in special {
        match key.as_str() {
            ".priority" => root = root.with_priority(Priority::from_json(&value)?),
            _ => {
                return Err(ToolsError::Usage(format!(
                    "unexpected key {key:?} at the root of the document"
                )))
            }
        }
    }
    Ok(root)
}

/// The tree of a document, built member by member.
pub fn build_tree(reader: impl Read) -> Result<Node> {
    let mut root = Node::empty();
    let rest = read_members(reader, &mut |key, child| {
        root = root.with_child(&key, child);
        Ok(())
    })?;
    finish(root, rest)
}

/// Checks a whole document as [`build_tree`] would, keeping one member at a time.
fn check_document(reader: impl Read) -> Result<()> {
    let rest = read_members(reader, &mut |_, _| Ok(()))?;
    finish(Node::empty(), rest).map(drop)
}

fn online(client: &Client, reader: impl Read) -> Result<()> {
    let shallow = [("shallow", "true")];
    let before = client.json(Call::new("GET", "/.json").query(&shallow))?;
    let mut stale: std::collections::BTreeSet<String> = match before {
        Value::Object(keys) => keys.keys().cloned().collect(),
        _ => Default::default(),
    };
    let silent = [("print", "silent")];
    let put = |path: &str, value: &Value| -> Result<()> {
        let body = serde_json::to_vec(value).map_err(ToolsError::json("a member"))?;
        client.send(Call::new("PUT", path).query(&silent).body(&body))?;
        Ok(())
    };
    // A key is one segment, even one with a `/` (which the server then refuses).
    let member_path = |key: &str| format!("/{}.json", encode_component(key));
    let mut written = 0usize;
    let sent = for_each_member(reader, &mut |piece| {
        match piece {
            Piece::Member(key, value) => {
                stale.remove(&key);
                put(&member_path(&key), &value).map_err(|error| stopped(error, written, &key))?;
                written += 1;
            }
            Piece::Whole(value) => {
                stale.clear();
                put(&data_path("/"), &value).map_err(|error| stopped(error, written, "/"))?;
            }
        }
        Ok(())
    });
    sent?;
    for key in stale {
        client
            .send(Call::new("DELETE", &member_path(&key)).query(&silent))
            .map_err(|error| {
                ToolsError::Usage(format!(
                    "{error}; every member of the file was written, but members it does not \
                     have are left (this one and those after it): run the import again to \
                     finish"
                ))
            })?;
    }
    Ok(())
}

/// The error of an online import that stopped at `member`, with the state it left. Its kind
/// stays, so that the exit code keeps its meaning (3: unreachable, 4: credential refused).
fn stopped(error: ToolsError, written: usize, member: &str) -> ToolsError {
    let state = format!(
        "the import stopped at member {member:?}: the database holds the file's first \
         {written} members, and what it held before for the others; run the import again to \
         finish (it replaces every member)"
    );
    match error {
        ToolsError::Unreachable { url, reason } => ToolsError::Unreachable {
            url,
            reason: format!("{reason}; {state}"),
        },
        ToolsError::Refused {
            request,
            status,
            message,
        } => ToolsError::Refused {
            request,
            status,
            message: format!("{message}; {state}"),
        },
        other => ToolsError::Usage(format!("{other}; {state}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_built_tree_equals_the_whole_document() -> Result<(), Box<dyn std::error::Error>> {
        for document in [
            json!({"users": {"a": {"n": 1.5, ".priority": 3}}, "list": [1, 2], ".priority": "p"}),
            json!({".value": "leaf", ".priority": 7}),
            json!([true, null, "x"]),
            json!(-0.0),
            json!({"big": 1e300, "small": 0.1, "int": 9007199254740993u64, "é✓": "ü"}),
        ] {
            let text = serde_json::to_vec(&document)?;
            let built = build_tree(text.as_slice())?;
            assert_eq!(built, Node::from_json(&document)?, "{document}");
        }
        assert!(build_tree(&b"{\".bogus\": 1}"[..]).is_err());
        assert!(build_tree(&b"{\"a/b\": 1}"[..]).is_err());
        Ok(())
    }

    #[test]
    fn a_document_is_checked_as_it_would_be_built() {
        assert!(check_document(&b"{\"a\": 1, \".priority\": 2}"[..]).is_ok());
        assert!(check_document(&b"[1, {\"x\": null}]"[..]).is_ok());
        assert!(check_document(&b"{\"a\": 1, \"b.c\": 2}"[..]).is_err());
        assert!(check_document(&b"{\".bogus\": 1}"[..]).is_err());
    }

    #[test]
    fn an_import_that_stops_says_what_it_left_and_keeps_its_exit_code() {
        let refused = ToolsError::Refused {
            request: "PUT /c.json".to_owned(),
            status: 403,
            message: "Permission denied".to_owned(),
        };
        let error = stopped(refused, 2, "c");
        assert_eq!(error.exit_code(), 4);
        assert_eq!(
            error.to_string(),
            "the server answered 403 to PUT /c.json: Permission denied; the import stopped at \
             member \"c\": the database holds the file's first 2 members, and what it held \
             before for the others; run the import again to finish (it replaces every member)"
        );
    }
}
