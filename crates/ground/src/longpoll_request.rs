//! The query of a long-polling request (`/.lp?…`), read into what it asks for. Pure: the
//! parameters come in, a typed request or a refusal goes out.
//!
//! The web SDK (`BrowserPollConnection`) sends four kinds of request, all as script-tag or
//! iframe GETs with every parameter in the query:
//! - the start: `start=t&ser=<random>&cb=<callback number>&v=5`, with `ls` (the previous
//!   session), `p` (app id), `ac` (App Check) and `ns` when it has them;
//! - a poll: `id=<session id>&pw=<password>&ser=<serial>`, optionally followed by segments of
//!   the messages it sends, `seg<i>=<segment number>&ts<i>=<segments in the message>&d<i>=
//!   <web-safe base64>` for i = 0, 1, …;
//! - the disconnect frame: `dframe=t&id=…&pw=…`, an iframe that stays in the page;
//! - the goodbye that frame sends when the page goes: `disconn=t&id=…&pw=…`.

use thiserror::Error;
use tokio::sync::oneshot;

use crate::namespace::NamespaceError;
use crate::rest::RestResponse;
use hearth_net::http_head::Head;
use hearth_net::listener::Movable;
use hearth_net::query_string::QueryString;

/// The longest callback number accepted: the SDK counts its transports from 1 in a page.
pub const MAX_CALLBACK_DIGITS: usize = 9;

/// The most segments one poll may carry. The SDK packs segments into a URL of about 1,900
/// characters with 30 characters of overhead each, so it never sends more than 63.
pub const MAX_SEGMENTS_PER_REQUEST: usize = 64;

/// The longest segment accepted, in characters of base64. The SDK's are at most 1,840.
pub const MAX_SEGMENT_CHARS: usize = 4096;

/// The longest session id or password accepted (ours are far shorter).
const MAX_CREDENTIAL_CHARS: usize = 64;

/// One piece of a message the client sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// Its place in the session's sequence of segments, from 0.
    pub number: u64,
    /// How many segments the message it belongs to has.
    pub total: u64,
    /// Web-safe base64 (`A-Z a-z 0-9 - _`, `.` as padding) of part of the message's UTF-8.
    pub data: String,
}

/// What a long-polling request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LpRequest {
    /// A new session; `callback` names the page's functions `pLPCommand<n>` and `pRTLPCB<n>`.
    Start {
        callback: u32,
        previous: Option<String>,
    },
    /// A poll of a session, carrying segments of the client's messages.
    Poll {
        session: SessionRef,
        segments: Vec<Segment>,
    },
    /// The page that tells the server when the client's page goes away.
    DisconnectFrame,
    /// The client's page went away: end the session now.
    Disconnect { session: SessionRef },
}

/// A session as a request names it: its public id and its password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRef {
    pub id: String,
    pub password: String,
}

/// A poll or a disconnect that landed on another core than its session's, on its way there
/// with the way back for its answer.
pub struct Forwarded {
    pub request: LpRequest,
    pub reply: oneshot::Sender<RestResponse>,
}

/// A WebSocket naming a long-polling session (`s`) that landed on another core than the
/// session's, on its way there with its socket and what was read of it
/// (`longpoll::secondary`).
pub struct MovedUpgrade {
    pub stream: Movable,
    pub head: Head,
    pub leftover: Vec<u8>,
    pub namespace: Result<String, NamespaceError>,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum RequestError {
    #[error("a long-polling request is a start, a poll, a disconnect frame or a disconnect")]
    Unknown,
    #[error("the callback number must be 1 to {MAX_CALLBACK_DIGITS} digits")]
    Callback,
    #[error("the session id and password must be short and URL-safe")]
    Credential,
    #[error("segment {0} is malformed")]
    Segment(usize),
    #[error("a poll may carry at most {MAX_SEGMENTS_PER_REQUEST} segments")]
    TooManySegments,
}

/// Reads a request's query.
pub fn parse(query: &QueryString) -> Result<LpRequest, RequestError> {
    if query.get("start").is_some() {
        let callback = query.get("cb").ok_or(RequestError::Callback)?;
        if callback.is_empty()
            || callback.len() > MAX_CALLBACK_DIGITS
            || !callback.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(RequestError::Callback);
        }
        let callback = callback.parse().map_err(|_| RequestError::Callback)?;
        let previous = query
            .get("ls")
            .filter(|previous| !previous.is_empty())
            .map(str::to_owned);
        return Ok(LpRequest::Start { callback, previous });
    }
    if query.get("dframe").is_some() {
        return Ok(LpRequest::DisconnectFrame);
    }
    let session = session_ref(query)?;
    if query.get("disconn").is_some() {
        return Ok(LpRequest::Disconnect { session });
    }
    let mut segments = Vec::new();
    for index in 0.. {
        let Some(number) = query.get(&format!("seg{index}")) else {
            break;
        };
        if index >= MAX_SEGMENTS_PER_REQUEST {
            return Err(RequestError::TooManySegments);
        }
        let total = query.get(&format!("ts{index}"));
        let data = query.get(&format!("d{index}"));
        let (Ok(number), Some(Ok(total)), Some(data)) =
            (number.parse::<u64>(), total.map(str::parse::<u64>), data)
        else {
            return Err(RequestError::Segment(index));
        };
        if total == 0 || data.len() > MAX_SEGMENT_CHARS || !data.bytes().all(is_base64_web_safe) {
            return Err(RequestError::Segment(index));
        }
        segments.push(Segment {
            number,
            total,
            data: data.to_owned(),
        });
    }
    Ok(LpRequest::Poll { session, segments })
}

