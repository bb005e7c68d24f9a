//! hearth-query: the query model of the Firebase Realtime Database protocol.
//!
//! A client listen or get may carry a query object `q` (wire protocol spec §7.1) that selects an ordered,
//! optionally limited window of the children of a node. The server has to reproduce the client's notion of that
//! window exactly (§7.2), otherwise tagged listens drift out of sync with what the client believes it holds.
//!
//! The crate is split by concern:
//! * `params.rs`: the parsed query ([`QueryParams`] and its parts) — plain data, hashable so that listens can be
//!   keyed by it;
//! * `parse.rs`: turning the wire object into [`QueryParams`], with validation;
//! * `compare.rs`: the total order of children under an index and the range test;
//! * `window.rs`: computing the query result of a node;
//! * `index.rs`: an ordered index of a location's children (`.indexOn`), which finds a window without a scan;
//! * `rest.rs`: reading the query parameters of a REST request into the same model.

mod compare;
mod error;
mod index;
mod params;
mod parse;
mod rest;
mod window;

pub use error::QueryError;
pub use index::OrderedIndex;
pub use params::{
    Bound, BoundName, BoundValue, Index, Limit, LimitFrom, OrderedF64, QueryParams, MAX_LIMIT,
    MAX_NAME, MIN_NAME,
};
pub use rest::{RestQuery, RestQueryError, RestQueryText};
