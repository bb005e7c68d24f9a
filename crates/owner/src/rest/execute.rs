//! Running a [`RestCall`] on the shard that owns its database. Reads and writes go through the
//! same engine calls as WebSocket requests, with the request's identity (`Database::read_as`,
//! `prepare_put`, `prepare_merge`): the database's rules decide, and a write's pushes reach
//! WebSocket listeners and event streams alike. Whatever depends on the stored data (an ETag
//! comparison, the size that `writeSizeLimit` counts, the value an answer shows) is decided
//! only after the access checks, so that a refused request learns nothing of hidden data.

use hearth_sync::{
    AuthState, Change, Condition, Database, Effect, Effects, PreparedSet, Status, WriteTarget,
};
use hearth_tree::{Key, Node, Path};
use hearth_wire::{write_rest_json, write_rest_object, write_value, JsonStyle, Member};
use serde_json::Value;

use super::answer::{etag_of, reply_error, NULL_ETAG};
use super::read::read;
use super::settings::{coverage, get_rules, put_rules};
use crate::audit::Origin;
use crate::caller_limits::Identity;
use crate::effects::route_effects_from;
use crate::profile::Operation;
use crate::quotas::{Quota, WriteSize};
use crate::state::Owner;
use hearth_ground::rest::{
    CallOp, DataMethod, DataRequest, RestCall, RestResponse, WriteSizeLimit, INVALID_JSON,
};
use hearth_net::time::now_ms;

/// The node hash that an `If-Match` ETag stands for: an empty location's hash is the empty
/// string, its ETag [`NULL_ETAG`]. An empty ETag stands for no hash at all, so it is mapped to
/// a text that no hash can be (hashes are 28 base64 characters).
fn hash_of_etag(etag: &str) -> &str {
    match etag {
        NULL_ETAG => "",
        "" => NULL_ETAG,
        other => other,
    }
}

/// A write's answer larger than this is serialized on tokio's blocking pool, after the
/// shard's part of the call is done, so that the other databases of the shard are served
/// meanwhile (the answer to a PUT repeats the value written).
pub const OFF_THREAD_ANSWER_BYTES: usize = 256 * 1024;

/// The body of an answer, to be serialized later and off the shard's thread: a node, shared
/// with the tree in O(1), in REST form.
pub struct LateBody {
    node: Node,
    style: JsonStyle,
}

impl LateBody {
    fn render(&self) -> Vec<u8> {
        let mut body = Vec::new();
        write_rest_json(&self.node, self.style, &mut body);
        body
    }
}

/// Runs a call and returns its answer.
#[cfg(test)]
pub fn execute(owner: &Owner, call: RestCall) -> RestResponse {
    let (mut response, late) = execute_split(owner, call);
    if let Some(late) = late {
        response.body = late.render().into();
    }
    response
}

/// Runs a call and returns its answer, whose body may be left to serialize (see
/// [`OFF_THREAD_ANSWER_BYTES`]).
/// Who a change of the rules or the settings is recorded as made by (the ruleset history's
/// `who`): an admin over REST, and from where when the address is known.
fn author(address: Option<std::net::IpAddr>) -> String {
    use crate::rest::settings_api::BY_REST;
    match address {
        Some(address) => format!("{BY_REST}, from {address}"),
        None => BY_REST.to_owned(),
    }
}

