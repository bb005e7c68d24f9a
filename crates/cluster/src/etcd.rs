//! A small client of etcd's JSON gateway (etcd 3.4 and later: `POST /v3/...` with JSON bodies,
//! keys and values in base64, 64-bit integers as strings), over the blocking `ureq` client the
//! workspace already has. Only what placement needs: leases, range, put and transactions.
//! *Why not `etcd-client`:* it brings tonic, prost and a protobuf build step for five calls
//! that the gateway answers in plain JSON, and it wants an async runtime of its own.

use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::{json, Value};
use ureq::Agent;

/// The most bytes of one etcd answer read: a range over every claim of a large cluster stays
/// well under it, and a wrong URL answering with something huge is refused.
pub const MAX_ANSWER_BYTES: u64 = 64 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    #[error("etcd at {url}: {source}")]
    Http {
        url: String,
        #[source]
        source: Box<ureq::Error>,
    },
    #[error("etcd at {url} answered something that is not its JSON: {detail}")]
    Answer { url: String, detail: String },
}

pub type Result<T> = std::result::Result<T, EtcdError>;

/// One key of a range answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    pub key: String,
    pub value: Vec<u8>,
    pub create_revision: i64,
    pub mod_revision: i64,
    /// The lease the key is attached to; 0 for none.
    pub lease: i64,
}

/// A condition of a transaction.
#[derive(Debug, Clone)]
pub enum Compare {
    /// The key does not exist (its creation revision is 0).
    Absent(String),
    /// The key was last modified at this revision (0: it does not exist).
    ModRevision(String, i64),
}

/// A put of a transaction's success branch.
#[derive(Debug, Clone)]
pub struct Put {
    pub key: String,
    pub value: Vec<u8>,
    /// The lease to attach the key to; 0 for none.
    pub lease: i64,
}

#[derive(Clone)]
pub struct Etcd {
    base: String,
    agent: Agent,
}

impl Etcd {
    /// A client of the etcd at `url` (`http://127.0.0.1:2379`); every call is bounded by
    /// `timeout`, so that a hung etcd cannot stall the keep-alives beyond it.
    pub fn new(url: &str, timeout: Duration) -> Etcd {
        let agent = Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(true)
            .build()
            .into();
        Etcd {
            base: url.trim_end_matches('/').to_owned(),
            agent,
        }
    }

    pub fn url(&self) -> &str {
        &self.base
    }

    fn call(&self, path: &str, body: &Value) -> Result<Value> {
        let url = format!("{}{path}", self.base);
        let http = |source| EtcdError::Http {
            url: url.clone(),
            source: Box::new(source),
        };
        let started = std::time::Instant::now();
        let mut response = self
            .agent
            .post(&url)
            .header("content-type", "application/json")
            .send(body.to_string())
            .map_err(http)?;
        let text = response
            .body_mut()
            .with_config()
            .limit(MAX_ANSWER_BYTES)
            .read_to_string()
            .map_err(http)?;
        tracing::trace!(%url, elapsed_us = started.elapsed().as_micros() as u64, "etcd answered");
        serde_json::from_str(&text).map_err(|error| EtcdError::Answer {
            url: url.clone(),
            detail: error.to_string(),
        })
    }

    /// Grants a lease of `ttl_secs` and returns its id.
    pub fn grant(&self, ttl_secs: u64) -> Result<i64> {
        let answer = self.call("/v3/lease/grant", &json!({ "TTL": ttl_secs }))?;
        match int(&answer["ID"]) {
            id if id != 0 => Ok(id),
            _ => Err(self.answer_error("a lease grant without an ID")),
        }
    }

    /// Refreshes a lease; returns its TTL in seconds, 0 when the lease no longer exists.
    pub fn keep_alive(&self, lease: i64) -> Result<i64> {
        let answer = self.call("/v3/lease/keepalive", &json!({ "ID": lease.to_string() }))?;
        Ok(int(&answer["result"]["TTL"]))
    }

    /// The seconds left of a lease (-1 when it has expired or never existed).
    pub fn time_to_live(&self, lease: i64) -> Result<i64> {
        let answer = self.call(
            "/v3/kv/lease/timetolive",
            &json!({ "ID": lease.to_string() }),
        )?;
        Ok(int(&answer["TTL"]))
    }

    /// Ends a lease at once, deleting the keys attached to it.
    pub fn revoke(&self, lease: i64) -> Result<()> {
        self.call("/v3/kv/lease/revoke", &json!({ "ID": lease.to_string() }))?;
        Ok(())
    }

    pub fn put(&self, put: &Put) -> Result<()> {
        self.call("/v3/kv/put", &put_body(put))?;
        Ok(())
    }

    /// Every key that starts with `prefix`, in key order.
    pub fn range_prefix(&self, prefix: &str) -> Result<Vec<KeyValue>> {
        let body = json!({ "key": b64(prefix.as_bytes()), "range_end": b64(&prefix_end(prefix)) });
        self.kvs(self.call("/v3/kv/range", &body)?)
    }

