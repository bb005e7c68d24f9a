//! tokio-tungstenite against fastwebsockets, over loopback TCP in one process.
//!
//! Every scenario runs on a current-thread tokio runtime with both ends of one TCP connection
//! in the same task (`tokio::join!`), so the numbers are the CPU cost of framing, buffering,
//! masking and syscalls, without scheduler noise. The WebSocket handshake is skipped (both
//! libraries can wrap an already upgraded stream); it is not part of the per-message cost.
//!
//! Scenarios, each moving `n` text messages of about 100 bytes:
//! * **push**: the server writes, a minimal hand-written client counts the frames. This is the
//!   path Hearth cares about most (fan-out to subscribers) and isolates the server's write side.
//! * **e2e**: the same library at both ends (the client reads with the library too).
//! * **inbound**: a hand-written client sends pre-masked frames, the server reads them (the
//!   path of client writes; includes unmasking and UTF-8 validation).
//!
//! Writers follow the server's pattern: queue a batch of [`BATCH`] messages, flush once.

use std::io;

use fastwebsockets::{Frame, OpCode, Payload, Role as FwsRole, WebSocket};
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::protocol::Role as TungRole;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};
use tokio_tungstenite::WebSocketStream;

/// Messages written between two flushes, as the server's outbound queue does per loop turn.
pub const BATCH: usize = 64;

/// Capacity of the write buffer given to fastwebsockets through `tokio::io::BufWriter`; the
/// same as tungstenite's default `write_buffer_size` (128 KiB).
pub const WRITE_BUFFER: usize = 128 * 1024;

/// A realistic small push, about 100 bytes.
pub fn small_message() -> String {
    let text = r#"{"t":"d","d":{"a":"d","b":{"p":"/rooms/general/typing/x7Gq2LmB9c","d":{"on":true,"ts":1795323485336}}}}"#;
    text.to_owned()
}

/// A connected loopback TCP pair (server side, client side), with Nagle off as the server sets.
pub async fn tcp_pair() -> io::Result<(TcpStream, TcpStream)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (client, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
    let (server, _) = accepted?;
    let client = client?;
    server.set_nodelay(true)?;
    client.set_nodelay(true)?;
    Ok((server, client))
}

/// The client end used by push scenarios: reads raw bytes and counts whole unmasked frames.
/// It allocates nothing per frame, so allocation counts belong to the server side.
pub struct RawReader {
    stream: TcpStream,
    buf: Vec<u8>,
    /// Bytes of `buf` holding data not yet parsed.
    filled: usize,
}

impl RawReader {
    pub fn new(stream: TcpStream) -> RawReader {
        RawReader {
            stream,
            buf: vec![0; 256 * 1024],
            filled: 0,
        }
    }

    /// Reads until `n` whole frames have arrived; returns the payload bytes seen.
    pub async fn read_frames(&mut self, n: usize) -> io::Result<usize> {
        let mut frames = 0;
        let mut payload = 0;
        while frames < n {
            let read = self.stream.read(&mut self.buf[self.filled..]).await?;
            if read == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            self.filled += read;
            let mut at = 0;
            while let Some((header, len)) = parse_header(&self.buf[at..self.filled]) {
                if self.filled - at < header + len {
                    break;
                }
                at += header + len;
                payload += len;
                frames += 1;
            }
            self.buf.copy_within(at..self.filled, 0);
            self.filled -= at;
        }
        assert_eq!(self.filled, 0, "more frames than expected");
        Ok(payload)
    }
}

/// (header length, payload length) of an unmasked frame at the start of `buf`, if the header
/// is complete.
fn parse_header(buf: &[u8]) -> Option<(usize, usize)> {
    if buf.len() < 2 {
        return None;
    }
    assert_eq!(buf[1] & 0x80, 0, "server frames are not masked");
    match buf[1] & 0x7f {
        126 if buf.len() >= 4 => Some((4, usize::from(u16::from_be_bytes([buf[2], buf[3]])))),
        126 => None,
        127 => panic!("no frame of this benchmark needs a 64-bit length"),
        len => Some((2, usize::from(len))),
    }
}

/// `n` masked text frames of `text`, as a client sends them, in one buffer.
pub fn masked_frames(text: &str, n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * (text.len() + 8));
    let mask = [0x37, 0xfa, 0x21, 0x3d];
    for _ in 0..n {
        out.push(0x81);
        match text.len() {
            len @ 0..=125 => out.push(0x80 | len as u8),
            len => {
                out.push(0x80 | 126);
                out.extend_from_slice(&u16::try_from(len).expect("small frame").to_be_bytes());
            }
        }
        out.extend_from_slice(&mask);
        out.extend(text.bytes().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    }
    out
}

fn other(error: impl std::fmt::Display) -> io::Error {
    io::Error::other(error.to_string())
}

