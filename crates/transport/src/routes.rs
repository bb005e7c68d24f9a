//! The endpoints of the realtime port that need the whole server rather than one core: the
//! health checks and metrics (every shard's numbers, the cluster's health) and backups (a cut
//! of every shard). The server implements [`ServerEndpoints`] and hands it to each [`Front`];
//! the HTTP transport asks it before it routes a request to a database, so this crate never
//! imports the server.
//!
//! [`Front`]: crate::front::Front

use futures_util::future::LocalBoxFuture;
use hyper::http::request::Parts;
use hyper::Response;

use hearth_edge::http_body::HearthBody;
use hearth_ground::rest::RestResponse;

pub trait ServerEndpoints {
    /// Whether [`observe`](Self::observe) answers `path`: checked first, so that every other
    /// request goes on without a boxed future.
    fn observes(&self, path: &str) -> bool;

    /// `/healthz`, `/readyz` and `/metrics` on the realtime port, or `None` for any other
    /// path. They answer even while the answer budget is spent: a probe that failed then would
    /// restart a server that only has slow clients.
    fn observe<'a>(&'a self, parts: &'a Parts) -> LocalBoxFuture<'a, Option<RestResponse>>;

    /// A backup of every database of the server, streamed (the caller is an admin).
    fn backup(&self) -> LocalBoxFuture<'_, Response<HearthBody>>;
}
