//! The few plain HTTP endpoints served before the REST API exists: a readiness answer and the
//! emulator's rules endpoint (`/.settings/rules.json`), which test runners call before they
//! start. Each response closes the connection.

use std::rc::Rc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::auth::OWNER_TOKEN;
use crate::http_head::Head;
use crate::namespace::NamespaceError;
use crate::shard::Shard;

/// The largest rules document accepted.
pub const MAX_RULES_BYTES: usize = 256 * 1024;

/// The rules a database has until someone sets others. Rules are not enforced yet; this is what
/// `--dev` promises.
const OPEN_RULES: &str = "{\"rules\":{\".read\":true,\".write\":true}}";

struct Response {
    status: &'static str,
    body: String,
}

impl Response {
    fn json(status: &'static str, body: impl Into<String>) -> Response {
        Response {
            status,
            body: body.into(),
        }
    }

    fn error(status: &'static str, message: &str) -> Response {
        Response::json(status, serde_json::json!({ "error": message }).to_string())
    }
}

/// Answers one plain HTTP request on the shard that owns its namespace.
pub async fn serve_http(
    shard: Rc<Shard>,
    mut stream: TcpStream,
    head: Head,
    leftover: Vec<u8>,
    namespace: Result<String, NamespaceError>,
) {
    let response = match namespace {
        Err(error) => Response::error("400 Bad Request", &error.to_string()),
        Ok(namespace) => respond(&shard, &mut stream, &head, leftover, &namespace).await,
    };
    let text = format!(
        "HTTP/1.1 {}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: {}\r\nAccess-Control-Allow-Origin: *\r\nConnection: close\r\n\r\n{}",
        response.status,
        response.body.len(),
        response.body
    );
    let _ = stream.write_all(text.as_bytes()).await;
    let _ = stream.shutdown().await;
}

async fn respond(
    shard: &Shard,
    stream: &mut TcpStream,
    head: &Head,
    leftover: Vec<u8>,
    namespace: &str,
) -> Response {
    match (head.method.as_str(), head.path.as_str()) {
        ("GET", "/.settings/rules.json") => {
            let rules = shard.rules.borrow().get(namespace).cloned();
            Response::json("200 OK", rules.unwrap_or_else(|| OPEN_RULES.to_owned()))
        }
        ("PUT", "/.settings/rules.json") => {
            if !is_admin(shard, head) {
                return Response::error("401 Unauthorized", "Permission denied");
            }
            match read_body(stream, head, leftover, MAX_RULES_BYTES).await {
                Ok(body) => {
                    shard.rules.borrow_mut().insert(namespace.to_owned(), body);
                    Response::json("200 OK", "{\"status\":\"ok\"}")
                }
                Err(response) => response,
            }
        }
        ("OPTIONS", _) => Response::json("204 No Content", ""),
        (method, path) => Response::error(
            "404 Not Found",
            &format!("{method} {path} is not available: this server speaks the realtime WebSocket protocol at /.ws"),
        ),
    }
}

fn is_admin(shard: &Shard, head: &Head) -> bool {
    let bearer = head
        .header("authorization")
        .and_then(|value| value.strip_prefix("Bearer "));
    let token = bearer.or_else(|| head.query_param("access_token"));
    shard.config.dev && token == Some(OWNER_TOKEN)
}

/// Reads a body of `Content-Length` bytes, refusing one larger than `limit` before reading it.
async fn read_body(
    stream: &mut TcpStream,
    head: &Head,
    mut body: Vec<u8>,
    limit: usize,
) -> Result<String, Response> {
    let length = head
        .header("content-length")
        .and_then(|value| value.trim().parse::<usize>().ok())
        .ok_or_else(|| Response::error("411 Length Required", "a Content-Length is required"))?;
    if length > limit {
        return Err(Response::error(
            "413 Payload Too Large",
            &format!("the body may hold at most {limit} bytes"),
        ));
    }
    while body.len() < length {
        let mut chunk = vec![0u8; (length - body.len()).min(64 * 1024)];
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => {
                return Err(Response::error("400 Bad Request", "the body ended early"))
            }
            Ok(read) => body.extend_from_slice(&chunk[..read]),
        }
    }
    body.truncate(length);
    String::from_utf8(body).map_err(|_| Response::error("400 Bad Request", "the body is not UTF-8"))
}
