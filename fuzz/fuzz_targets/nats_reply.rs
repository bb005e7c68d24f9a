//! The NATS publisher's parser of what the server sends (INFO, PING, -ERR, MSG, HMSG and the
//! status in its headers): a broken or hostile server must yield an error, never a panic or
//! an allocation past the announced-length limits.
#![no_main]

use hearth_triggers::nats::parse_server_bytes;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    parse_server_bytes(data);
});
