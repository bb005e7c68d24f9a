//! A bare uWebSockets broadcast server: the floor of what a broadcast costs, for the chat
//! probe of BENCHMARKS.md to compare Hearth's tail against (issue #37).
//!
//! The protocol (`hearth-load --target NAME=broadcast://HOST:PORT` speaks it,
//! `crates/load/src/broadcast.rs`), text frames only:
//!
//! - a client's first message is the name of the room it joins; the server subscribes it to
//!   that room and answers with the same name, which tells the client it is in;
//! - every later message from the client is published as it is to each member of its room,
//!   the sender included (uWebSockets' `publish` skips the sender, so it is sent its own
//!   message directly), like the Redis baseline and the Firebase chat, where the writer
//!   listens to its own room too.
//!
//! Nothing else: no parsing of the payloads, no storage, no rules. One thread and one event
//! loop, as uWebSockets' pub/sub lives in one app. Usage: `uws-broadcast [PORT]` (9300).

use uwebsockets_rs::app::App;
use uwebsockets_rs::http_request::HttpRequest;
use uwebsockets_rs::http_response::HttpResponse;
use uwebsockets_rs::listen_socket::ListenSocket;
use uwebsockets_rs::us_socket_context_options::UsSocketContextOptions;
use uwebsockets_rs::websocket::{Opcode, WebSocket};
use uwebsockets_rs::websocket_behavior::{UpgradeContext, WebSocketBehavior};

const DEFAULT_PORT: i32 = 9300;
/// The largest message accepted (a chat message is a few hundred bytes).
const MAX_PAYLOAD_BYTES: u32 = 64 * 1024;
/// Bytes queued for a slow client before uWebSockets stops sending to it.
const MAX_BACKPRESSURE_BYTES: u32 = 4 * 1024 * 1024;
/// Seconds without traffic before a connection is closed (pings keep live ones open).
const IDLE_TIMEOUT_SECS: u16 = 120;

/// What a connection holds: the room it joined, once it has.
struct Member {
    room: Option<String>,
}

fn main() {
    let port = std::env::args()
        .nth(1)
        .map(|text| text.parse().expect("the port is a number"))
        .unwrap_or(DEFAULT_PORT);
    let behavior = WebSocketBehavior {
        compression: 0,
        max_payload_length: MAX_PAYLOAD_BYTES,
        idle_timeout: IDLE_TIMEOUT_SECS,
        max_backpressure: MAX_BACKPRESSURE_BYTES,
        close_on_backpressure_limit: false,
        reset_idle_timeout_on_send: true,
        send_pings_automatically: true,
        max_lifetime: 0,
        upgrade: Some(Box::new(upgrade)),
        open: None,
        message: Some(Box::new(message)),
        ping: None,
        pong: None,
        close: Some(Box::new(|ws, _, _| {
            if let Some(member) = ws.get_user_data::<Member>() {
                // Allocated by `upgrade`; the connection is gone and nothing reads it again.
                drop(unsafe { Box::from_raw(member as *mut Member) });
            }
        })),
        drain: None,
        subscription: None,
    };
    App::new(no_tls())
        .ws("/*", behavior)
        .listen(
            port,
            Some(move |socket: ListenSocket| {
                if socket.get_native().is_null() {
                    eprintln!("uws-broadcast: cannot listen on port {port}");
                    std::process::exit(1);
                }
                eprintln!("uws-broadcast: listening on port {port}");
            }),
        )
        .run();
}

fn no_tls() -> UsSocketContextOptions {
    UsSocketContextOptions {
        key_file_name: None,
        cert_file_name: None,
        passphrase: None,
        dh_params_file_name: None,
        ca_file_name: None,
        ssl_ciphers: None,
        ssl_prefer_low_memory_usage: None,
    }
}

/// Accepts every WebSocket upgrade, each with a member of no room yet (freed on close).
fn upgrade(res: HttpResponse, req: HttpRequest, context: UpgradeContext) {
    let Some(key) = req.get_header("sec-websocket-key") else {
        res.end(Some(b"a WebSocket endpoint"), true);
        return;
    };
    let member = Box::into_raw(Box::new(Member { room: None }));
    res.upgrade(
        key,
        req.get_header("sec-websocket-protocol"),
        req.get_header("sec-websocket-extensions"),
        context,
        Some(unsafe { &mut *member }),
    );
}

/// The first text message joins its room; each later one goes to the whole room.
fn message(ws: WebSocket, data: &[u8], opcode: Opcode) {
    if opcode != Opcode::Text {
        return;
    }
    let Some(member) = ws.get_user_data::<Member>() else {
        return;
    };
    match &member.room {
        Some(room) => {
            ws.publish(room, data);
            ws.send(data, Opcode::Text);
        }
        None => {
            let room = String::from_utf8_lossy(data).into_owned();
            ws.subscribe(&room);
            ws.send(room.as_bytes(), Opcode::Text);
            member.room = Some(room);
        }
    }
}
