//! The node-to-node link's frame splitter and message decoder, which read what another node
//! sends (after its handshake, but a broken peer must not bring this one down). A message
//! that decodes must encode to a frame that decodes to the same message.
#![no_main]

use bytes::BytesMut;
use hearth_server::peer::codec::{split_frame, LinkMessage};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut buffer = BytesMut::from(data);
    while let Ok(Some(body)) = split_frame(&mut buffer) {
        if let Ok(message) = LinkMessage::decode(body) {
            let mut out = BytesMut::new();
            message.encode(&mut out);
            let again = split_frame(&mut out)
                .expect("an encoded frame splits")
                .expect("an encoded frame is whole");
            assert_eq!(LinkMessage::decode(again).as_ref(), Ok(&message));
        }
    }
});
