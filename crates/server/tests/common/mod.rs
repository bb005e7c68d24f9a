//! What the integration tests share: one HTTP/1.1 request over a fresh connection.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// How long an answer may take.
const ANSWER_WAIT: Duration = Duration::from_secs(5);

/// Sends `method path` with `body` (and a bearer token, if given) and returns the status and
/// the body of the answer.
pub fn http(
    address: SocketAddr,
    method: &str,
    path: &str,
    bearer: Option<&str>,
    body: &str,
) -> (u16, String) {
    let mut stream = TcpStream::connect(address).expect("HTTP connects");
    stream
        .set_read_timeout(Some(ANSWER_WAIT))
        .expect("a read timeout");
    let authorization = bearer.map_or(String::new(), |token| {
        format!("Authorization: Bearer {token}\r\n")
    });
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\n{authorization}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .expect("the request is sent");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .expect("an answer within the wait");
    status_and_body(&response)
}

/// The status and the body of an HTTP/1.1 answer.
pub fn status_and_body(response: &str) -> (u16, String) {
    let status = response
        .get(9..12)
        .and_then(|code| code.parse().ok())
        .expect("a status line");
    let body = response
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, body)| body.to_owned());
    (status, body)
}
