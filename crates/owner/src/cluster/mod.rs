//! This node's side of a cluster (issue #21): placement and claims live in `hearth-cluster`
//! (etcd, on a thread of its own); here is what a shard does with them.

pub mod fence;
