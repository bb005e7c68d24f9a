//! Disk errors at the storage seam: the server runs on an in-memory storage that fails its
//! syncs on demand, and real WebSocket and HTTP clients check what users would see. A write
//! whose sync fails is never acknowledged and never seen by anyone; the database goes back to
//! what is on disk; new writes are refused with an error; reads go on; the server stays up.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

mod common;

use futures_util::{SinkExt, StreamExt};
use hearth_server::persist::{Durability, PersistConfig};
use hearth_server::{ServeConfig, Server};
use hearth_store::{Fault, FaultPoint, FaultRule, FaultStorage};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How long any one expected message may take.
const WAIT: Duration = Duration::from_secs(5);

fn start(faults: Arc<FaultStorage>) -> (Server, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("hearth-disk-errors-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut config = ServeConfig::for_tests(SocketAddr::from(([127, 0, 0, 1], 0)));
    config.data_dir = dir.clone();
    config.persist = PersistConfig {
        durability: Durability::Strict,
        fault_storage: Some(faults),
        ..PersistConfig::default()
    };
    (Server::start(config).expect("the server starts"), dir)
}

async fn connect(address: SocketAddr) -> Socket {
    let url = format!("ws://{address}/.ws?v=5&ns=disk");
    let (mut socket, _) = tokio_tungstenite::connect_async(url)
        .await
        .expect("the WebSocket connects");
    let handshake = next_json(&mut socket).await.expect("a handshake");
    assert_eq!(handshake["t"], "c", "{handshake}");
    socket
}

/// The next data or control message as JSON; `None` when the connection closed.
async fn next_json(socket: &mut Socket) -> Option<Value> {
    loop {
        let message = tokio::time::timeout(WAIT, socket.next())
            .await
            .expect("a message within the wait")?;
        match message {
            Ok(Message::Text(text)) => {
                return Some(serde_json::from_str(text.as_str()).expect("JSON from the server"))
            }
            Ok(Message::Close(_)) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}

async fn request(socket: &mut Socket, id: u64, action: &str, body: Value) {
    let message = json!({"t": "d", "d": {"r": id, "a": action, "b": body}});
    socket
        .send(Message::text(message.to_string()))
        .await
        .expect("the request is sent");
}

/// The reply to request `id`, skipping pushes; `None` when the connection closed first.
/// Pushes seen on the way are returned too.
async fn reply(socket: &mut Socket, id: u64) -> (Option<Value>, Vec<Value>) {
    let mut pushes = Vec::new();
    while let Some(message) = next_json(socket).await {
        let data = &message["d"];
        if data["r"] == id {
            return (Some(data["b"].clone()), pushes);
        }
        pushes.push(message);
    }
    (None, pushes)
}

#[test]
fn a_failed_sync_is_never_acknowledged_or_seen_and_writes_are_refused_after() {
    let faults = Arc::new(FaultStorage::new());
    let (server, dir) = start(faults.clone());
    let address = server.address;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let mut writer = connect(address).await;
        request(&mut writer, 1, "p", json!({"p": "/a", "d": 1})).await;
        let (ok, _) = reply(&mut writer, 1).await;
        assert_eq!(
            ok,
            Some(json!({"s": "ok", "d": ""})),
            "the first write is durable"
        );

        let mut listener = connect(address).await;
        request(&mut listener, 1, "q", json!({"p": "/a", "h": ""})).await;
        let (ok, pushes) = reply(&mut listener, 1).await;
        assert_eq!(ok.map(|b| b["s"].clone()), Some(json!("ok")));
        assert_eq!(pushes[0]["d"]["b"]["d"], json!(1), "{pushes:?}");

        faults.inject(FaultRule::always(FaultPoint::Sync, Fault::Io));
        request(&mut writer, 2, "p", json!({"p": "/a", "d": 2})).await;
        let (answer, _) = reply(&mut writer, 2).await;
        assert_eq!(
            answer, None,
            "no answer: the writer is disconnected, never acked"
        );
        let mut seen = Vec::new();
        while let Some(message) = next_json(&mut listener).await {
            seen.push(message);
        }
        assert!(
            seen.iter().all(|m| m["d"]["b"]["d"] != json!(2)),
            "the listener never sees the write that failed: {seen:?}"
        );

        // A fresh client reads what is on disk, and its writes are refused with a reason.
        let mut client = connect(address).await;
        request(&mut client, 1, "g", json!({"p": "/a", "q": {}})).await;
        let (read, _) = reply(&mut client, 1).await;
        assert_eq!(read, Some(json!({"s": "ok", "d": 1})));
        request(&mut client, 2, "p", json!({"p": "/a", "d": 3})).await;
        let (refused, _) = reply(&mut client, 2).await;
        let refused = refused.expect("a refusal, not a disconnect");
        assert_eq!(refused["s"], "unavailable", "{refused}");
        assert!(
            refused["d"]
                .as_str()
                .is_some_and(|d| d.contains("injected EIO")),
            "the reason names the failure: {refused}"
        );

        let (status, body) = common::http(address, "GET", "/a.json?ns=disk", None, "");
        assert_eq!((status, body.as_str()), (200, "1"));
        let (status, body) = common::http(address, "PUT", "/a.json?ns=disk", None, "4");
        assert_eq!(status, 503, "{body}");
        let (status, _) = common::http(address, "GET", "/.json?ns=other", None, "");
        assert_eq!(status, 200, "other databases stay readable");
    });
    server.stop();
    let _ = std::fs::remove_dir_all(dir);
}
