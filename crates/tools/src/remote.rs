//! `hearth data`, `hearth rules get|set` and `hearth databases`: a running server's data,
//! rules and databases through its REST API, as one command each.

use std::io::{Read, Write};
use std::path::Path;

use hearth_server::rules_file::load_rules;
use serde::Deserialize;

use crate::client::{data_path, Call, Client, DatabaseArgs, ServerArgs};
use crate::error::{Result, ToolsError};

/// The largest value `data set|update|push` sends: the server's limit for a REST body.
pub const MAX_VALUE_BYTES: u64 = 256 * 1024 * 1024;

/// What `hearth data` does.
#[derive(clap::Subcommand, Debug)]
pub enum DataCommand {
    /// Print the value at PATH as JSON.
    Get(GetArgs),
    /// Replace the value at PATH with JSON.
    Set(WriteArgs),
    /// Merge the members of a JSON object into PATH (members it does not name stay).
    Update(WriteArgs),
    /// Add JSON as a new child of PATH under a new push id, and print that id.
    Push(WriteArgs),
    /// Delete the value at PATH.
    Remove(PathArgs),
    /// Print every change at or below PATH as one JSON line
    /// (`{"event":"put","path":"/a","data":…}`) until interrupted; the first line is the
    /// whole value. Reconnects when the stream breaks. With --changes, follows the change
    /// feed instead: each line has its log position as `id`, and a reconnection resumes after
    /// the last one printed (docs/change-feed.md).
    Watch(WatchArgs),
}

#[derive(clap::Args, Debug)]
pub struct WatchArgs {
    /// The location, as `/users/ada` (`/` is the root).
    pub path: String,
    /// Follow the change feed: lines carry their log position (`"id"`), and a broken stream
    /// resumes after the last line printed instead of starting over.
    #[arg(long)]
    pub changes: bool,
    /// Where the feed starts: `now` (the whole value first) or a position a feed gave.
    #[arg(long, requires = "changes", default_value = "now")]
    pub since: String,
    /// A file that keeps the position of the last line printed, written after each line:
    /// the next run resumes after it (it wins over --since), so a consumer that stops misses
    /// nothing and sees at most its last line again.
    #[arg(long, requires = "changes", value_name = "FILE")]
    pub position_file: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub server: DatabaseArgs,
}

#[derive(clap::Args, Debug)]
pub struct GetArgs {
    /// The location, as `/users/ada` (`/` is the root).
    pub path: String,
    /// Only the keys of the children, each with `true` (or the value of a leaf).
    #[arg(long)]
    pub shallow: bool,
    /// Indented JSON.
    #[arg(long)]
    pub pretty: bool,
    /// With priorities (`.priority`, `.value`), as `hearth export` writes.
    #[arg(long)]
    pub export: bool,
    #[command(flatten)]
    pub server: DatabaseArgs,
}

#[derive(clap::Args, Debug)]
pub struct WriteArgs {
    /// The location, as `/users/ada` (`/` is the root).
    pub path: String,
    /// The value as JSON text; `-` reads it from stdin.
    pub value: String,
    #[command(flatten)]
    pub server: DatabaseArgs,
}

#[derive(clap::Args, Debug)]
pub struct PathArgs {
    /// The location, as `/users/ada` (`/` is the root).
    pub path: String,
    #[command(flatten)]
    pub server: DatabaseArgs,
}

/// `print=silent`: the server answers a write with 204 and no body.
const SILENT: [(&str, &str); 1] = [("print", "silent")];

/// Runs a `hearth data` command, printing to stdout.
pub fn data(command: DataCommand) -> Result<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match command {
        DataCommand::Get(args) => get(&Client::for_database(&args.server)?, &args, &mut out),
        DataCommand::Set(args) => write("PUT", &args),
        DataCommand::Update(args) => write("PATCH", &args),
        DataCommand::Push(args) => {
            let body = read_value(&args.value)?;
            let client = Client::for_database(&args.server)?;
            let path = data_path(&args.path);
            #[derive(Deserialize)]
            struct Pushed {
                name: String,
            }
            let answer = client.text(Call::new("POST", &path).body(&body))?;
            let pushed: Pushed = serde_json::from_str(&answer)
                .map_err(ToolsError::json(format!("the answer to POST {path}")))?;
            writeln!(out, "{}", pushed.name).map_err(ToolsError::io("writing the push id"))
        }
        DataCommand::Remove(args) => {
            let path = data_path(&args.path);
            Client::for_database(&args.server)?.send(Call::new("DELETE", &path).query(&SILENT))?;
            Ok(())
        }
        DataCommand::Watch(args) => {
            let client = Client::for_database(&args.server)?;
            match args.changes {
                false => crate::watch::watch(&client, &args.path, &mut out),
                true => crate::watch::follow_changes(
                    &client,
                    &args.path,
                    &args.since,
                    args.position_file.as_deref(),
                    &mut out,
                ),
            }
        }
    }
}

