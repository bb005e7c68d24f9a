//! A message as the bytes of its WebSocket frames, encoded once for every connection that is
//! sent it.

use bytes::Bytes;
use hearth_wire::split_frames;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::FrameHeader;

/// One message as the bytes of its WebSocket frames: one text frame, or a count frame and
/// its chunks. Server frames are not masked, so the bytes are the same for every listener.
pub fn encode_frames(text: String) -> Bytes {
    let mut out = Vec::with_capacity(text.len() + 16);
    match split_frames(&text) {
        None => push_text_frame(&mut out, text.as_bytes()),
        Some(chunks) => {
            push_text_frame(&mut out, chunks.len().to_string().as_bytes());
            for chunk in chunks {
                push_text_frame(&mut out, chunk.as_bytes());
            }
        }
    }
    Bytes::from(out)
}

fn push_text_frame(out: &mut Vec<u8>, payload: &[u8]) {
    let header = FrameHeader {
        opcode: OpCode::Data(Data::Text),
        ..FrameHeader::default()
    };
    // Writing into a vector cannot fail.
    if header.format(payload.len() as u64, out).is_ok() {
        out.extend_from_slice(payload);
    }
}
