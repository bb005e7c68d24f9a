//! `hearth restore`: turns a backup directory (`hearth backup`) into a data directory that
//! `hearth serve` starts from. Every snapshot is verified (checksums, names) before anything is
//! written; the target must be new or empty.

use std::fs::File;
use std::path::{Path, PathBuf};

use hearth_server::persist::data_dir::DataDir;
use hearth_store::{verify_snapshot, FileStorage};
use serde::Deserialize;

use crate::error::{Result, ToolsError};

#[derive(clap::Args, Debug)]
pub struct RestoreArgs {
    /// The backup directory (written by `hearth backup`).
    #[arg(long)]
    pub from: PathBuf,
    /// The new data directory; created if missing, refused unless empty.
    #[arg(long)]
    pub data_dir: PathBuf,
}

/// The part of `backup.json` a restore needs.
#[derive(Deserialize)]
struct Description {
    format: u32,
    shards: usize,
}

pub fn restore(args: RestoreArgs) -> Result<()> {
    let from = &args.from;
    let description = from.join(hearth_server::backup::DESCRIPTION);
    let text = std::fs::read_to_string(&description).map_err(ToolsError::io(format!(
        "{} is not a backup directory: reading backup.json",
        from.display()
    )))?;
    let description: Description =
        serde_json::from_str(&text).map_err(ToolsError::json(description.display().to_string()))?;
    if description.format != 1 {
        return Err(ToolsError::Usage(format!(
            "backup format {} is not one this build reads (1)",
            description.format
        )));
    }
    let shards = description.shards;
    let files = verified_files(from, shards)?;
    crate::backup::prepare_empty(&args.data_dir)?;
    let data_dir = DataDir::open(&args.data_dir, Some(shards), shards)
        .map_err(|error| ToolsError::Usage(error.to_string()))?;
    for (shard, file) in &files {
        let source = from.join(format!("shard-{shard}")).join(file);
        copy_durably(&source, &data_dir.shard_dir(*shard), file)?;
    }
    for shard in 0..shards {
        let dir = data_dir.shard_dir(shard);
        File::open(&dir)
            .and_then(|dir| dir.sync_all())
            .map_err(ToolsError::io(format!("syncing {}", dir.display())))?;
    }
    eprintln!(
        "restored {} database snapshots into {}; start it with: hearth serve --data-dir {}",
        files.len(),
        args.data_dir.display(),
        args.data_dir.display()
    );
    Ok(())
}

/// Every snapshot of the backup as (shard, file name), each checked from its header to its end
/// frame and against its name, before anything is written.
fn verified_files(from: &Path, shards: usize) -> Result<Vec<(usize, String)>> {
    let read = |dir: &Path| ToolsError::io(format!("reading {}", dir.display()));
    let mut files = Vec::new();
    for entry in std::fs::read_dir(from).map_err(read(from))? {
        let entry = entry.map_err(read(from))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == hearth_server::backup::DESCRIPTION {
            continue;
        }
        let Some(shard) = name
            .strip_prefix("shard-")
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|shard| *shard < shards)
        else {
            return Err(ToolsError::Usage(format!(
                "{} holds an unexpected {name}: not a backup directory",
                from.display()
            )));
        };
        let dir = entry.path();
        let storage = FileStorage::open(&dir).map_err(read(&dir))?;
        for file in std::fs::read_dir(&dir).map_err(read(&dir))? {
            let file = file.map_err(read(&dir))?.file_name();
            let file = file.to_string_lossy().into_owned();
            let covered = verify_snapshot(&storage, &file)?.covered_seq;
            // The name says which database and position recovery takes it for.
            if !file.starts_with("snap-") || !file.ends_with(&format!("-{covered:020}")) {
                return Err(ToolsError::Usage(format!(
                    "{name}/{file} is not named as the snapshot it holds"
                )));
            }
            files.push((shard, file));
        }
    }
    Ok(files)
}

/// Copies `source` into `dir` as `name`: under a temporary name, synced, then renamed, so the
/// name appears only on a whole file.
fn copy_durably(source: &Path, dir: &Path, name: &str) -> Result<()> {
    let temporary = dir.join(format!("{name}.tmp"));
    let shown = temporary.display().to_string();
    std::fs::copy(source, &temporary)
        .and_then(|_| File::open(&temporary)?.sync_all())
        .and_then(|()| std::fs::rename(&temporary, dir.join(name)))
        .map_err(ToolsError::io(format!(
            "copying {} to {shown}",
            source.display()
        )))
}
