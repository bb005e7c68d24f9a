//! The HTTP client of every online tool (the `data`, `rules` and `databases` commands, export
//! and import against a running server): one `ureq` agent, with rustls for `https`, answers
//! read by their framing (`Content-Length` or chunked), and a timeout on every request.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ureq::http::{Request, Response};
use ureq::tls::TlsConfig;
use ureq::{Agent, Body};

use crate::error::{Result, ToolsError};
use crate::tls::{certificate_hint, read_ca_certs};

/// The server the online commands talk to when neither `--url` nor `HEARTH_URL` says.
pub const DEFAULT_URL: &str = "http://localhost:9000";

/// The default of `--timeout-secs`: how long the server may take to answer, or to send the
/// next bytes of an answer (a large export may take longer in all; it must not stall).
pub const DEFAULT_TIMEOUT_SECS: u64 = 30;

/// How long a watch waits for the next bytes of its event stream before it counts the stream
/// as dead and reconnects: three of the server's default keep-alive periods.
pub const WATCH_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// The longest time to establish a connection (TCP and TLS).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The most bytes of an answer read into memory whole (a shallow read, a rules document,
/// the list of databases, a push's name). Larger data is streamed, never held.
pub const MAX_ANSWER_BYTES: u64 = 256 * 1024 * 1024;

/// The most bytes of an error answer read for its message.
const MAX_ERROR_BYTES: u64 = 64 * 1024;

/// How to reach a running server as a whole (`databases`, `backup`): no database.
#[derive(clap::Args, Debug, Clone)]
pub struct ServerArgs {
    /// The server, as `http://HOST:PORT` or `https://HOST:PORT` (a path prefix is kept, for
    /// a server behind a proxy).
    #[arg(long, env = "HEARTH_URL", default_value = DEFAULT_URL)]
    pub url: String,
    #[command(flatten)]
    pub connection: Connection,
}

/// One database of a running server (`data`, `rules get|set`).
#[derive(clap::Args, Debug, Clone)]
pub struct DatabaseArgs {
    /// The server, as `http://HOST:PORT` or `https://HOST:PORT` (a path prefix is kept, for
    /// a server behind a proxy). A `?ns=NAME` in it chooses the database.
    #[arg(long, env = "HEARTH_URL", default_value = DEFAULT_URL)]
    pub url: String,
    /// The database (namespace); wins over `?ns=` in --url. One of the two is required.
    #[arg(long, alias = "db", env = "HEARTH_NS")]
    pub ns: Option<String>,
    #[command(flatten)]
    pub connection: Connection,
}

/// The credential and transport options every online command shares.
#[derive(clap::Args, Debug, Clone)]
pub struct Connection {
    /// Sent as `Authorization: Bearer`: the server's --admin-token (`owner` for a --dev
    /// server), or a user's ID token. Without it, requests are anonymous and the database's
    /// rules decide.
    #[arg(long, env = "HEARTH_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// A PEM file of CA certificates to trust for `https` instead of the built-in roots (as
    /// curl's --cacert), for a server with a self-signed or private certificate.
    #[arg(long, env = "HEARTH_CA_CERT")]
    pub ca_cert: Option<PathBuf>,
    /// Seconds the server may take to answer, or to send the next part of an answer.
    #[arg(long, env = "HEARTH_TIMEOUT_SECS", default_value_t = DEFAULT_TIMEOUT_SECS)]
    pub timeout_secs: u64,
}

/// A running server, with the database and the credential of every request.
pub struct Client {
    agent: Agent,
    /// For event streams: a quiet stream may wait for [`WATCH_IDLE_TIMEOUT`].
    stream_agent: Agent,
    /// `scheme://host:port` and any path prefix, without a trailing slash.
    base: String,
    /// The URL as the user gave it, for messages.
    shown: String,
    ns: Option<String>,
    token: Option<String>,
}

/// One request: a method, a URL path (see [`data_path`]), query parameters (the database is
/// added by the client) and a JSON body.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub query: &'a [(&'a str, &'a str)],
    pub body: Option<&'a [u8]>,
}

