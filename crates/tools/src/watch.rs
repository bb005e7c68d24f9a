//! `hearth data watch PATH`: the REST event stream of a location (server-sent events), printed
//! as one JSON line per change, `{"event":"put","path":"/a","data":…}`, until interrupted.
//!
//! The data is copied as the server wrote it (no reparse of numbers). A stream that breaks
//! (the server restarted, a proxy timed out, nothing arrived for [`WATCH_IDLE_TIMEOUT`]) is
//! opened again after a pause that doubles up to [`RECONNECT_MAX`]; its first event is then
//! the whole value again, as after any reconnect of a Firebase client.
//!
//! `--changes` follows the change feed instead (docs/change-feed.md): each line also has its
//! log position, `"id"`, and a broken stream is opened again after the last line printed, so
//! nothing is printed twice or missed; `--position-file` keeps that position across runs.

use std::io::{BufRead, BufReader, Read, Write};
use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;
use ureq::http::Response;
use ureq::Body;

#[cfg(doc)]
use crate::client::WATCH_IDLE_TIMEOUT;
use crate::client::{data_path, Client, MAX_ANSWER_BYTES};
use crate::error::{Result, ToolsError};

/// The first pause before opening a broken stream again.
pub const RECONNECT_FIRST: Duration = Duration::from_secs(1);

/// The longest pause between two attempts to open a broken stream again.
pub const RECONNECT_MAX: Duration = Duration::from_secs(30);

/// Follows the event stream of `path`, writing its changes to `out`. Returns only with an
/// error: the first request failed, the server refused a later one, cancelled the stream or
/// revoked the credential, or `out` failed.
pub fn watch(client: &Client, path: &str, out: &mut dyn Write) -> Result<()> {
    let url_path = data_path(path);
    let mut answer = client.event_stream(&url_path)?;
    loop {
        let ended = follow(answer.body_mut().as_reader(), &url_path, out, &mut |_| {
            Ok(())
        })?;
        eprintln!("hearth: the event stream of {path} ended ({ended}); opening it again");
        answer = reopen(|| client.event_stream(&url_path))?;
    }
}

/// Opens a broken stream again with `open`: after a pause of [`RECONNECT_FIRST`] that doubles
/// up to [`RECONNECT_MAX`] while the server cannot be reached. A refusal is the answer.
fn reopen(open: impl Fn() -> Result<Response<Body>>) -> Result<Response<Body>> {
    let mut pause = RECONNECT_FIRST;
    loop {
        std::thread::sleep(pause);
        match open() {
            Ok(answer) => return Ok(answer),
            Err(error @ ToolsError::Unreachable { .. }) => {
                pause = (pause * 2).min(RECONNECT_MAX);
                eprintln!("hearth: {error}; trying again in {} s", pause.as_secs());
            }
            Err(refused) => return Err(refused),
        }
    }
}

/// Follows the change feed of `path` from `since` (or from the position `position_file`
/// holds), writing its changes to `out` with their positions, and the position of each line
/// to `position_file` once the line is written. Returns only with an error, as [`watch`]; a
/// position the server no longer keeps is one (410, with what to do).
pub fn follow_changes(
    client: &Client,
    path: &str,
    since: &str,
    position_file: Option<&std::path::Path>,
    out: &mut dyn Write,
) -> Result<()> {
    let url_path = data_path(path);
    let mut position = position_file
        .and_then(|file| std::fs::read_to_string(file).ok())
        .map(|text| text.trim().to_owned())
        .filter(|text| !text.is_empty())
        .unwrap_or_else(|| since.to_owned());
    let mut answer = client.event_stream_with(&url_path, &[("changesSince", &position)])?;
    loop {
        let mut printed = |id: &str| {
            position = id.to_owned();
            position_file.map_or(Ok(()), |file| keep_position(file, id))
        };
        let ended = follow(answer.body_mut().as_reader(), &url_path, out, &mut printed)?;
        eprintln!("hearth: the change feed of {path} ended ({ended}); resuming after {position}");
        answer = reopen(|| client.event_stream_with(&url_path, &[("changesSince", &position)]))?;
    }
}

/// Writes `position` to `file` whole: a new file renamed over the old one, so that a stop at
/// any moment leaves one or the other.
fn keep_position(file: &std::path::Path, position: &str) -> Result<()> {
    let mut next = file.as_os_str().to_owned();
    next.push(".next");
    std::fs::write(&next, format!("{position}\n"))
        .and_then(|()| std::fs::rename(&next, file))
        .map_err(ToolsError::io("writing the position file"))
}

/// Reads events from one stream until it ends; returns why it ended. `printed` gets the id of
/// each event written to `out` that has one. Errors are what ends the watch.
fn follow(
    stream: impl Read,
    url_path: &str,
    out: &mut dyn Write,
    printed: &mut dyn FnMut(&str) -> Result<()>,
) -> Result<String> {
    let mut reader = BufReader::new(stream);
    let mut events = Events::default();
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = match (&mut reader)
            .take(MAX_ANSWER_BYTES + 1)
            .read_until(b'\n', &mut line)
        {
            Ok(read) => read,
            Err(error) => return Ok(error.to_string()),
        };
        if read == 0 {
            return Ok("closed by the server".to_owned());
        }
        if line.len() as u64 > MAX_ANSWER_BYTES {
            return Err(ToolsError::BadAnswer {
                request: format!("GET {url_path} (event stream)"),
                reason: format!("an event line is larger than {MAX_ANSWER_BYTES} bytes"),
            });
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\n', '\r']);
        if let Some((event, data, id)) = events.line(text) {
            if print_event(&event, &data, id.as_deref(), url_path, out)? {
                if let Some(id) = &id {
                    printed(id)?;
                }
            }
        }
    }
}

