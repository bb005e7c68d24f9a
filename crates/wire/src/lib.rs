//! The Firebase realtime protocol on the wire, as pure functions over text.
//!
//! Inbound, a [`FrameAssembler`] joins split frames into whole messages and [`decode`] turns a
//! message into a [`ClientMessage`]. Outbound, the `encode` functions produce message text and
//! [`split_frames`] cuts long messages into the frames the client expects. The REST side has
//! its own output forms: JSON as REST clients read it (`rest`), server-sent events (`sse`)
//! and the push ids that `POST` creates (`push_id`). Nothing here holds a socket or a clock.

mod bounded;
mod decode;
mod encode;
mod frames;
mod push_id;
mod rest;
mod sse;

pub use bounded::{parse_bounded, ParseError, MAX_PARSE_BYTES_PER_BYTE, PARSE_ALLOWANCE_BYTES};
pub use decode::{
    control_type, decode, decode_lazy, without_lone_surrogates, AuthRequest, ClientMessage,
    ClientRequest, Decoded, PendingWrite, WireError,
};
pub use encode::{
    encode_auth_revoked, encode_cancel, encode_handshake, encode_push, encode_reply,
    encode_reply_status, encode_reply_value, encode_reset, encode_shutdown, EncodedPush,
    END_OF_TRANSMISSION, PONG, SWITCH_ACK,
};
pub use frames::{
    split_frames, Assembled, FrameAssembler, FrameError, MAX_FRAME_BYTES, MAX_MESSAGE_BYTES,
};
pub use push_id::{PushIdGenerator, PUSH_ID_ALPHABET, PUSH_ID_LEN, PUSH_ID_RANDOM_CHARS};
pub use rest::{
    is_array_like, rest_json, write_rest_json, write_rest_object, write_shallow_json, write_value,
    JsonStyle, Member,
};
pub use sse::{
    encode_sse_event, encode_sse_payload, event_head, SseKind, SsePayload, SSE_AUTH_REVOKED,
    SSE_CANCEL, SSE_EVENT_END, SSE_KEEP_ALIVE,
};