fn execute_split(owner: &Owner, call: RestCall) -> (RestResponse, Option<LateBody>) {
    let response = match call.op {
        CallOp::RulesGet { strict } => get_rules(owner, &call.namespace, strict),
        CallOp::RulesPut { text } => put_rules(owner, &call.namespace, text, &author(call.address)),
        CallOp::Coverage { html } => coverage(owner, &call.namespace, html),
        CallOp::TriggersGet => crate::triggers::list(owner),
        CallOp::TriggerRegister { body } => {
            crate::triggers::register(owner, &call.namespace, &body)
        }
        CallOp::Settings { endpoint, body } => {
            let who = author(call.address);
            crate::rest::settings_api::answer(owner, &call.namespace, &endpoint, &body, &who)
        }
        CallOp::Data {
            request,
            body,
            body_bytes,
            prepared,
        } => {
            if let Some(refusal) = crate::app_check::refuses_request(
                owner,
                &call.namespace,
                &call.auth,
                request.app_check.as_deref(),
            ) {
                return (refusal, None);
            }
            let profiled = owner
                .with_loaded(&call.namespace, |database| database.profilers().is_active())
                .unwrap_or(false)
                .then(|| Operation::of_rest(rest_operation(request.method), &request.target.path));
            let (response, late) = if request.method == DataMethod::Get {
                let response = read(owner, &call.namespace, &call.auth, &request, call.started);
                (response, None)
            } else {
                let write = Write {
                    namespace: &call.namespace,
                    auth: &call.auth,
                    request: &request,
                    body,
                    prepared,
                    body_bytes,
                    limit: request.write_limit,
                };
                write.run(owner)
            };
            if let Some(operation) = profiled {
                let bytes = match request.method {
                    DataMethod::Get => response.body.len(),
                    _ => body_bytes,
                };
                let status = match response.status {
                    401 | 403 => Status::PermissionDenied,
                    _ => Status::Ok,
                };
                owner.with_loaded(&call.namespace, |database| {
                    operation.done(database, status, Some(bytes));
                });
            }
            return (response, late);
        }
    };
    (response, None)
}

/// The profiler's name for a REST request (the names firebase-tools' report knows).
fn rest_operation(method: DataMethod) -> &'static str {
    match method {
        DataMethod::Get => "rest-read",
        DataMethod::Patch => "rest-update",
        _ => "rest-write",
    }
}

/// Runs a call and answers once everything the answer may show is durable: the call's own
/// write, and any earlier write of the database still being synced.
pub async fn execute_durable(owner: &Owner, call: RestCall) -> RestResponse {
    let namespace = call.namespace.clone();
    if let Some(placement) = &owner.config().cluster {
        // A cluster's new database placed here: the first write waits for this node's
        // claim instead of being refused.
        let writes = match &call.op {
            CallOp::Data { request, .. } => request.method != DataMethod::Get,
            CallOp::RulesPut { .. } => true,
            CallOp::Settings { endpoint, .. } => endpoint.writes(),
            CallOp::RulesGet { .. }
            | CallOp::Coverage { .. }
            | CallOp::TriggersGet
            | CallOp::TriggerRegister { .. } => false,
        };
        // A read this node may not answer from its copy (another node may hold newer data).
        if !writes {
            if let Some(reason) = placement.read_refusal(&namespace) {
                return RestResponse::error(503, reason);
            }
        }
        if writes && placement.claim_pending(&namespace) {
            placement
                .claim_settled(&namespace, crate::cluster::fence::CLAIM_WAIT_LIMIT)
                .await;
        }
    }
    let (mut response, late) = execute_split(owner, call);
    let seq = owner.required_seq(&namespace);
    if !owner.gate().passes(seq) {
        if let Some(store) = owner.store() {
            if let Err(reason) = store.wait_durable(seq).await {
                return RestResponse::error(
                    503,
                    format!("the write could not be made durable: {reason}"),
                );
            }
            // On this node's disk; with `--replication sync`, on the follower's too.
            owner.gate().reached(seq).await;
            if owner.gate().was_abandoned(seq) {
                return RestResponse::error(
                    503,
                    "unavailable: this node lost its claim on the database before the write \
                     reached a copy that may take over; it may or may not have been applied",
                );
            }
        }
    }
    if let Some(late) = late {
        match tokio::task::spawn_blocking(move || late.render()).await {
            Ok(body) => response.body = body.into(),
            Err(_) => return RestResponse::error(500, "the answer could not be serialized"),
        }
    }
    response
}

/// One REST write.
struct Write<'a> {
    namespace: &'a str,
    auth: &'a AuthState,
    request: &'a DataRequest,
    body: Option<Value>,
    prepared: Option<PreparedSet>,
    body_bytes: usize,
    /// The `writeSizeLimit` of the request, or its database's `defaultWriteSizeLimit` when
    /// it names none (docs/settings.md).
    limit: WriteSizeLimit,
}