fn session_ref(query: &QueryString) -> Result<SessionRef, RequestError> {
    let (Some(id), Some(password)) = (query.get("id"), query.get("pw")) else {
        return Err(RequestError::Unknown);
    };
    if !is_credential(id) || !is_credential(password) {
        return Err(RequestError::Credential);
    }
    Ok(SessionRef {
        id: id.to_owned(),
        password: password.to_owned(),
    })
}

fn is_credential(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= MAX_CREDENTIAL_CHARS
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn is_base64_web_safe(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(query: &str) -> Result<LpRequest, RequestError> {
        parse(&QueryString::parse(query))
    }

    #[test]
    fn a_start_names_its_callback_and_previous_session() {
        assert_eq!(
            parse_str("start=t&ser=81234567&cb=3&v=5&ls=abc&ns=demo"),
            Ok(LpRequest::Start {
                callback: 3,
                previous: Some("abc".into())
            })
        );
        assert_eq!(parse_str("start=t&ser=1&v=5"), Err(RequestError::Callback));
        // The callback number becomes part of a script: digits only.
        assert_eq!(
            parse_str("start=t&cb=alert(1)"),
            Err(RequestError::Callback)
        );
        assert_eq!(
            parse_str("start=t&cb=1234567890"),
            Err(RequestError::Callback)
        );
    }

    #[test]
    fn a_poll_carries_numbered_segments_in_order() {
        let request =
            parse_str("id=0-7&pw=secret&ser=5&ns=x&seg0=4&ts0=2&d0=eyJ0&seg1=5&ts1=2&d1=Ijoi.")
                .expect("valid test input");
        let LpRequest::Poll { session, segments } = request else {
            panic!("a poll");
        };
        assert_eq!(session.id, "0-7");
        assert_eq!(session.password, "secret");
        assert_eq!(
            segments,
            vec![
                Segment {
                    number: 4,
                    total: 2,
                    data: "eyJ0".into()
                },
                Segment {
                    number: 5,
                    total: 2,
                    data: "Ijoi.".into()
                },
            ]
        );
    }

    #[test]
    fn malformed_polls_are_refused() {
        assert_eq!(parse_str("ser=1"), Err(RequestError::Unknown));
        assert_eq!(parse_str("id=a&pw=b%3C"), Err(RequestError::Credential));
        assert_eq!(
            parse_str("id=a&pw=b&seg0=1&ts0=1&d0=a+b"),
            Err(RequestError::Segment(0))
        );
        assert_eq!(
            parse_str("id=a&pw=b&seg0=1&ts0=0&d0=ab"),
            Err(RequestError::Segment(0))
        );
        assert_eq!(
            parse_str("id=a&pw=b&seg0=1&d0=ab"),
            Err(RequestError::Segment(0))
        );
        let long = "A".repeat(MAX_SEGMENT_CHARS + 1);
        assert_eq!(
            parse_str(&format!("id=a&pw=b&seg0=1&ts0=1&d0={long}")),
            Err(RequestError::Segment(0))
        );
        let many: String = (0..=MAX_SEGMENTS_PER_REQUEST)
            .map(|i| format!("&seg{i}={i}&ts{i}=100&d{i}=AA"))
            .collect();
        assert_eq!(
            parse_str(&format!("id=a&pw=b{many}")),
            Err(RequestError::TooManySegments)
        );
    }

    #[test]
    fn frames_and_disconnects() {
        assert_eq!(
            parse_str("dframe=t&id=a&pw=b"),
            Ok(LpRequest::DisconnectFrame)
        );
        assert_eq!(
            parse_str("disconn=t&id=a&pw=b"),
            Ok(LpRequest::Disconnect {
                session: SessionRef {
                    id: "a".into(),
                    password: "b".into()
                }
            })
        );
    }
}