// ---------------------------------------------------------------------------------------------
// tokio-tungstenite

pub struct TungServer {
    pub ws: WebSocketStream<TcpStream>,
}

impl TungServer {
    pub async fn new(stream: TcpStream) -> TungServer {
        TungServer {
            ws: WebSocketStream::from_raw_socket(stream, TungRole::Server, None).await,
        }
    }

    /// Hearth's pattern: the same `Utf8Bytes` cloned into each message, `feed` a batch, one
    /// `flush`.
    pub async fn push(&mut self, text: &Utf8Bytes, n: usize) -> io::Result<()> {
        let mut sent = 0;
        while sent < n {
            let batch = BATCH.min(n - sent);
            for _ in 0..batch {
                self.ws
                    .feed(Message::Text(text.clone()))
                    .await
                    .map_err(other)?;
            }
            self.ws.flush().await.map_err(other)?;
            sent += batch;
        }
        Ok(())
    }

    /// Reads `n` text messages; returns their total length.
    pub async fn read(&mut self, n: usize) -> io::Result<usize> {
        let mut total = 0;
        for _ in 0..n {
            match self.ws.next().await {
                Some(Ok(Message::Text(text))) => total += text.len(),
                other_message => return Err(other(format!("unexpected {other_message:?}"))),
            }
        }
        Ok(total)
    }
}

pub struct TungClient {
    pub ws: WebSocketStream<TcpStream>,
}

impl TungClient {
    pub async fn new(stream: TcpStream) -> TungClient {
        TungClient {
            ws: WebSocketStream::from_raw_socket(stream, TungRole::Client, None).await,
        }
    }

    pub async fn read(&mut self, n: usize) -> io::Result<usize> {
        let mut total = 0;
        for _ in 0..n {
            match self.ws.next().await {
                Some(Ok(Message::Text(text))) => total += text.len(),
                other_message => return Err(other(format!("unexpected {other_message:?}"))),
            }
        }
        Ok(total)
    }
}

// ---------------------------------------------------------------------------------------------
// fastwebsockets

/// How the fastwebsockets server writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FwsWrites {
    /// Straight onto the `TcpStream`: `write_frame` formats each frame into its small internal
    /// buffer and calls `write_all`, so every frame is a `write` syscall.
    Direct,
    /// Through a `tokio::io::BufWriter` of [`WRITE_BUFFER`] bytes, with `flush()` after each
    /// batch: the same batching tungstenite does internally.
    Buffered,
}

pub enum FwsServer {
    Direct(WebSocket<TcpStream>),
    Buffered(WebSocket<BufWriter<TcpStream>>),
}

impl FwsServer {
    pub fn new(stream: TcpStream, writes: FwsWrites) -> FwsServer {
        match writes {
            FwsWrites::Direct => {
                FwsServer::Direct(WebSocket::after_handshake(stream, FwsRole::Server))
            }
            FwsWrites::Buffered => FwsServer::Buffered(WebSocket::after_handshake(
                BufWriter::with_capacity(WRITE_BUFFER, stream),
                FwsRole::Server,
            )),
        }
    }

    pub async fn push(&mut self, text: &[u8], n: usize) -> io::Result<()> {
        match self {
            FwsServer::Direct(ws) => fws_push(ws, text, n).await,
            FwsServer::Buffered(ws) => fws_push(ws, text, n).await,
        }
    }

    pub async fn read(&mut self, n: usize) -> io::Result<usize> {
        match self {
            FwsServer::Direct(ws) => fws_read(ws, n).await,
            FwsServer::Buffered(ws) => fws_read(ws, n).await,
        }
    }
}

async fn fws_push<S>(ws: &mut WebSocket<S>, text: &[u8], n: usize) -> io::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut sent = 0;
    while sent < n {
        let batch = BATCH.min(n - sent);
        for _ in 0..batch {
            ws.write_frame(Frame::text(Payload::Borrowed(text)))
                .await
                .map_err(other)?;
        }
        ws.flush().await.map_err(other)?;
        sent += batch;
    }
    Ok(())
}

async fn fws_read<S>(ws: &mut WebSocket<S>, n: usize) -> io::Result<usize>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut total = 0;
    for _ in 0..n {
        let frame = ws.read_frame().await.map_err(other)?;
        if frame.opcode != OpCode::Text {
            return Err(other(format!("unexpected opcode {:?}", frame.opcode)));
        }
        total += frame.payload.len();
    }
    Ok(total)
}

pub struct FwsClient {
    pub ws: WebSocket<TcpStream>,
}

impl FwsClient {
    pub fn new(stream: TcpStream) -> FwsClient {
        FwsClient {
            ws: WebSocket::after_handshake(stream, FwsRole::Client),
        }
    }