impl<'a> Call<'a> {
    pub fn new(method: &'a str, path: &'a str) -> Call<'a> {
        Call {
            method,
            path,
            query: &[],
            body: None,
        }
    }

    pub fn query(self, query: &'a [(&'a str, &'a str)]) -> Call<'a> {
        Call { query, ..self }
    }

    pub fn body(self, body: &'a [u8]) -> Call<'a> {
        Call {
            body: Some(body),
            ..self
        }
    }

    /// The request as error messages name it: `GET /a.json`.
    fn describe(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

impl Client {
    /// A client of the whole server: its requests name no database.
    pub fn new(args: &ServerArgs) -> Result<Client> {
        Client::connect(&args.url, None, &args.connection)
    }

    /// A client of one database: `--ns`, else `?ns=` in the URL. Without either the request
    /// would reach whatever database the server picks, so it is refused here instead.
    pub fn for_database(args: &DatabaseArgs) -> Result<Client> {
        let client = Client::connect(&args.url, args.ns.as_deref(), &args.connection)?;
        if client.ns.is_none() {
            return Err(ToolsError::NoDatabase);
        }
        Ok(client)
    }

    /// A client of `url`; `ns` wins over a `?ns=` in the URL.
    pub fn connect(url: &str, ns: Option<&str>, connection: &Connection) -> Result<Client> {
        Client::with_timeout(
            url,
            ns,
            connection.admin_token.as_deref(),
            connection.ca_cert.as_deref(),
            Duration::from_secs(connection.timeout_secs.max(1)),
        )
    }

    /// A client of `url`; `read_timeout` bounds the wait for an answer and for each read of
    /// it.
    fn with_timeout(
        url: &str,
        ns: Option<&str>,
        token: Option<&str>,
        ca_cert: Option<&Path>,
        read_timeout: Duration,
    ) -> Result<Client> {
        let (base, url_ns) = split_url(url)?;
        let mut tls = TlsConfig::builder();
        if let Some(path) = ca_cert {
            tls = tls.root_certs(read_ca_certs(path)?);
        }
        let tls = tls.build();
        let agent = |per_read: Duration| -> Agent {
            Agent::config_builder()
                .http_status_as_error(false)
                .user_agent(concat!("hearth/", env!("CARGO_PKG_VERSION")))
                .tls_config(tls.clone())
                .timeout_connect(Some(CONNECT_TIMEOUT))
                .timeout_recv_response(Some(read_timeout))
                .timeout_per_read(Some(per_read))
                .timeout_per_write(Some(read_timeout))
                .build()
                .into()
        };
        Ok(Client {
            agent: agent(read_timeout),
            stream_agent: agent(WATCH_IDLE_TIMEOUT.max(read_timeout)),
            base,
            shown: url.to_owned(),
            ns: ns.map(str::to_owned).or(url_ns),
            token: token.filter(|token| !token.is_empty()).map(str::to_owned),
        })
    }

    /// The database requests name, if any.
    pub fn namespace(&self) -> Option<&str> {
        self.ns.as_deref()
    }

    /// The full URL of `path` with the database and `query` (values are encoded here).
    fn url(&self, path: &str, query: &[(&str, &str)]) -> String {
        let mut url = format!("{}{path}", self.base);
        let ns = self.ns.as_deref().map(|ns| ("ns", ns));
        for (index, (name, value)) in ns.into_iter().chain(query.iter().copied()).enumerate() {
            url.push(if index == 0 { '?' } else { '&' });
            url.push_str(name);
            url.push('=');
            url.push_str(&encode_component(value));
        }
        url
    }

    /// Sends a request and returns the answer when its status is a success; an error status
    /// becomes [`ToolsError::Refused`] with the server's message.
    pub fn send(&self, call: Call) -> Result<Response<Body>> {
        self.run(&self.agent, call, None)
    }

    /// Opens the event stream of the data at `path` (a URL path from [`data_path`]).
    pub fn event_stream(&self, path: &str) -> Result<Response<Body>> {
        self.event_stream_with(path, &[])
    }

    /// [`Client::event_stream`] with query parameters.
    pub fn event_stream_with(&self, path: &str, query: &[(&str, &str)]) -> Result<Response<Body>> {
        let accept = Some("text/event-stream");
        self.run(
            &self.stream_agent,
            Call::new("GET", path).query(query),
            accept,
        )
    }

    /// Sends a request and reads the whole answer (at most [`MAX_ANSWER_BYTES`]).
    pub fn text(&self, call: Call) -> Result<String> {
        let mut response = self.send(call)?;
        response
            .body_mut()
            .with_config()
            .limit(MAX_ANSWER_BYTES)
            .read_to_string()
            .map_err(|error| ToolsError::BadAnswer {
                request: call.describe(),
                reason: error.to_string(),
            })
    }

    /// Sends a request and parses its answer as JSON.
    pub fn json(&self, call: Call) -> Result<serde_json::Value> {
        let text = self.text(call)?;
        serde_json::from_str(&text).map_err(ToolsError::json(format!(
            "the answer to {}",
            call.describe()
        )))
    }

    fn run(&self, agent: &Agent, call: Call, accept: Option<&str>) -> Result<Response<Body>> {
        let request_name = call.describe();
        let mut builder = Request::builder()
            .method(call.method)
            .uri(self.url(call.path, call.query));
        if let Some(token) = &self.token {
            builder = builder.header("authorization", format!("Bearer {token}"));
        }
        if let Some(accept) = accept {
            builder = builder.header("accept", accept);
        }
        let bad = |error: ureq::http::Error| ToolsError::BadAnswer {
            request: request_name.clone(),
            reason: error.to_string(),
        };
        let result = match call.body {
            Some(body) => {
                let request = builder
                    .header("content-type", "application/json; charset=utf-8")
                    .body(body)
                    .map_err(bad)?;
                agent.run(request)
            }
            None => agent.run(builder.body(()).map_err(bad)?),
        };
        let mut response = result.map_err(|error| self.transport_error(&request_name, error))?;
        let status = response.status().as_u16();
        if response.status().is_success() {
            return Ok(response);
        }
        let text = response
            .body_mut()
            .with_config()
            .limit(MAX_ERROR_BYTES)
            .read_to_string()
            .unwrap_or_default();
        let mut message = error_message(&text, response.status().canonical_reason());
        if status == 401 && self.token.is_none() {
            message.push_str(NO_TOKEN_HINT);
        }
        Err(ToolsError::Refused {
            request: request_name,
            status,
            message,
        })
    }

    /// What a failure without an HTTP answer means to the user.
    pub fn transport_error(&self, request: &str, error: ureq::Error) -> ToolsError {
        let unreachable = |reason: String| ToolsError::Unreachable {
            url: self.shown.clone(),
            reason,
        };
        // A refused certificate means a server did answer: asking whether one runs would
        // send the user the wrong way.
        if let Some(hint) = certificate_hint(&error) {
            return unreachable(format!("{error}; {hint}"));
        }
        let running = format!("(is the server running at {}?)", self.shown);
        match error {
            ureq::Error::Io(error) if error.kind() == std::io::ErrorKind::ConnectionRefused => {
                unreachable(format!("connection refused {running}"))
            }
            ureq::Error::Io(_)
            | ureq::Error::HostNotFound
            | ureq::Error::ConnectionFailed
            | ureq::Error::Timeout(_)
            | ureq::Error::Tls(_)
            | ureq::Error::Rustls(_) => unreachable(format!("{error} {running}")),
            other => ToolsError::BadAnswer {
                request: request.to_owned(),
                reason: other.to_string(),
            },
        }
    }
}

/// Added to a 401 answered to a request without a credential: no command sends one by
/// default (a guessed token would turn a rules-allowed anonymous read into a refusal), so
/// the refusal says where the token goes and what a --dev server's is.
pub const NO_TOKEN_HINT: &str =
    " (no admin token was given: add --admin-token TOKEN or set HEARTH_ADMIN_TOKEN; a --dev \
     server's is `owner`)";

/// The server's `{"error": "..."}` message, else the text of the answer, else the status's
/// name.
fn error_message(text: &str, reason: Option<&str>) -> String {
    let parsed = serde_json::from_str::<serde_json::Value>(text).ok();
    if let Some(message) = parsed
        .as_ref()
        .and_then(|value| value.get("error"))
        .and_then(serde_json::Value::as_str)
    {
        return message.to_owned();
    }
    let text = text.trim();
    if text.is_empty() {
        reason.unwrap_or("no message").to_owned()
    } else {
        text.to_owned()
    }
}

/// Splits a server URL into its base (scheme, host, port and path prefix, no trailing slash)
/// and the `ns` of its query. A URL without a scheme is `http`.
fn split_url(url: &str) -> Result<(String, Option<String>)> {
    let url = url.trim();
    let with_scheme = if url.contains("://") {
        url.to_owned()
    } else {
        format!("http://{url}")
    };
    let (scheme, rest) = with_scheme
        .split_once("://")
        .ok_or_else(|| ToolsError::Usage(format!("invalid server URL {url:?}")))?;
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err(ToolsError::Usage(format!(
            "the server URL {url:?} must start with http:// or https://"
        )));
    }
    let (location, query) = rest.split_once('?').unwrap_or((rest, ""));
    let location = location.split('#').next().unwrap_or_default();
    let host = location.split('/').next().unwrap_or_default();
    if host.is_empty() || host.starts_with(':') {
        return Err(ToolsError::Usage(format!(
            "the server URL {url:?} names no host"
        )));
    }
    let ns = query
        .split('&')
        .filter_map(|pair| pair.strip_prefix("ns="))
        .find(|ns| !ns.is_empty())
        .map(str::to_owned);
    let base = format!(
        "{}://{}",
        scheme.to_ascii_lowercase(),
        location.trim_end_matches('/')
    );
    Ok((base, ns))
}

/// The URL path of the data at `path` (`/users/ada` or `users/ada`; `/` is the root):
/// each key percent-encoded, then `.json`.
pub fn data_path(path: &str) -> String {
    let mut url = String::new();
    for key in path.split('/').filter(|key| !key.is_empty()) {
        url.push('/');
        url.push_str(&encode_component(key));
    }
    if url.is_empty() {
        url.push('/');
    }
    url.push_str(".json");
    url
}

/// Percent-encodes a key or a query value.
pub fn encode_component(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) {
            encoded.push(byte as char);
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_base_and_namespace() -> Result<()> {
        assert_eq!(
            split_url("http://127.0.0.1:9000")?,
            ("http://127.0.0.1:9000".into(), None)
        );
        assert_eq!(
            split_url("localhost:9000/")?,
            ("http://localhost:9000".into(), None)
        );
        assert_eq!(
            split_url("HTTPS://db.example.com/hearth/?ns=shop&x=1")?,
            ("https://db.example.com/hearth".into(), Some("shop".into()))
        );
        assert!(split_url("ftp://x:1").is_err());
        assert!(split_url("http://").is_err());
        assert!(split_url("http://:9000").is_err());
        Ok(())
    }

    #[test]
    fn data_paths_and_queries_are_encoded() -> Result<()> {
        assert_eq!(data_path("/"), "/.json");
        assert_eq!(data_path(""), "/.json");
        assert_eq!(data_path("users/ada"), "/users/ada.json");
        assert_eq!(data_path("/a b/é/"), "/a%20b/%C3%A9.json");
        assert_eq!(data_path("/a/.priority"), "/a/.priority.json");
        let client = Client::with_timeout(
            "http://h:1/?ns=url",
            Some("flag"),
            None,
            None,
            Duration::from_secs(1),
        )?;
        assert_eq!(
            client.url("/.json", &[("orderBy", "\"$key\"")]),
            "http://h:1/.json?ns=flag&orderBy=%22%24key%22"
        );
        let client = Client::with_timeout("http://h:1/?ns=url", None, None, None, Duration::ZERO)?;
        assert_eq!(client.url("/.json", &[]), "http://h:1/.json?ns=url");
        Ok(())
    }

    #[test]
    fn error_messages_come_from_the_answer() {
        assert_eq!(
            error_message(
                "{\n  \"error\" : \"Permission denied\"\n}\n",
                Some("Unauthorized")
            ),
            "Permission denied"
        );
        assert_eq!(error_message("plain text\n", None), "plain text");
        assert_eq!(error_message("", Some("Bad Gateway")), "Bad Gateway");
    }
}
