//! `hearth data watch PATH`: the REST event stream of a location (server-sent events), printed
//! as one JSON line per change, `{"event":"put","path":"/a","data":…}`, until interrupted.
//!
//! The data is copied as the server wrote it (no reparse of numbers). A stream that breaks
//! (the server restarted, a proxy timed out, nothing arrived for [`WATCH_IDLE_TIMEOUT`]) is
//! opened again after a pause that doubles up to [`RECONNECT_MAX`]; its first event is then
//! the whole value again, as after any reconnect of a Firebase client.

use std::io::{BufRead, BufReader, Read, Write};
use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;

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
    let mut pause = RECONNECT_FIRST;
    loop {
        let ended = follow(answer.body_mut().as_reader(), &url_path, out)?;
        eprintln!("hearth: the event stream of {path} ended ({ended}); opening it again");
        answer = loop {
            std::thread::sleep(pause);
            match client.event_stream(&url_path) {
                Ok(answer) => break answer,
                Err(error @ ToolsError::Unreachable { .. }) => {
                    pause = (pause * 2).min(RECONNECT_MAX);
                    eprintln!("hearth: {error}; trying again in {} s", pause.as_secs());
                }
                Err(refused) => return Err(refused),
            }
        };
        pause = RECONNECT_FIRST;
    }
}

/// Reads events from one stream until it ends; returns why it ended. Errors are what ends
/// the watch.
fn follow(stream: impl Read, url_path: &str, out: &mut dyn Write) -> Result<String> {
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
        if let Some((event, data)) = events.line(text) {
            print_event(&event, &data, url_path, out)?;
        }
    }
}

/// Server-sent events assembled from their lines.
#[derive(Default)]
struct Events {
    event: String,
    data: Option<String>,
}

impl Events {
    /// Takes one line (without its end); returns an event when a blank line completes it.
    fn line(&mut self, line: &str) -> Option<(String, String)> {
        if line.is_empty() {
            let data = self.data.take()?;
            return Some((std::mem::take(&mut self.event), data));
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => self.event = value.to_owned(),
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

fn print_event(event: &str, data: &str, url_path: &str, out: &mut dyn Write) -> Result<()> {
    let request = || format!("GET {url_path} (event stream)");
    match event {
        "put" | "patch" => {
            let change: Change = serde_json::from_str(data).map_err(ToolsError::json(format!(
                "a {event} event of {}",
                request()
            )))?;
            let line = format!(
                "{{\"event\":{},\"path\":{},\"data\":{}}}\n",
                serde_json::Value::from(event),
                serde_json::Value::from(change.path),
                change.data.get()
            );
            out.write_all(line.as_bytes())
                .and_then(|()| out.flush())
                .map_err(ToolsError::io("writing an event"))
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
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn printed(stream: &str) -> (Result<String>, String) {
        let mut out = Vec::new();
        let ended = follow(stream.as_bytes(), "/a.json", &mut out);
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
}
