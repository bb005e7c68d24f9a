//! `hearth backup`: asks a running server for a consistent backup (`POST /.admin/backup`) and
//! writes the archive it streams into a directory, one file per snapshot.
//!
//! ```text
//! DIR/backup.json                       what the server backed up: shards, cut positions, databases
//! DIR/shard-0/snap-<db>-<seq>           a database's state, in the store's snapshot format
//! ```

use std::fs::File;
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use hearth_server::backup::archive::ArchiveReader;

#[derive(clap::Args, Debug)]
pub struct BackupArgs {
    /// The running server, as `http://HOST:PORT` or `https://HOST`.
    #[arg(long)]
    pub url: String,
    /// The server's admin token (`owner` for a --dev server).
    #[arg(long, env = "HEARTH_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: String,
    /// The directory to write the backup into; created if missing, refused unless empty.
    #[arg(long)]
    pub out: PathBuf,
}

/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the server may take to start answering (every shard takes its cut first).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(120);

pub fn backup(args: BackupArgs) -> anyhow::Result<()> {
    let created = prepare_empty(&args.out)?;
    let outcome = fetch_into(&args);
    if outcome.is_err() {
        // Never leave something that looks like a backup but is not one.
        let _ = if created {
            std::fs::remove_dir_all(&args.out)
        } else {
            remove_contents(&args.out)
        };
    }
    let files = outcome?;
    eprintln!("backup of {} written: {files} files", args.url);
    Ok(())
}

/// Creates `dir` if missing (returns true then); refuses one that holds anything.
pub(crate) fn prepare_empty(dir: &Path) -> anyhow::Result<bool> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                bail!("{} is not empty; choose a new directory", dir.display());
            }
            Ok(false)
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            Ok(true)
        }
        Err(error) => Err(error).with_context(|| format!("reading {}", dir.display())),
    }
}

fn remove_contents(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            std::fs::remove_dir_all(path)?;
        } else {
            std::fs::remove_file(path)?;
        }
    }
    Ok(())
}

fn fetch_into(args: &BackupArgs) -> anyhow::Result<usize> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(Some(CONNECT_TIMEOUT))
        .timeout_recv_response(Some(ANSWER_TIMEOUT))
        .http_status_as_error(false)
        .build()
        .into();
    let url = format!("{}/.admin/backup", args.url.trim_end_matches('/'));
    let mut response = agent
        .post(&url)
        .header("Authorization", format!("Bearer {}", args.admin_token))
        .send_empty()
        .with_context(|| format!("POST {url}"))?;
    if response.status() != 200 {
        let message = response
            .body_mut()
            .with_config()
            .limit(64 * 1024)
            .read_to_string()
            .unwrap_or_default();
        bail!(
            "the server answered {} to POST {url}: {}",
            response.status(),
            message.trim()
        );
    }
    let body = BufReader::new(response.into_body().into_reader());
    let mut archive = ArchiveReader::new(body)?;
    let mut files = 0;
    let mut directories = vec![args.out.clone()];
    while let Some(name) = archive.next_file()? {
        let path = args.out.join(checked_name(&name)?);
        if let Some(parent) = path.parent() {
            if !directories.iter().any(|known| known == parent) {
                std::fs::create_dir_all(parent)
                    .with_context(|| format!("creating {}", parent.display()))?;
                directories.push(parent.to_owned());
            }
        }
        let mut file =
            File::create_new(&path).with_context(|| format!("creating {}", path.display()))?;
        archive.copy_file(&mut file)?;
        file.flush()?;
        file.sync_all()
            .with_context(|| format!("syncing {}", path.display()))?;
        files += 1;
    }
    for directory in directories {
        File::open(&directory)
            .and_then(|dir| dir.sync_all())
            .with_context(|| format!("syncing {}", directory.display()))?;
    }
    Ok(files)
}

/// The relative path of an archive entry, if it is one a backup holds: `backup.json` or
/// `shard-<n>/snap-<name>` (the server's word is not trusted with paths).
pub(crate) fn checked_name(name: &str) -> anyhow::Result<PathBuf> {
    if name == hearth_server::backup::DESCRIPTION {
        return Ok(PathBuf::from(name));
    }
    let valid = name.split_once('/').is_some_and(|(shard, file)| {
        shard
            .strip_prefix("shard-")
            .is_some_and(|n| !n.is_empty() && n.len() <= 4 && n.bytes().all(|b| b.is_ascii_digit()))
            && file.starts_with("snap-")
            && file
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    });
    if !valid {
        bail!("the backup holds an unexpected file name {name:?}");
    }
    Ok(PathBuf::from(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_backup_names_become_paths() {
        assert!(checked_name("backup.json").is_ok());
        assert!(checked_name("shard-0/snap-my_db-00000000000000000042").is_ok());
        for bad in [
            "../x",
            "/etc/passwd",
            "shard-0/../../x",
            "shard-a/snap-x",
            "shard-0/wal-00000000000000000001",
            "shard-0/snap-x/y",
            "shard-0",
            "",
        ] {
            assert!(checked_name(bad).is_err(), "{bad}");
        }
    }
}
