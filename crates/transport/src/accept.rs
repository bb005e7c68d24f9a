//! A connection from its accept to its transport: the accept loop of a listener (backing off
//! when the process runs out of descriptors), the TLS handshake in the connection's own task,
//! the first request head, and then a WebSocket connection or HTTP. The client's address is
//! the accepted socket's peer, whatever a proxy in front may say (there is no trusted-proxy
//! setting: `X-Forwarded-For` is not read).

use std::net::IpAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tracing::{debug, warn};

use crate::front::Front;
use crate::http::serve_http;
use crate::serve::websocket::serve_websocket;
use hearth_edge::socket::Accepted;
use hearth_ground::metrics::labels::HttpRefusal;
use hearth_ground::namespace::resolve;
use hearth_net::accept_backoff::AcceptBackoff;
use hearth_net::http_head::{read_head, HeadError};
use hearth_net::tls::handshake;

/// Accepts connections on `listener` until the shard stops, each routed in a task of its own.
pub async fn accept_loop(front: Rc<Front>, listener: tokio::net::TcpListener) {
    let mut shutdown = front.shutdown();
    let mut backoff = AcceptBackoff::default();
    loop {
        if front.is_shutting_down() {
            return;
        }
        let pause = tokio::select! {
            _ = shutdown.changed() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    backoff.succeeded();
                    let _ = stream.set_nodelay(true);
                    // An IPv4 client of a dual-stack listener is itself, not a mapped IPv6.
                    let address = Some(peer.ip().to_canonical());
                    if front.config().tls.is_some() {
                        tokio::task::spawn_local(route_tls_connection(
                            front.clone(),
                            stream,
                            address,
                        ));
                    } else {
                        tokio::task::spawn_local(route_connection(front.clone(), stream, address));
                    }
                    continue;
                }
                Err(error) => {
                    // Running out of file descriptors must not end the loop; wait and retry.
                    let after = backoff.failed(Instant::now());
                    if let Some(unlogged) = after.log {
                        warn!(%error, unlogged, pause = ?after.pause, "accept failed; backing off");
                    }
                    after.pause
                }
            },
        };
        tokio::select! {
            _ = shutdown.changed() => return,
            () = tokio::time::sleep(pause) => {}
        }
    }
}

/// Answers a request head that cannot be served (too large or malformed) before closing, so
/// that an HTTP client learns why. Connections that closed or timed out get nothing.
async fn refuse_head<S: AsyncWrite + Unpin>(stream: &mut S, error: &HeadError) {
    let status = match error {
        HeadError::TooLarge => "431 Request Header Fields Too Large",
        HeadError::Malformed(_) => "400 Bad Request",
        HeadError::Closed | HeadError::Timeout | HeadError::Io(_) => return,
    };
    let body = serde_json::json!({ "error": error.to_string() }).to_string();
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(
        Duration::from_secs(5),
        stream.write_all(response.as_bytes()),
    )
    .await;
}

/// Completes the TLS handshake in the connection's own task (the shard's loop goes on
/// meanwhile), then serves the connection like a plain one.
async fn route_tls_connection(
    front: Rc<Front>,
    stream: tokio::net::TcpStream,
    address: Option<IpAddr>,
) {
    let Some(certs) = front.config().tls.clone() else {
        return;
    };
    match handshake(&certs, stream).await {
        // A task of its own, sized for what the connection does next: this one holds the
        // handshake's state, kilobytes that an idle connection would otherwise keep.
        Ok(stream) => drop(tokio::task::spawn_local(route_connection(
            front, stream, address,
        ))),
        Err(error) => debug!(%error, "dropping connection before a request"),
    }
}

/// Reads the first request head and serves the connection here: as a WebSocket connection,
/// or over HTTP. `address` is the client's (the socket's peer).
async fn route_connection<S: Accepted>(front: Rc<Front>, mut stream: S, address: Option<IpAddr>) {
    let read = match read_head(&mut stream).await {
        Ok(read) => read,
        Err(error) => {
            debug!(%error, "dropping connection before a request");
            match error {
                HeadError::TooLarge => front.counters().http_refused(HttpRefusal::HeadTooLarge),
                HeadError::Malformed(_) => {
                    front.counters().http_refused(HttpRefusal::HeadMalformed)
                }
                HeadError::Closed | HeadError::Timeout | HeadError::Io(_) => {}
            }
            refuse_head(&mut stream, &error).await;
            return;
        }
    };
    // A connection stays where it landed: its requests go to their database's owner
    // (`link`).
    if read.head.is_realtime_upgrade() {
        let namespace = resolve(
            read.head.query_param("ns"),
            read.head.header("host"),
            &front.config().default_namespace,
        );
        let (head, leftover) = read.after_head();
        if head.query_param("s").is_some() {
            // The web SDK moving a long-polling session onto a WebSocket.
            crate::longpoll::secondary::serve(front, stream, head, leftover, namespace).await;
        } else {
            // A task of its own, sized for the connection's life: this one also holds what
            // reading the head and serving HTTP need (BENCHMARKS.md §9, idle connections).
            drop(tokio::task::spawn_local(serve_websocket(
                front, stream, head, leftover, namespace, address,
            )));
        }
    } else {
        serve_http(front, stream, read.buffered, address).await;
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;

    use tokio::net::TcpStream;

    use super::*;
    use hearth_net::http_head::Head;

    fn future_bytes<A, B, C, F: Future>(_: impl Fn(A, B, C) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// An idle WebSocket connection keeps its task for its whole life: the task holds the
    /// connection's loop only, not what reading the head, serving HTTP or a TLS handshake
    /// needed (each kilobytes: 2.6 KiB in all for a plain connection, 8 KiB over TLS, when
    /// one task did everything). Sizes of a debug build, which are larger than a release's.
    #[test]
    fn a_websocket_connection_task_holds_only_its_loop() {
        let websocket = future_bytes(
            |front: Rc<Front>, (stream, head): (TcpStream, Head), address: Option<IpAddr>| {
                serve_websocket(front, stream, head, Vec::new(), Ok(String::new()), address)
            },
        );
        let http = future_bytes(
            |front: Rc<Front>, stream: TcpStream, address: Option<IpAddr>| {
                serve_http(front, stream, Vec::new(), address)
            },
        );
        let routing = future_bytes(route_connection::<TcpStream>);
        let tls = future_bytes(route_tls_connection);
        eprintln!("websocket {websocket}, http {http}, routing {routing}, tls {tls}");
        assert!(
            websocket <= 2560,
            "the WebSocket task grew to {websocket} bytes"
        );
    }
}
