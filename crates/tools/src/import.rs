//! `hearth import`: a JSON file (export form) becomes a database's whole contents.
//!
//! Offline, the tree is built one top-level member at a time and written as a snapshot of the
//! database that covers the shard's log up to now: atomic (the old contents stay until the
//! snapshot is renamed into place) and never one huge log record. The database's rules are
//! kept. Online, each top-level member is sent as its own `PUT` (each at most the server's
//! request limit) and members the file does not have are deleted afterwards: readers see the
//! database change member by member.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::PathBuf;

use hearth_store::write_snapshot;
use hearth_tree::{Key, Node, Path, Priority};
use serde_json::{Map, Value};

use super::client::{data_path, encode_component, Call, Client};
use super::error::{Result, ToolsError};
use super::progress::Progress;
use super::stream::{for_each_member, Piece};
use super::{open_shard, Target};

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
}

pub fn import(args: ImportArgs) -> Result<()> {
    let target = &args.target;
    let opening = format!("opening {}", args.file.display());
    let file = File::open(&args.file).map_err(ToolsError::io(opening.clone()))?;
    let size = file.metadata().map_err(ToolsError::io(opening))?.len();
    let progress = Progress::bytes(Some(size), target.quiet, "importing");
    let reader = BufReader::with_capacity(1 << 20, progress.bar().wrap_read(file));
    match (&target.location.data_dir, &target.location.url) {
        (Some(dir), _) => offline(target, dir, args.create, reader, &progress),
        (None, Some(_)) => online(&target.client()?, reader),
        (None, None) => Err(ToolsError::Usage("give --data-dir or --url".to_owned())),
    }
}

fn offline(
    target: &Target,
    dir: &std::path::Path,
    create: bool,
    reader: impl Read,
    progress: &Progress,
) -> Result<()> {
    let (_lock, opened) = open_shard(target, dir, create)?;
    let root = build_tree(reader)?;
    let rules = opened
        .recovered
        .databases
        .get(target.db.as_str())
        .and_then(|database| database.rules.clone());
    let covered = opened.recovered.wal.last_seq();
    let info = write_snapshot(
        &*opened.storage,
        &target.db,
        covered,
        rules.as_deref(),
        &root,
    )?;
    progress.clear();
    if target.quiet {
        return Ok(());
    }
    eprintln!(
        "imported {} into {}: a snapshot of {} bytes ({})",
        target.db,
        dir.display(),
        info.bytes,
        info.name
    );
    Ok(())
}

/// The tree of a document, built member by member.
pub fn build_tree(reader: impl Read) -> Result<Node> {
    let mut root = Node::empty();
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
                root = root.with_child(&key, child);
            }
            Piece::Whole(value) => whole = Some(value),
        }
        Ok(())
    })?;
    if let Some(value) = whole {
        return Ok(Node::from_json(&value)?);
    }
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
    for_each_member(reader, &mut |piece| {
        match piece {
            Piece::Member(key, value) => {
                stale.remove(&key);
                put(&member_path(&key), &value)?;
            }
            Piece::Whole(value) => {
                stale.clear();
                put(&data_path("/"), &value)?;
            }
        }
        Ok(())
    })?;
    for key in stale {
        client.send(Call::new("DELETE", &member_path(&key)).query(&silent))?;
    }
    Ok(())
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
}