/// What a REST write sets, as the request gave it.
enum Sent {
    /// A PUT's value (null for a DELETE).
    Put(Value),
    /// A large PUT's value, converted off the shard's thread.
    Prepared(PreparedSet),
    /// A POST's value, the new location and its push id.
    Post {
        value: Value,
        target: WriteTarget,
        name: String,
    },
    /// A PATCH's entries, and the names the body gave them.
    Patch {
        names: Vec<String>,
        entries: Vec<(WriteTarget, Value)>,
    },
}

impl Write<'_> {
    fn run(mut self, owner: &Owner) -> (RestResponse, Option<LateBody>) {
        let namespace = self.namespace;
        let mut effects = Effects::new();
        let mut late = None;
        // The emulator suite's import writes without triggers (an admin's choice only).
        let quiet = self.request.disable_triggers && *self.auth == AuthState::Admin;
        let origin = Origin::rest(self.request.address);
        let response = owner.with_database(namespace, |database| {
            if self.limit == WriteSizeLimit::Default {
                self.limit = database.settings().write_size_limit();
            }
            // The caller's own limits first: past them it uses nothing of the quotas.
            if database.has_caller_limits() {
                let caller = Identity::of(self.auth, self.request.address);
                let path = &self.request.target.path;
                let bytes = self.body_bytes as u64;
                if let Err(refusal) = database.admit_caller_write(&caller, path, bytes, now_ms()) {
                    return RestResponse::error(429, refusal.message);
                }
            }
            if database.limits_writes() && *self.auth != AuthState::Admin {
                let size = WriteSize {
                    bytes: self.body_bytes as u64,
                    deletes_only: self.request.method == DataMethod::Delete
                        || (self.request.method == DataMethod::Put
                            && self.body.as_ref().is_some_and(Value::is_null)),
                };
                if let Err(refusal) = database.admit_write(size, now_ms()) {
                    let status = match refusal.quota {
                        Quota::StoredBytes => 507,
                        _ => 429,
                    };
                    return RestResponse::error(status, refusal.message);
                }
            }
            if quiet {
                database.without_trigger_validation(|database| {
                    self.apply(owner, database, &mut effects, &mut late)
                })
            } else {
                self.apply(owner, database, &mut effects, &mut late)
            }
        });
        if quiet {
            effects.retain(|effect| !matches!(effect, Effect::Triggered { .. }));
        }
        route_effects_from(owner, namespace, effects, origin);
        (response, late)
    }

    /// Checks and commits the write; the answer's body may be left in `late`.
    fn apply(
        mut self,
        owner: &Owner,
        database: &mut Database,
        effects: &mut Effects,
        late: &mut Option<LateBody>,
    ) -> RestResponse {
        let now = now_ms();
        let request = self.request;
        let body = self.body.take();
        let prepared = self.prepared.take();
        let path = &request.target.path;
        // An ETag is the location's hash: asking for one (on its own or with If-Match) is a
        // read of the location, refused like one before anything else is decided.
        if request.want_etag {
            if let Err(reply) = database.check_read_as(self.auth, path, now) {
                return reply_error(reply);
            }
        }
        let condition = request.if_match.as_deref().map(|etag| Condition {
            path,
            hash: hash_of_etag(etag),
        });
        // The engine checks access (and, with If-Match, the right to read) before the hash and
        // before this function looks at the current data, so that a refused caller gets 401
        // whatever the data holds.
        let sent = match self.sent(owner, body, prepared, now) {
            Ok(sent) => sent,
            Err(response) => return response,
        };
        let checked = match &sent {
            Sent::Put(value) => {
                database.prepare_put(self.auth, &request.target, value, condition, now)
            }
            Sent::Prepared(prepared) => {
                // O(1): the change holds a node, shared.
                let prepared = prepared.clone();
                database.prepare_put_prepared(self.auth, &request.target, prepared, condition, now)
            }
            Sent::Post { value, target, .. } => {
                database.prepare_put(self.auth, target, value, condition, now)
            }
            Sent::Patch { entries, .. } => {
                database.prepare_merge(self.auth, path, entries, condition, now)
            }
        };
        let checked = match checked {
            Ok(checked) => checked,
            Err(reply) if reply.status == Status::DataStale => {
                // The engine let the caller read the location before it compared the hash.
                let current = database.root().get(path);
                let mut body = Vec::new();
                write_rest_json(&current, request.style, &mut body);
                return RestResponse::json(412, body).with_header("etag", etag_of(&current));
            }
            Err(reply) => return reply_error(reply),
        };
        if let Err(response) = self.check_cost(self.replaced_bytes(&sent, checked.current())) {
            return response;
        }
        checked.commit(effects);
        let root = database.root();
        let mut response = if request.silent {
            RestResponse::empty(204)
        } else if let Some(body) = self.late_answer(&sent, database, now) {
            *late = Some(body);
            RestResponse::json(200, Vec::new())
        } else {
            RestResponse::json(200, self.answer(&sent, database, now))
        };
        if request.want_etag || request.if_match.is_some() {
            response = response.with_header("etag", etag_of(&root.get(path)));
        }
        response
    }

    /// What the write sets, from the request's method and body (a POST's new push id made
    /// now); the answer to a body that cannot be written.
    fn sent(
        &self,
        owner: &Owner,
        body: Option<Value>,
        prepared: Option<PreparedSet>,
        now: u64,
    ) -> Result<Sent, RestResponse> {
        let request = self.request;
        Ok(match request.method {
            DataMethod::Put | DataMethod::Delete => match (request.method, body, prepared) {
                (DataMethod::Delete, ..) => Sent::Put(Value::Null),
                (_, _, Some(prepared)) => Sent::Prepared(prepared),
                (_, Some(value), None) => Sent::Put(value),
                (_, None, None) => return Err(RestResponse::error(400, INVALID_JSON)),
            },
            DataMethod::Post => {
                let Some(value) = body else {
                    return Err(RestResponse::error(400, INVALID_JSON));
                };
                let name = owner.next_push_id(now);
                let Ok(key) = Key::new(&name) else {
                    return Err(RestResponse::error(500, "could not make a push id"));
                };
                let target = WriteTarget::whole(request.target.path.child(key));
                Sent::Post {
                    value,
                    target,
                    name,
                }
            }
            DataMethod::Patch => patch(body)?,
            DataMethod::Get => return Err(RestResponse::error(500, "a read is not a write")),
        })
    }

    /// The bytes of the current data that the write replaces (none for a new push id).
    fn replaced_bytes(&self, sent: &Sent, current: &Node) -> usize {
        let base = &self.request.target.path;
        match sent {
            Sent::Put(_) | Sent::Prepared(_) => current.get(base).estimated_bytes(),
            Sent::Patch { entries, .. } => entries.iter().fold(0usize, |sum, (target, _)| {
                sum.saturating_add(current.get(&base.join(&target.path)).estimated_bytes())
            }),
            Sent::Post { .. } => 0,
        }
    }

    /// The answer to a large prepared PUT, to serialize off the shard's thread: the same node
    /// that [`Write::answer`] would serialize.
    fn late_answer(&self, sent: &Sent, database: &Database, now: u64) -> Option<LateBody> {
        let Sent::Prepared(prepared) = sent else {
            return None;
        };
        let Change::Set(written) = prepared.change() else {
            return None;
        };
        let path = &self.request.target.path;
        let node = if database.check_read_as(self.auth, path, now).is_ok() {
            database.root().get(path)
        } else {
            written.clone()
        };
        (node.estimated_bytes() > OFF_THREAD_ANSWER_BYTES).then_some(LateBody {
            node,
            style: self.request.style,
        })
    }

    /// The body of a successful write's answer: what is now at the written location (for a
    /// PATCH, at each written path), or the new push id. A location the caller may not read
    /// is answered with what the request sent: what is stored there may reveal data the
    /// caller did not write (the base of an increment, whether a node exists for a priority
    /// write).
    fn answer(&self, sent: &Sent, database: &Database, now: u64) -> Vec<u8> {
        let request = self.request;
        let root = database.root();
        let readable = |path: &Path| database.check_read_as(self.auth, path, now).is_ok();
        let mut body = Vec::new();
        match sent {
            Sent::Post { name, .. } => write_value(
                &serde_json::json!({ "name": name }),
                request.style.pretty,
                &mut body,
            ),
            Sent::Patch { names, entries } => {
                // Each written path shows what a read of it shows now (arrays, numbers and
                // key order alike), in the order a read orders keys.
                let mut members: Vec<(&str, Path, &WriteTarget, &Value)> = names
                    .iter()
                    .zip(entries)
                    .map(|(name, (target, sent))| {
                        let absolute = request.target.path.join(&target.path);
                        (name.as_str(), absolute, target, sent)
                    })
                    .collect();
                members.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(b.0)));
                let nodes: Vec<Node> = members
                    .iter()
                    .map(|(_, absolute, _, _)| root.get(absolute))
                    .collect();
                let priorities: Vec<Value> = nodes.iter().map(|n| n.priority().to_json()).collect();
                let parts: Vec<(&str, Member<'_>)> = members
                    .iter()
                    .zip(nodes.iter().zip(&priorities))
                    .map(|((name, absolute, target, sent), (node, priority))| {
                        let member = if !readable(absolute) {
                            Member::Value(sent)
                        } else if target.priority_only {
                            Member::Value(priority)
                        } else {
                            Member::Node(node)
                        };
                        (*name, member)
                    })
                    .collect();
                write_rest_object(&parts, request.style, &mut body);
            }
            Sent::Prepared(prepared) => {
                if readable(&request.target.path) {
                    write_location(root, &request.target, request.style, &mut body);
                } else {
                    match prepared.change() {
                        Change::Set(node) => write_rest_json(node, request.style, &mut body),
                        Change::Priority(priority) => {
                            write_value(&priority.to_json(), request.style.pretty, &mut body)
                        }
                    }
                }
            }
            Sent::Put(sent) => {
                if readable(&request.target.path) {
                    write_location(root, &request.target, request.style, &mut body);
                } else {
                    write_value(sent, request.style.pretty, &mut body);
                }
            }
        }
        body
    }

    /// Refuses a write whose cost (the bytes written plus those replaced) exceeds its
    /// `writeSizeLimit`.
    fn check_cost(&self, replaced_bytes: usize) -> Result<(), RestResponse> {
        let Some(limit) = self.limit.max_bytes() else {
            return Ok(());
        };
        let cost = self.body_bytes.saturating_add(replaced_bytes);
        if cost > limit {
            return Err(RestResponse::error(
                413,
                format!(
                    "Data to write exceeds the maximum size that can be modified with a single request: about {cost} bytes would change, and {}={} allows {limit}.",
                    if self.request.write_limit == WriteSizeLimit::Default {
                        "the database's defaultWriteSizeLimit"
                    } else {
                        "writeSizeLimit"
                    },
                    self.limit.name()
                ),
            ));
        }
        Ok(())
    }
}

