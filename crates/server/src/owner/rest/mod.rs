//! The REST API's calls run on the shard that owns their database: `execute` answers a
//! [`crate::rest::RestCall`] (reads, writes, rules) from the database, `settings` the rules
//! endpoints. What a call is, how a request becomes one and how an answer is written are in
//! `crate::rest`, which runs wherever the request arrived and knows no database.

pub mod execute;
mod settings;

#[cfg(test)]
mod cache_tests;
#[cfg(test)]
mod oracle_tests;
#[cfg(test)]
mod prepared_tests;

pub use execute::{execute_durable, reply_error};
