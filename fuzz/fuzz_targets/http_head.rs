//! The HTTP head parser that routes every connection before hyper or the WebSocket library
//! sees it.
#![no_main]

use hearth_server::http_head::parse;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(Some((head, used))) = parse(data) {
        assert!(used <= data.len());
        let _ = head.is_realtime_upgrade();
        let _ = head.query_param("ns");
        let _ = head.header("host");
    }
});
