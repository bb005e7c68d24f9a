//! `hearth export`: a database as JSON in export form (priorities kept), to a file or stdout.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use hearth_tree::Node;

use super::client::Call;
use super::error::{Result, ToolsError};
use super::progress::Progress;
use crate::target::{open_shard, Place, Target};

#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    #[command(flatten)]
    pub target: Target,
    /// Write here instead of stdout.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
}

pub fn export(args: ExportArgs) -> Result<()> {
    let out: Box<dyn Write> = match &args.output {
        Some(path) => Box::new(
            File::create(path).map_err(ToolsError::io(format!("creating {}", path.display())))?,
        ),
        None => Box::new(std::io::stdout().lock()),
    };
    let mut out = BufWriter::with_capacity(1 << 20, out);
    let target = &args.target;
    let place = target.place()?;
    // On a terminal that also shows the JSON, a bar would share its lines.
    let to_terminal = args.output.is_none() && std::io::IsTerminal::is_terminal(&std::io::stdout());
    let progress = Progress::bytes(None, target.quiet || to_terminal, "exporting");
    let bar = progress.bar();
    match place {
        Place::Offline(dir) => {
            let (_lock, opened) = open_shard(target, dir, None, false, false)?;
            let root = opened
                .recovered
                .databases
                .get(target.ns.as_str())
                .map(|database| database.root.clone())
                .unwrap_or_default();
            write_export(&root, &mut bar.wrap_write(&mut out))
                .map_err(ToolsError::io("writing the export"))?;
        }
        Place::Online(url) => {
            let client = target.client(url)?;
            let export = [("format", "export")];
            let mut answer = client.send(Call::new("GET", "/.json").query(&export))?;
            // The body reader undoes the answer's framing (a length, or chunks behind a
            // proxy): only the JSON reaches the file.
            let mut body = answer.body_mut().as_reader();
            std::io::copy(&mut body, &mut bar.wrap_write(&mut out)).map_err(|source| {
                ToolsError::Io {
                    what: "reading the export from the server".to_owned(),
                    source,
                }
            })?;
        }
    }
    out.write_all(b"\n")
        .and_then(|()| out.flush())
        .map_err(ToolsError::io("writing the export"))?;
    Ok(())
}

/// Writes `root` one top-level child at a time, so that only one child's JSON is in memory.
fn write_export(root: &Node, out: &mut dyn Write) -> std::io::Result<()> {
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
    fn the_streamed_export_is_the_tree_in_export_form() -> Result<(), Box<dyn std::error::Error>> {
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