    pub async fn read(&mut self, n: usize) -> io::Result<usize> {
        fws_read(&mut self.ws, n).await
    }
}

// ---------------------------------------------------------------------------------------------
// Scenarios: each keeps its connection across runs, and one run moves `n` messages.

/// Which library (and write mode) a scenario uses on the server side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lib {
    Tungstenite,
    Fws(FwsWrites),
}

impl Lib {
    pub const ALL: [Lib; 3] = [
        Lib::Tungstenite,
        Lib::Fws(FwsWrites::Direct),
        Lib::Fws(FwsWrites::Buffered),
    ];

    pub fn name(self) -> &'static str {
        match self {
            Lib::Tungstenite => "tokio-tungstenite",
            Lib::Fws(FwsWrites::Direct) => "fastwebsockets",
            Lib::Fws(FwsWrites::Buffered) => "fastwebsockets+BufWriter",
        }
    }
}

enum Server {
    Tung(TungServer),
    Fws(FwsServer),
}

impl Server {
    async fn new(lib: Lib, stream: TcpStream) -> Server {
        match lib {
            Lib::Tungstenite => Server::Tung(TungServer::new(stream).await),
            Lib::Fws(writes) => Server::Fws(FwsServer::new(stream, writes)),
        }
    }
}

/// Server pushes, raw client counts.
pub struct Push {
    server: Server,
    client: RawReader,
    text: Utf8Bytes,
}

impl Push {
    pub async fn new(lib: Lib, text: &str) -> io::Result<Push> {
        let (server, client) = tcp_pair().await?;
        Ok(Push {
            server: Server::new(lib, server).await,
            client: RawReader::new(client),
            text: Utf8Bytes::from(text.to_owned()),
        })
    }

    /// Moves `n` messages; returns the payload bytes the client saw.
    pub async fn run(&mut self, n: usize) -> io::Result<usize> {
        let Push {
            server,
            client,
            text,
        } = self;
        let send = async {
            match server {
                Server::Tung(server) => server.push(text, n).await,
                Server::Fws(server) => server.push(text.as_bytes(), n).await,
            }
        };
        let (sent, received) = tokio::join!(send, client.read_frames(n));
        sent?;
        received
    }
}

/// The same library at both ends.
// One value per benchmark: the size difference of the variants does not matter.
#[allow(clippy::large_enum_variant)]
pub enum EndToEnd {
    Tung(TungServer, TungClient, Utf8Bytes),
    Fws(FwsServer, FwsClient, Vec<u8>),
}

impl EndToEnd {
    pub async fn new(lib: Lib, text: &str) -> io::Result<EndToEnd> {
        let (server, client) = tcp_pair().await?;
        Ok(match lib {
            Lib::Tungstenite => EndToEnd::Tung(
                TungServer::new(server).await,
                TungClient::new(client).await,
                Utf8Bytes::from(text.to_owned()),
            ),
            Lib::Fws(writes) => EndToEnd::Fws(
                FwsServer::new(server, writes),
                FwsClient::new(client),
                text.as_bytes().to_vec(),
            ),
        })
    }

    pub async fn run(&mut self, n: usize) -> io::Result<usize> {
        match self {
            EndToEnd::Tung(server, client, text) => {
                let (sent, received) = tokio::join!(server.push(text, n), client.read(n));
                sent?;
                received
            }
            EndToEnd::Fws(server, client, text) => {
                let (sent, received) = tokio::join!(server.push(text, n), client.read(n));
                sent?;
                received
            }
        }
    }
}

/// Raw client sends masked frames, the server reads them with the library.
pub struct Inbound {
    server: Server,
    client: TcpStream,
    frames: Vec<u8>,
    per_run: usize,
}

impl Inbound {
    /// Prepares a connection that moves `n` messages per run.
    pub async fn new(lib: Lib, text: &str, n: usize) -> io::Result<Inbound> {
        let (server, client) = tcp_pair().await?;
        Ok(Inbound {
            server: Server::new(lib, server).await,
            client,
            frames: masked_frames(text, n),
            per_run: n,
        })
    }

    pub async fn run(&mut self) -> io::Result<usize> {
        let Inbound {
            server,
            client,
            frames,
            per_run: n,
        } = self;
        let n = *n;
        let send = async {
            // In chunks of one batch of frames, as a busy client's socket delivers them.
            let chunk = frames.len() / n * BATCH;
            for part in frames.chunks(chunk.max(1)) {
                client.write_all(part).await?;
            }
            Ok::<(), io::Error>(())
        };
        let receive = async {
            match server {
                Server::Tung(server) => server.read(n).await,
                Server::Fws(server) => server.read(n).await,
            }
        };
        let (sent, received) = tokio::join!(send, receive);
        sent?;
        received
    }
}

/// A current-thread runtime with IO, as each Hearth shard runs.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .expect("a tokio runtime")
}