/// `data set` and `data update`: the value, checked here, written with `method`.
fn write(method: &str, args: &WriteArgs) -> Result<()> {
    let body = read_value(&args.value)?;
    let path = data_path(&args.path);
    let call = Call::new(method, &path).query(&SILENT).body(&body);
    Client::for_database(&args.server)?.send(call)?;
    Ok(())
}

fn get(client: &Client, args: &GetArgs, out: &mut dyn Write) -> Result<()> {
    let mut query = Vec::new();
    if args.shallow {
        query.push(("shallow", "true"));
    }
    if args.pretty {
        query.push(("print", "pretty"));
    }
    if args.export {
        query.push(("format", "export"));
    }
    let path = data_path(&args.path);
    let mut answer = client.send(Call::new("GET", &path).query(&query))?;
    let mut body = answer.body_mut().as_reader();
    let mut last = LastByte { out, last: None };
    std::io::copy(&mut body, &mut last).map_err(|source| ToolsError::Io {
        what: format!("reading the answer to GET {path}"),
        source,
    })?;
    if last.last != Some(b'\n') {
        last.write_all(b"\n")
            .map_err(ToolsError::io("writing the value"))?;
    }
    Ok(())
}

/// A writer that remembers the last byte written, so that output ends with one newline.
struct LastByte<'a> {
    out: &'a mut dyn Write,
    last: Option<u8>,
}

