//! `hearth restore`: turns a backup directory (`hearth backup`) into a data directory that
//! `hearth serve` starts from. Every snapshot is verified (checksums, names) before anything is
//! written; the target must be new or empty.

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use hearth_server::persist::data_dir::DataDir;
use hearth_store::{verify_snapshot, FileStorage};
use serde::Deserialize;

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

pub fn restore(args: RestoreArgs) -> anyhow::Result<()> {
    let description = args.from.join(hearth_server::backup::DESCRIPTION);
    let text = std::fs::read_to_string(&description).with_context(|| {
        format!(
            "{} is not a backup directory (no readable backup.json)",
            args.from.display()
        )
    })?;
    let description: Description = serde_json::from_str(&text)
        .with_context(|| format!("{} is damaged", description.display()))?;
    if description.format != 1 {
        bail!(
            "backup format {} is not one this build reads (1)",
            description.format
        );
    }
    let shards = description.shards;
    // Everything is checked before the target is touched.
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&args.from)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == hearth_server::backup::DESCRIPTION {
            continue;
        }
        let shard = name
            .strip_prefix("shard-")
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|shard| *shard < shards)
            .with_context(|| format!("{} holds an unexpected {name}", args.from.display()))?;
        let storage = FileStorage::open(&entry.path())
            .with_context(|| format!("reading {}", entry.path().display()))?;
        for file in std::fs::read_dir(entry.path())? {
            let file = file?.file_name().to_string_lossy().into_owned();
            let covered = verify_snapshot(&storage, &file)
                .with_context(|| format!("{name}/{file} is not a sound snapshot"))?;
            // The name says which database and position recovery takes it for.
            if !file.starts_with("snap-") || !file.ends_with(&format!("-{covered:020}")) {
                bail!("{name}/{file} is not named as the snapshot it holds");
            }
            files.push((shard, file));
        }
    }
    crate::backup::prepare_empty(&args.data_dir)?;
    let data_dir = DataDir::open(&args.data_dir, Some(shards), shards)?;
    for (shard, file) in &files {
        let from = args.from.join(format!("shard-{shard}")).join(file);
        copy_durably(&from, &data_dir.shard_dir(*shard), file)?;
    }
    for shard in 0..shards {
        sync_dir(&data_dir.shard_dir(shard))?;
    }
    eprintln!(
        "restored {} database snapshots into {}; start it with: hearth serve --data-dir {}",
        files.len(),
        args.data_dir.display(),
        args.data_dir.display()
    );
    Ok(())
}

/// Copies `from` into `dir` as `name`: under a temporary name, synced, then renamed, so the
/// name appears only on a whole file.
fn copy_durably(from: &Path, dir: &Path, name: &str) -> anyhow::Result<()> {
    let temporary = dir.join(format!("{name}.tmp"));
    std::fs::copy(from, &temporary)
        .with_context(|| format!("copying {} to {}", from.display(), temporary.display()))?;
    File::open(&temporary)
        .and_then(|file| file.sync_all())
        .with_context(|| format!("syncing {}", temporary.display()))?;
    std::fs::rename(&temporary, dir.join(name))
        .with_context(|| format!("renaming {}", temporary.display()))?;
    Ok(())
}

fn sync_dir(dir: &Path) -> anyhow::Result<()> {
    File::open(dir)
        .and_then(|dir| dir.sync_all())
        .with_context(|| format!("syncing {}", dir.display()))
}
