//! A REST read on the shard that owns its database: checked by the rules for the caller, then
//! answered from the cache of serialized answers when it holds the data's current answer.

use std::time::Instant;

use bytes::Bytes;
use hearth_query::QueryParams;
use hearth_sync::AuthState;
use hearth_tree::Node;
use hearth_wire::{write_rest_json, write_shallow_json, write_value};

use super::answer::{etag_of, reply_error};
use crate::loaded::Loaded;
use crate::state::Owner;
use hearth_ground::rest::cache::{Form, Hit, Lookup};
use hearth_ground::rest::{DataRequest, RestResponse, JAVASCRIPT, MAX_REST_RESPONSE_BYTES};
use hearth_net::time::now_ms;

/// Production's answer to a read larger than one response may carry.
const TOO_LARGE_TO_READ: &str =
    "Data requested exceeds the maximum size that can be accessed with a single request.";

/// Answers a read of `namespace` by `auth`.
pub fn read(
    owner: &Owner,
    namespace: &str,
    auth: &AuthState,
    request: &DataRequest,
    started: Instant,
) -> RestResponse {
    let path = &request.target.path;
    let unfiltered = QueryParams::default();
    let params = request
        .query
        .as_ref()
        .map_or(&unfiltered, |query| &query.params);
    // The rules see the query, so a rule that allows only some queries is honoured. Access
    // is decided here, for this caller, before the cache is consulted.
    let checked_read = |database: &mut Loaded| {
        database
            .check_query_read_as(auth, path, params, now_ms())
            .map(|()| database.root().get(path))
    };
    // A database that does not exist is read as a new one would be, with the server's
    // default rules (open or locked) applied, but it is not kept: reading a mistyped name
    // must not make a database of it.
    let read = owner
        .with_existing_database(namespace, checked_read)
        .unwrap_or_else(|| checked_read(&mut owner.new_database(namespace, now_ms())));
    let node = match read {
        Ok(node) => node,
        Err(reply) => return reply_error(reply),
    };
    let matches_nothing = request
        .query
        .as_ref()
        .is_some_and(|query| query.matches_nothing);
    // A JSONP wrapper, a priority or no body at all is not worth keeping.
    let cached = owner.rest_cache().is_enabled()
        && !(matches_nothing
            || request.target.priority_only
            || request.callback.is_some()
            || request.silent);
    let lookup = Lookup {
        namespace,
        path,
        query: request.query.as_ref().map(|query| &query.params),
        form: Form {
            export: request.style.export,
            pretty: request.style.pretty,
            shallow: request.shallow,
        },
    };
    let hit = cached
        .then(|| owner.rest_cache().get(&lookup, &node))
        .flatten();
    if let Some(hit) = &hit {
        owner.counters().rest_cache_hit(hit.body.len());
    }
    let (result, body) = match hit {
        Some(hit) => (hit.result, Some(hit.body)),
        None if matches_nothing => (Node::empty(), None),
        None => (params.apply(&node), None),
    };
    // The ETag of a query's answer is the hash of what it shows, not of the whole location.
    let conditional = request.want_etag || request.if_none_match.is_some();
    let etag = conditional.then(|| etag_of(&result));
    if let (Some(expected), Some(etag)) = (&request.if_none_match, &etag) {
        if expected == etag {
            return RestResponse::empty(304).with_header("etag", etag.clone());
        }
    }
    let body = match body {
        Some(body) => body,
        None => match render(owner, request, &lookup, node, result, cached) {
            Ok(body) => body,
            Err(response) => return response,
        },
    };
    if let Some(timeout) = request.timeout {
        if started.elapsed() > timeout {
            return RestResponse::timed_out(timeout);
        }
    }
    answer(request, body, etag)
}

/// Serializes the read's `result` (of `node`) unless it is too large to answer, and keeps
/// the answer in the cache when the read is `cached` and the answer worth keeping.
fn render(
    owner: &Owner,
    request: &DataRequest,
    lookup: &Lookup<'_>,
    node: Node,
    result: Node,
    cached: bool,
) -> Result<Bytes, RestResponse> {
    if result.estimated_bytes() > MAX_REST_RESPONSE_BYTES {
        return Err(RestResponse::error(400, TOO_LARGE_TO_READ));
    }
    let body = Bytes::from(render_read(request, &result));
    // Only answers worth keeping count as misses: small ones are never looked for.
    if cached && owner.rest_cache().would_keep(body.len()) {
        let hit = Hit {
            body: body.clone(),
            result,
        };
        owner.rest_cache().put(lookup, node, hit);
        owner.counters().rest_cache_miss();
        owner
            .counters()
            .rest_cache_held(owner.rest_cache().stats().bytes);
    }
    Ok(body)
}

/// The answer to a read whose body is `body`, in the request's form, with its ETag when it
/// was asked for.
fn answer(request: &DataRequest, body: Bytes, etag: Option<String>) -> RestResponse {
    let mut response = if request.silent {
        RestResponse::empty(204)
    } else {
        let mut response = RestResponse::json(200, body);
        if request.callback.is_some() {
            response.content_type = Some(JAVASCRIPT);
        }
        response
    };
    if let Some(etag) = etag {
        response = response.with_header("etag", etag);
    }
    if let Some(name) = &request.download {
        response = response.with_header(
            "content-disposition",
            format!("attachment; filename=\"{name}\""),
        );
    }
    response
}

/// The answer to a read whose result is `result`, in the request's form.
fn render_read(request: &DataRequest, result: &Node) -> Vec<u8> {
    let mut body = Vec::new();
    if let Some(callback) = &request.callback {
        body.extend_from_slice(callback.as_bytes());
        body.push(b'(');
    }
    if request.target.priority_only {
        write_value(
            &result.priority().to_json(),
            request.style.pretty,
            &mut body,
        );
    } else if request.shallow {
        write_shallow_json(result, request.style, &mut body);
    } else {
        write_rest_json(result, request.style, &mut body);
    }
    if request.callback.is_some() {
        body.extend_from_slice(b");");
    }
    body
}
