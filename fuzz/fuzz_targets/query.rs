//! Query parameters in both forms. Input `w` + JSON: the wire form, the `q` object of a listen
//! or get. Any other first byte, then names and values separated by 0xFF bytes: the REST form
//! (`orderBy`, `startAt`, `limitToFirst`, ... after percent-decoding).
#![no_main]

use hearth_fuzz::text_parts;
use hearth_query::{QueryParams, RestQueryText};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match data.split_first() {
        Some((b'w', json)) => {
            if let Ok(q) = serde_json::from_slice::<serde_json::Value>(json) {
                let _ = QueryParams::from_wire(&q);
            }
        }
        Some((_, pairs)) => {
            let texts: Vec<&str> = text_parts(pairs).collect();
            let pairs = texts.chunks(2).filter_map(|pair| match pair {
                [name, value] => Some((*name, *value)),
                _ => None,
            });
            let _ = QueryParams::from_rest(&RestQueryText::from_pairs(pairs));
        }
        None => {}
    }
});
