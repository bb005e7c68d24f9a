//! The Firebase realtime protocol on the wire, as pure functions over text.
//!
//! Inbound, a [`FrameAssembler`] joins split frames into whole messages and [`decode`] turns a
//! message into a [`ClientMessage`]. Outbound, the `encode` functions produce message text and
//! [`split_frames`] cuts long messages into the frames the client expects. Nothing here holds a
//! socket or a clock.

mod decode;
mod encode;
mod frames;

pub use decode::{decode, AuthRequest, ClientMessage, ClientRequest, WireError};
pub use encode::{
    encode_cancel, encode_handshake, encode_push, encode_reply, encode_reply_status,
    encode_reply_value, encode_shutdown, EncodedPush, PONG,
};
pub use frames::{
    split_frames, Assembled, FrameAssembler, FrameError, MAX_FRAME_BYTES, MAX_MESSAGE_BYTES,
};