/// What a PATCH sets: its body's entries, each at the path its name gives; the answer to a
/// body that is not an object of paths.
fn patch(body: Option<Value>) -> Result<Sent, RestResponse> {
    let Some(Value::Object(map)) = body else {
        return Err(RestResponse::error(
            400,
            "Invalid data; a PATCH body must be a JSON object whose keys are paths.",
        ));
    };
    let mut names = Vec::with_capacity(map.len());
    let mut entries = Vec::with_capacity(map.len());
    for (name, value) in map {
        match WriteTarget::parse(&name) {
            Ok(target) => entries.push((target, value)),
            Err(error) => {
                return Err(RestResponse::error(
                    400,
                    format!("Invalid path {name:?} in the update: {error}"),
                ))
            }
        }
        names.push(name);
    }
    Ok(Sent::Patch { names, entries })
}

/// Writes the value now at `target` (or its priority) in REST form.
fn write_location(root: &Node, target: &WriteTarget, style: JsonStyle, out: &mut Vec<u8>) {
    let node = root.get(&target.path);
    if target.priority_only {
        write_value(&node.priority().to_json(), style.pretty, out);
    } else {
        write_rest_json(&node, style, out);
    }
}

#[cfg(test)]
#[path = "execute_tests.rs"]
pub(crate) mod tests;
