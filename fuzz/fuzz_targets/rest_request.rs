//! The REST request parser: method, target, query parameters, auth and headers.
//! Input: method, URI, then header names and values, separated by 0xFF bytes.
#![no_main]

use hearth_fuzz::parts;
use hearth_server::fuzzing::parse_rest_request;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut parts = parts(data);
    let (Some(method), Some(uri)) = (parts.next(), parts.next()) else {
        return;
    };
    let Ok(uri) = std::str::from_utf8(uri) else {
        return;
    };
    let mut headers = Vec::new();
    while let (Some(name), Some(value)) = (parts.next(), parts.next()) {
        if let Ok(name) = std::str::from_utf8(name) {
            headers.push((name, value));
        }
    }
    let _ = parse_rest_request(method, uri, &headers);
});
