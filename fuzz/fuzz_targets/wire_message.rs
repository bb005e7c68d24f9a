//! The WebSocket message path: frames joined by the assembler, whole messages decoded.
//! Input: frames separated by 0xFF bytes.
#![no_main]

use hearth_fuzz::text_parts;
use hearth_tree::replace_lone_surrogates_str;
use hearth_wire::{decode, Assembled, FrameAssembler};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut assembler = FrameAssembler::default();
    for frame in text_parts(data) {
        // The surrogate pass must keep the length and leave text serde_json accepts alone.
        let repaired = replace_lone_surrogates_str(frame);
        assert_eq!(repaired.len(), frame.len());
        if serde_json::from_str::<serde_json::Value>(frame).is_ok() {
            assert_eq!(repaired, frame);
        }
        match assembler.push(frame) {
            Ok(Assembled::Message(text)) => {
                let _ = decode(&text);
            }
            Ok(Assembled::Partial | Assembled::KeepAlive) => {}
            Err(_) => assembler = FrameAssembler::default(),
        }
    }
});