/// Server-sent events assembled from their lines.
#[derive(Default)]
struct Events {
    event: String,
    data: Option<String>,
    id: Option<String>,
}

impl Events {
    /// Takes one line (without its end); returns an event (with its id, if it has one) when a
    /// blank line completes it.
    fn line(&mut self, line: &str) -> Option<(String, String, Option<String>)> {
        if line.is_empty() {
            let data = self.data.take()?;
            return Some((std::mem::take(&mut self.event), data, self.id.take()));
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => self.event = value.to_owned(),
            "id" => self.id = Some(value.to_owned()),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            _ => {}
        }
        None
    }
}

#[derive(Deserialize)]
struct Change<'a> {
    path: String,
    #[serde(borrow)]
    data: &'a RawValue,
}

/// Writes a data event as a line; `true` when it did (a data event), `false` for the others.
fn print_event(
    event: &str,
    data: &str,
    id: Option<&str>,
    url_path: &str,
    out: &mut dyn Write,
) -> Result<bool> {
    let request = || format!("GET {url_path} (event stream)");
    match event {
        "put" | "patch" => {
            let change: Change = serde_json::from_str(data).map_err(ToolsError::json(format!(
                "a {event} event of {}",
                request()
            )))?;
            let id = id.map_or(String::new(), |id| {
                format!(",\"id\":{}", serde_json::Value::from(id))
            });
            let line = format!(
                "{{\"event\":{},\"path\":{},\"data\":{}{id}}}\n",
                serde_json::Value::from(event),
                serde_json::Value::from(change.path),
                change.data.get()
            );
            out.write_all(line.as_bytes())
                .and_then(|()| out.flush())
                .map_err(ToolsError::io("writing an event"))?;
            Ok(true)
        }
        "cancel" => Err(ToolsError::Refused {
            request: request(),
            status: 403,
            message: "the server cancelled the watch: the rules no longer allow reading here"
                .to_owned(),
        }),
        "auth_revoked" => Err(ToolsError::Refused {
            request: request(),
            status: 401,
            message: data.to_owned(),
        }),
        // keep-alive, and events this version does not know.
        _ => Ok(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn printed(stream: &str) -> (Result<String>, String) {
        let mut out = Vec::new();
        let ended = follow(stream.as_bytes(), "/a.json", &mut out, &mut |_| Ok(()));
        (ended, String::from_utf8_lossy(&out).into_owned())
    }

    #[test]
    fn changes_become_json_lines_with_the_data_as_sent() {
        let stream = "event: put\ndata: {\"path\":\"/\",\"data\":{\"n\":1.10,\"big\":12345678901234567890}}\n\n\
                      event: keep-alive\ndata: null\n\n\
                      : a comment\r\n\
                      event: patch\r\ndata: {\"path\":\"/x\",\r\ndata: \"data\":{\"a/b\":null}}\r\n\r\n";
        let (ended, out) = printed(stream);
        assert_eq!(ended.ok().as_deref(), Some("closed by the server"));
        assert_eq!(
            out,
            "{\"event\":\"put\",\"path\":\"/\",\"data\":{\"n\":1.10,\"big\":12345678901234567890}}\n\
             {\"event\":\"patch\",\"path\":\"/x\",\"data\":{\"a/b\":null}}\n"
        );
    }

    #[test]
    fn cancel_and_revoked_credentials_end_the_watch() {
        let (ended, out) = printed(
            "event: put\ndata: {\"path\":\"/\",\"data\":1}\n\nevent: cancel\ndata: null\n\n",
        );
        assert!(matches!(
            ended,
            Err(ToolsError::Refused { status: 403, .. })
        ));
        assert_eq!(out, "{\"event\":\"put\",\"path\":\"/\",\"data\":1}\n");
        let (ended, _) = printed("event: auth_revoked\ndata: credential is no longer valid\n\n");
        match ended {
            Err(ToolsError::Refused {
                status, message, ..
            }) => {
                assert_eq!(
                    (status, message.as_str()),
                    (401, "credential is no longer valid")
                );
            }
            other => panic!("not refused: {other:?}"),
        }
        let (ended, _) = printed("event: put\ndata: not json\n\n");
        assert!(matches!(ended, Err(ToolsError::Json { .. })));
    }

    #[test]
    fn a_change_feeds_lines_carry_their_position_once_written() {
        let stream = "id: 7\nevent: put\ndata: {\"path\":\"/\",\"data\":1}\n\n\
                      event: keep-alive\ndata: null\n\n\
                      id: 3.9\nevent: patch\ndata: {\"path\":\"/a\",\"data\":{\"b\":2}}\n\n";
        let mut out = Vec::new();
        let mut seen = Vec::new();
        let ended = follow(stream.as_bytes(), "/a.json", &mut out, &mut |id| {
            seen.push(id.to_owned());
            Ok(())
        });
        assert_eq!(ended.ok().as_deref(), Some("closed by the server"));
        assert_eq!(
            String::from_utf8_lossy(&out),
            "{\"event\":\"put\",\"path\":\"/\",\"data\":1,\"id\":\"7\"}\n\
             {\"event\":\"patch\",\"path\":\"/a\",\"data\":{\"b\":2},\"id\":\"3.9\"}\n"
        );
        assert_eq!(seen, ["7", "3.9"]);
    }
}