    /// The key `key`, if it exists.
    pub fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        let body = json!({ "key": b64(key.as_bytes()) });
        Ok(self
            .kvs(self.call("/v3/kv/range", &body)?)?
            .into_iter()
            .next())
    }

    /// The keys `keys` in one read (a transaction of ranges: at most etcd's `--max-txn-ops`,
    /// 128 by default), each `None` when it does not exist.
    pub fn get_many(&self, keys: &[String]) -> Result<Vec<Option<KeyValue>>> {
        let success: Vec<Value> = keys
            .iter()
            .map(|key| json!({ "request_range": { "key": b64(key.as_bytes()) } }))
            .collect();
        let answer = self.call("/v3/kv/txn", &json!({ "success": success }))?;
        let responses = answer
            .get("responses")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        if responses.len() != keys.len() {
            return Err(self.answer_error("a transaction of ranges answered another count"));
        }
        responses
            .iter()
            .map(|response| {
                let range = response.get("response_range").cloned().unwrap_or_default();
                Ok(self.kvs(range)?.into_iter().next())
            })
            .collect()
    }

    /// Runs the puts if every comparison holds; returns whether they ran.
    pub fn txn(&self, compares: &[Compare], puts: &[Put]) -> Result<bool> {
        let compare: Vec<Value> = compares
            .iter()
            .map(|compare| match compare {
                Compare::Absent(key) => json!({
                    "target": "CREATE", "result": "EQUAL",
                    "key": b64(key.as_bytes()), "create_revision": "0",
                }),
                Compare::ModRevision(key, revision) => json!({
                    "target": "MOD", "result": "EQUAL",
                    "key": b64(key.as_bytes()), "mod_revision": revision.to_string(),
                }),
            })
            .collect();
        let success: Vec<Value> = puts
            .iter()
            .map(|put| json!({ "request_put": put_body(put) }))
            .collect();
        let answer = self.call(
            "/v3/kv/txn",
            &json!({ "compare": compare, "success": success }),
        )?;
        Ok(answer["succeeded"].as_bool().unwrap_or(false))
    }

    /// Watches the keys that start with `prefix`: calls `changed` once per batch of events,
    /// until the stream fails, `changed` returns false, or nothing arrives for `idle` (etcd
    /// sends nothing on a quiet watch; the caller starts a new one).
    pub fn watch_prefix(
        &self,
        prefix: &str,
        idle: Duration,
        mut changed: impl FnMut() -> bool,
    ) -> Result<()> {
        use std::io::BufRead as _;
        let url = format!("{}/v3/watch", self.base);
        let http = |source| EtcdError::Http {
            url: url.clone(),
            source: Box::new(source),
        };
        let agent: Agent = Agent::config_builder()
            .timeout_connect(Some(idle))
            .timeout_per_read(Some(idle))
            .http_status_as_error(true)
            .build()
            .into();
        let body = json!({ "create_request": {
            "key": b64(prefix.as_bytes()), "range_end": b64(&prefix_end(prefix)),
        }});
        let response = agent
            .post(&url)
            .header("content-type", "application/json")
            .send(body.to_string())
            .map_err(http)?;
        // One JSON object per line: the watch's creation, then a batch of events each.
        let reader = std::io::BufReader::new(response.into_body().into_reader());
        for line in reader.lines() {
            let Ok(line) = line else {
                return Ok(());
            };
            let events = serde_json::from_str::<Value>(&line)
                .ok()
                .and_then(|answer| answer["result"]["events"].as_array().map(Vec::len));
            if events.is_some_and(|count| count > 0) && !changed() {
                return Ok(());
            }
        }
        Ok(())
    }

    fn kvs(&self, answer: Value) -> Result<Vec<KeyValue>> {
        let Some(kvs) = answer.get("kvs").and_then(Value::as_array) else {
            return Ok(Vec::new());
        };
        kvs.iter()
            .map(|kv| {
                let key =
                    unb64(&kv["key"]).ok_or_else(|| self.answer_error("a key not in base64"))?;
                Ok(KeyValue {
                    key: String::from_utf8(key)
                        .map_err(|_| self.answer_error("a key that is not UTF-8"))?,
                    value: unb64(&kv["value"]).unwrap_or_default(),
                    create_revision: int(&kv["create_revision"]),
                    mod_revision: int(&kv["mod_revision"]),
                    lease: int(&kv["lease"]),
                })
            })
            .collect()
    }

    fn answer_error(&self, detail: &str) -> EtcdError {
        EtcdError::Answer {
            url: self.base.clone(),
            detail: detail.to_owned(),
        }
    }
}

fn put_body(put: &Put) -> Value {
    let mut body = json!({ "key": b64(put.key.as_bytes()), "value": b64(&put.value) });
    if put.lease != 0 {
        body["lease"] = Value::String(put.lease.to_string());
    }
    body
}

/// A 64-bit integer of the gateway: a string, a number, or absent (the default, 0).
fn int(value: &Value) -> i64 {
    match value {
        Value::String(text) => text.parse().unwrap_or(0),
        Value::Number(number) => number.as_i64().unwrap_or(0),
        _ => 0,
    }
}

fn b64(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

fn unb64(value: &Value) -> Option<Vec<u8>> {
    STANDARD.decode(value.as_str()?).ok()
}

/// The end of the range of keys that start with `prefix`: the prefix with its last byte
/// incremented (etcd's own rule; the prefixes here end in `/`, never in 0xff).
fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // Every byte 0xff: etcd's "to the end of the key space".
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_ends_at_its_last_byte_plus_one() {
        assert_eq!(prefix_end("/hearth/nodes/"), b"/hearth/nodes0".to_vec());
        assert_eq!(prefix_end("a\u{7f}"), b"a\x80".to_vec());
    }

    #[test]
    fn gateway_integers_come_as_strings_or_numbers() {
        assert_eq!(int(&json!("4111120261693704967")), 4111120261693704967);
        assert_eq!(int(&json!(5)), 5);
        assert_eq!(int(&Value::Null), 0);
    }
}
