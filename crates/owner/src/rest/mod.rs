//! The REST API's calls run on the shard that owns their database: `execute` answers a
//! [`hearth_ground::rest::RestCall`] (reads, writes, rules) from the database, `read` its reads,
//! `answer` what the answers of reads and writes share, `settings` the rules endpoints, `settings_api` the settings document and ruleset history. What a call is, how a request becomes one and how an answer is written are in
//! `hearth_ground::rest`, which runs wherever the request arrived and knows no database.

mod answer;
pub mod execute;
mod read;
mod settings;
pub(crate) mod settings_api;

#[cfg(test)]
mod cache_tests;
#[cfg(test)]
mod oracle_tests;
#[cfg(test)]
mod prepared_tests;

pub use answer::reply_error;
pub use execute::execute_durable;
