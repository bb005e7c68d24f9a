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

use hearth_server::backup::archive::ArchiveReader;

use crate::client::{Call, Client, ServerArgs};
use crate::error::{Result, ToolsError};

#[derive(clap::Args, Debug)]
pub struct BackupArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// The directory to write the backup into; created if missing, refused unless empty.
    #[arg(long)]
    pub out: PathBuf,
}

pub fn backup(args: BackupArgs) -> Result<()> {
    let client = Client::new(&args.server)?;
    let created = prepare_empty(&args.out)?;
    let outcome = fetch_into(&client, &args.out);
    if outcome.is_err() {
        // Never leave something that looks like a backup but is not one.
        let _ = if created {
            std::fs::remove_dir_all(&args.out)
        } else {
            remove_contents(&args.out)
        };
    }
    let files = outcome?;
    eprintln!(
        "backup of {} written into {}: {files} files",
        args.server.url,
        args.out.display()
    );
    Ok(())
}

/// Creates `dir` if missing (returns true then); refuses one that holds anything.
pub(crate) fn prepare_empty(dir: &Path) -> Result<bool> {
    let shown = dir.display().to_string();
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(ToolsError::Usage(format!(
                    "{shown} is not empty; choose a new directory"
                )));
            }
            Ok(false)
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).map_err(ToolsError::io(format!("creating {shown}")))?;
            Ok(true)
        }
        Err(error) => Err(ToolsError::io(format!("reading {shown}"))(error)),
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

fn fetch_into(client: &Client, out: &Path) -> Result<usize> {
    const REQUEST: &str = "POST /.admin/backup";
    let bad = |error: hearth_server::backup::archive::ArchiveError| ToolsError::BadAnswer {
        request: REQUEST.to_owned(),
        reason: error.to_string(),
    };
    let response = client.send(Call::new("POST", "/.admin/backup"))?;
    let body = BufReader::new(response.into_body().into_reader());
    let mut archive = ArchiveReader::new(body).map_err(bad)?;
    let mut files = 0;
    let mut directories = vec![out.to_owned()];
    while let Some(name) = archive.next_file().map_err(bad)? {
        let path = out.join(checked_name(&name)?);
        let shown = path.display().to_string();
        if let Some(parent) = path.parent() {
            if !directories.iter().any(|known| known == parent) {
                std::fs::create_dir_all(parent)
                    .map_err(ToolsError::io(format!("creating {}", parent.display())))?;
                directories.push(parent.to_owned());
            }
        }
        let mut file =
            File::create_new(&path).map_err(ToolsError::io(format!("creating {shown}")))?;
        archive.copy_file(&mut file).map_err(bad)?;
        file.flush()
            .and_then(|()| file.sync_all())
            .map_err(ToolsError::io(format!("writing {shown}")))?;
        files += 1;
    }
    for directory in directories {
        File::open(&directory)
            .and_then(|dir| dir.sync_all())
            .map_err(ToolsError::io(format!("syncing {}", directory.display())))?;
    }
    Ok(files)
}

/// The relative path of an archive entry, if it is one a backup holds: `backup.json` or
/// `shard-<n>/snap-<name>` (the server's word is not trusted with paths).
pub(crate) fn checked_name(name: &str) -> Result<PathBuf> {
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
        return Err(ToolsError::BadAnswer {
            request: "POST /.admin/backup".to_owned(),
            reason: format!("the backup holds an unexpected file name {name:?}"),
        });
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
