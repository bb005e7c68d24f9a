//! SIGHUP renews the WebTransport endpoint's certificate (docs/tls.md, docs/volatile.md): a
//! real `hearth serve` with a `--tls-cert` pair, a session opened, the files replaced by
//! another pair and SIGHUP sent. Sessions are opened by a `wtransport` client that pins one
//! certificate by its SHA-256 (as browsers pin with `serverCertificateHashes`), so a session
//! that opens proves which certificate the server presented. The pairs are self-signed ECDSA
//! P-256 certificates valid for 13 days, made by the test, which such pinning requires. The
//! waits are on the server's log lines (the reload done), never pauses.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{free_port, hearth, temp_dir};
use wtransport::tls::Sha256Digest;
use wtransport::{ClientConfig, Connection, Endpoint, Identity, RecvStream, SendStream};

/// How long the server may take to log what a test waits for, and a session to open.
const WAIT: Duration = Duration::from_secs(10);

/// The server, killed and reaped when dropped, and its log lines as they come.
struct Serving {
    child: Child,
    log: mpsc::Receiver<String>,
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serving {
    /// The first log line from now on that contains `needle`.
    fn wait_for(&self, needle: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.log.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(_) => panic!("the server did not log {needle:?} within {WAIT:?}"),
            }
        }
    }

    fn hangup(&self) {
        let status = Command::new("kill")
            .args(["-HUP", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -HUP");
    }
}

fn identity() -> Identity {
    Identity::self_signed_builder()
        .subject_alt_names(["localhost", "127.0.0.1"])
        .from_now_utc()
        .validity_days(13)
        .build()
        .expect("a self-signed certificate")
}

fn hash(identity: &Identity) -> [u8; 32] {
    *identity.certificate_chain().as_slice()[0].hash().as_ref()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Puts `cert`'s certificate and `key`'s key in place, each renamed over the previous file,
/// as docs/tls.md tells operators to.
fn install(dir: &Path, cert: &Identity, key: &Identity) -> (PathBuf, PathBuf) {
    let (cert_file, key_file) = (dir.join("cert.pem"), dir.join("key.pem"));
    let certificate = cert.certificate_chain().as_slice()[0].to_pem();
    for (file, text) in [
        (&cert_file, certificate),
        (&key_file, key.private_key().to_secret_pem()),
    ] {
        let fresh = file.with_extension("new");
        std::fs::write(&fresh, text).expect("a PEM file written");
        std::fs::rename(&fresh, file).expect("renamed into place");
    }
    (cert_file, key_file)
}

/// `hearth serve` with a WebTransport endpoint, and the certificate pair `tls` if given.
fn serve(dir: &Path, tls: Option<(&Path, &Path)>) -> Serving {
    let mut command = hearth();
    command
        .args(["serve", "--dev", "--durability", "none", "--listen"])
        .arg(format!("127.0.0.1:{}", free_port()))
        .arg("--data-dir")
        .arg(dir.join("data"))
        .args(["--webtransport-listen", "127.0.0.1:0"]);
    if let Some((cert, key)) = tls {
        command
            .arg("--tls-cert")
            .arg(cert)
            .arg("--tls-key")
            .arg(key);
    }
    let mut child = command
        .stderr(Stdio::piped())
        .spawn()
        .expect("the server starts");
    let stderr = child.stderr.take().expect("the server's log");
    let (lines, log) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    Serving { child, log }
}

/// An open session and its stream, past the handshake.
struct Session {
    connection: Connection,
    send: SendStream,
    recv: RecvStream,
    _endpoint: Endpoint<wtransport::endpoint::endpoint_side::Client>,
}

/// Opens a session to `address` that accepts only the certificate whose SHA-256 is `pinned`.
async fn open(address: &str, pinned: [u8; 32]) -> anyhow::Result<Session> {
    let config = ClientConfig::builder()
        .with_bind_default()
        .with_server_certificate_hashes([Sha256Digest::new(pinned)])
        .build();
    let endpoint = Endpoint::client(config)?;
    let url = format!("https://{address}/.wt?ns=reload");
    tokio::time::timeout(WAIT, async {
        let connection = endpoint.connect(url).await?;
        let (send, mut recv) = connection.open_bi().await?.await?;
        let line = read_line(&mut recv).await?;
        anyhow::ensure!(line.contains(r#""t":"h""#), "not a handshake: {line}");
        Ok(Session {
            connection,
            send,
            recv,
            _endpoint: endpoint,
        })
    })
    .await?
}

/// The next line of the server's stream (byte by byte: the lines are short and few).
async fn read_line(recv: &mut RecvStream) -> anyhow::Result<String> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        match recv.read(&mut byte).await? {
            None => anyhow::bail!("the stream ended"),
            Some(0) => {}
            Some(_) if byte[0] == b'\n' => return Ok(String::from_utf8(line)?),
            Some(_) => line.push(byte[0]),
        }
    }
}

impl Session {
    /// A write on the session's stream is acknowledged.
    async fn writes(&mut self, request: u32) {
        let text = format!(
            "{{\"t\":\"d\",\"d\":{{\"r\":{request},\"a\":\"p\",\"b\":{{\"p\":\"/a\",\"d\":{request}}}}}}}\n"
        );
        self.send.write_all(text.as_bytes()).await.expect("sent");
        let answer = format!("\"r\":{request},");
        let reply = tokio::time::timeout(WAIT, async {
            loop {
                let line = read_line(&mut self.recv).await.expect("a line");
                if line.contains(&answer) {
                    return line;
                }
            }
        })
        .await
        .expect("a reply in time");
        assert!(reply.contains(r#""s":"ok""#), "{reply}");
    }

    fn presented(&self) -> [u8; 32] {
        let chain = self
            .connection
            .peer_identity()
            .expect("the server's certificate");
        *chain.as_slice()[0].hash().as_ref()
    }
}

#[test]
fn sighup_gives_new_sessions_the_new_certificate_and_open_ones_keep_theirs() {
    let dir = temp_dir("webtransport-reload");
    let (first, second) = (identity(), identity());
    let (cert, key) = install(&dir, &first, &first);
    let server = serve(&dir, Some((&cert, &key)));
    let listening = server.wait_for("WebTransport listening on ");
    assert!(listening.contains(&hex(&hash(&first))), "{listening}");
    let address = listening
        .split("WebTransport listening on ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the endpoint's address")
        .to_owned();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let mut before = open(&address, hash(&first)).await.expect("a session");
        assert_eq!(before.presented(), hash(&first));
        before.writes(1).await;

        // A new pair, then SIGHUP: new sessions get it.
        install(&dir, &second, &second);
        server.hangup();
        let reloaded = server.wait_for("WebTransport certificate reloaded");
        assert!(reloaded.contains(&hex(&hash(&second))), "{reloaded}");
        let after = open(&address, hash(&second)).await.expect("a new session");
        assert_eq!(after.presented(), hash(&second));
        assert!(
            open(&address, hash(&first)).await.is_err(),
            "a new session still got the old certificate"
        );
        // The session opened before is still served.
        before.writes(2).await;

        // A certificate with another's key: logged, and the certificate in force stays.
        install(&dir, &first, &second);
        server.hangup();
        server.wait_for("TLS certificate not reloaded");
        let unchanged = open(&address, hash(&second)).await.expect("a new session");
        assert_eq!(unchanged.presented(), hash(&second));
        before.writes(3).await;
    });
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sighup_makes_a_new_self_signed_certificate() {
    let dir = temp_dir("webtransport-self-signed");
    let server = serve(&dir, None);
    let sha = |line: &str| {
        line.split("certificate sha-256 ")
            .nth(1)
            .map(|rest| rest.chars().take(64).collect::<String>())
            .expect("a hash in the line")
    };
    let first = sha(&server.wait_for("WebTransport listening on "));
    server.hangup();
    let second = sha(&server.wait_for("WebTransport certificate reloaded"));
    assert_eq!(second.len(), 64);
    assert_ne!(first, second);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
