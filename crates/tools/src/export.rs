//! `hearth export`: a database as JSON in export form (priorities kept), to a file or stdout.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::{bail, Context};
use hearth_tree::Node;

use super::http_client::{address, request};
use super::progress::Progress;
use super::{open_shard, Target};

#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    #[command(flatten)]
    pub target: Target,
    /// Write here instead of stdout.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
}

pub fn export(args: ExportArgs) -> anyhow::Result<()> {
    let out: Box<dyn Write> = match &args.output {
        Some(path) => {
            Box::new(File::create(path).with_context(|| format!("creating {}", path.display()))?)
        }
        None => Box::new(std::io::stdout().lock()),
    };
    let mut out = BufWriter::with_capacity(1 << 20, out);
    let target = &args.target;
    // On a terminal that also shows the JSON, a bar would share its lines.
    let to_terminal = args.output.is_none() && std::io::IsTerminal::is_terminal(&std::io::stdout());
    let progress = Progress::bytes(None, target.quiet || to_terminal, "exporting");
    let bar = progress.bar();
    match (&target.location.data_dir, &target.location.url) {
        (Some(dir), _) => {
            let (_lock, opened) = open_shard(target, dir, false)?;
            let root = opened
                .recovered
                .databases
                .get(target.db.as_str())
                .map(|database| database.root.clone())
                .unwrap_or_default();
            write_export(&root, &mut bar.wrap_write(&mut out))?;
        }
        (None, Some(url)) => {
            let address = address(url)?;
            let path = format!("/.json?ns={}&format=export", target.db);
            let status = request(
                &address,
                "GET",
                &path,
                &target.admin_token,
                None,
                &mut bar.wrap_write(&mut out),
            )?;
            if status != 200 {
                bail!("the server answered {status} to GET {path}");
            }
        }
        (None, None) => bail!("give --data-dir or --url"),
    }
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(())
}

/// Writes `root` one top-level child at a time, so that only one child's JSON is in memory.
fn write_export(root: &Node, out: &mut dyn Write) -> anyhow::Result<()> {
    if root.child_count() == 0 {
        serde_json::to_writer(&mut *out, &root.to_json(true))?;
        return Ok(());
    }
    out.write_all(b"{")?;
    let mut buffer = Vec::new();
    for (index, (key, child)) in root.children().enumerate() {
        if index > 0 {
            out.write_all(b",")?;
        }
        serde_json::to_writer(&mut *out, key.as_str())?;
        out.write_all(b":")?;
        buffer.clear();
        child.write_json(&mut buffer, true);
        out.write_all(&buffer)?;
    }
    let priority = root.priority().to_json();
    if !priority.is_null() {
        out.write_all(b",\".priority\":")?;
        serde_json::to_writer(&mut *out, &priority)?;
    }
    out.write_all(b"}")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_streamed_export_is_the_tree_in_export_form() -> anyhow::Result<()> {
        let value = json!({"b": {"x": 1, ".priority": 2}, "a": [1, "two"], ".priority": "p"});
        let root = Node::from_json(&value)?;
        let mut out = Vec::new();
        write_export(&root, &mut out)?;
        let written: serde_json::Value = serde_json::from_slice(&out)?;
        assert_eq!(written, root.to_json(true));
        let mut leaf = Vec::new();
        write_export(&Node::from_json(&json!(5))?, &mut leaf)?;
        assert_eq!(leaf, b"5");
        Ok(())
    }
}