impl Write for LastByte<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let written = self.out.write(bytes)?;
        if written > 0 {
            self.last = Some(bytes[written - 1]);
        }
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// The value of a write: the argument, or stdin for `-`; checked to be JSON here, so that a
/// typo is reported before anything is sent.
fn read_value(argument: &str) -> Result<Vec<u8>> {
    let bytes = if argument == "-" {
        let mut bytes = Vec::new();
        std::io::stdin()
            .lock()
            .take(MAX_VALUE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(ToolsError::io("reading the value from stdin"))?;
        bytes
    } else {
        argument.as_bytes().to_vec()
    };
    if bytes.len() as u64 > MAX_VALUE_BYTES {
        return Err(ToolsError::Usage(format!(
            "the value is larger than the server's limit of {MAX_VALUE_BYTES} bytes"
        )));
    }
    if let Err(source) = serde_json::from_slice::<serde::de::IgnoredAny>(&bytes) {
        return Err(match quote_hint(&bytes) {
            Some(hint) => ToolsError::NotJsonValue { source, hint },
            None => ToolsError::json("the value")(source),
        });
    }
    Ok(bytes)
}

/// For a value that is not JSON because it is a bare word or sentence (`hello`, not
/// `"hello"`): how to write it as a JSON string, since the shell eats one pair of quotes.
fn quote_hint(bytes: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(bytes).ok()?.trim();
    let first = text.chars().next()?;
    // Objects, arrays, strings and numbers were meant as JSON and have a real syntax error.
    if matches!(first, '{' | '[' | '"' | '-' | '0'..='9') {
        return None;
    }
    let quoted = serde_json::to_string(text).ok()?;
    let example = if text.contains('\'') || text.contains('\n') || quoted.len() > 60 {
        "'\"text\"'".to_owned()
    } else {
        format!("'{quoted}'")
    };
    Some(format!(
        "a string is JSON only in double quotes, and the shell removes one pair of quotes: \
         write {example}"
    ))
}

/// Where a database's rules are read and set.
const RULES: &str = "/.settings/rules.json";

/// `hearth rules get`: prints the rules of the database.
pub fn rules_get(server: &DatabaseArgs) -> Result<()> {
    let text = Client::for_database(server)?.text(Call::new("GET", RULES))?;
    let newline = if text.ends_with('\n') { "" } else { "\n" };
    print!("{text}{newline}");
    Ok(())
}

/// `hearth rules set FILE`: checks the file here (the errors of `hearth rules check`), then
/// gives it to the database.
pub fn rules_set(server: &DatabaseArgs, file: &Path) -> Result<()> {
    load_rules(file)?;
    let text =
        std::fs::read(file).map_err(ToolsError::io(format!("reading {}", file.display())))?;
    let client = Client::for_database(server)?;
    client.send(Call::new("PUT", RULES).body(&text))?;
    let database = client.namespace().unwrap_or_default();
    println!("{}: ok, set on {database}", file.display());
    Ok(())
}

/// One database, as `GET /.admin/databases` lists it.
#[derive(Debug, Deserialize)]
struct Listed {
    name: String,
    loaded: bool,
    bytes: u64,
    clients: u64,
    shard: u64,
}

#[derive(Debug, Deserialize)]
struct Listing {
    databases: Vec<Listed>,
}

/// `hearth databases`: the server's databases with their size and clients, as a table or
/// as the server's JSON.
pub fn databases(server: &ServerArgs, json: bool) -> Result<()> {
    let text = Client::new(server)?.text(Call::new("GET", "/.admin/databases"))?;
    if json {
        println!("{}", text.trim_end());
        return Ok(());
    }
    let listing: Listing = serde_json::from_str(&text)
        .map_err(ToolsError::json("the answer to GET /.admin/databases"))?;
    print!("{}", table(&listing.databases));
    Ok(())
}

fn table(databases: &[Listed]) -> String {
    let rows: Vec<[String; 5]> = databases
        .iter()
        .map(|database| {
            [
                database.name.clone(),
                if database.loaded { "yes" } else { "no" }.to_owned(),
                human_bytes(database.bytes),
                database.clients.to_string(),
                database.shard.to_string(),
            ]
        })
        .collect();
    let header = ["NAME", "LOADED", "SIZE", "CLIENTS", "SHARD"].map(str::to_owned);
    let mut widths = header.clone().map(|title| title.len());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut text = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        text.push_str(cells.join("  ").trim_end());
        text.push('\n');
    }
    text
}

/// `1536` as `1.5 KiB`.
fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(5 * 1024 * 1024), "5.0 MiB");
    }

    #[test]
    fn the_table_aligns_its_columns() {
        let rows = [
            Listed {
                name: "chat".into(),
                loaded: true,
                bytes: 2048,
                clients: 12,
                shard: 1,
            },
            Listed {
                name: "a-long-name".into(),
                loaded: false,
                bytes: 10,
                clients: 0,
                shard: 0,
            },
        ];
        assert_eq!(
            table(&rows),
            "NAME         LOADED  SIZE     CLIENTS  SHARD\n\
             chat         yes     2.0 KiB  12       1\n\
             a-long-name  no      10 B     0        0\n"
        );
    }

    #[test]
    fn values_are_checked_before_they_are_sent() {
        assert!(read_value("{\"a\": [1, 2]}").is_ok());
        assert!(read_value("\"text\"").is_ok());
        assert!(matches!(read_value("{a: 1}"), Err(ToolsError::Json { .. })));
        assert!(matches!(read_value("1 2"), Err(ToolsError::Json { .. })));
    }

    #[test]
    fn a_bare_word_is_told_to_be_quoted() {
        let error = read_value("hello world").map(drop);
        assert_eq!(
            error.map_err(|error| error.to_string()),
            Err(
                "invalid JSON in the value: expected value at line 1 column 1; a string is \
                 JSON only in double quotes, and the shell removes one pair of quotes: write \
                 '\"hello world\"'"
                    .to_owned()
            )
        );
        let error = read_value("it's").map_err(|error| error.to_string());
        assert!(
            error
                .as_ref()
                .is_err_and(|text| text.ends_with("write '\"text\"'")),
            "{error:?}"
        );
        // A JSON object with a typo gets no hint about strings.
        assert!(matches!(read_value("{a: 1}"), Err(ToolsError::Json { .. })));
    }
}
