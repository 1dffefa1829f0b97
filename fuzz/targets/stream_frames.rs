//! RabbitMQ's stream protocol (`ferry-streams`): the bytes a stream client or server sends,
//! taken off a buffer frame by frame (`next_frame`, frames up to 1 MiB), each decoded as a
//! client's command (`Request::decode`) and as a server's (`ServerFrame::decode`); whatever
//! decodes must encode to bytes that decode to the same command again.
//!
//! Bound: decoding allocates within the frame (no length or count drives an allocation
//! past the bytes that could hold it), and the frame size is checked before its body is
//! awaited.

use bytes::BytesMut;
use ferry_streams::{Request, ServerFrame, framed, next_frame};

/// The largest frame taken.
const FRAME_MAX: usize = 1 << 20;

pub fn run(data: &[u8]) {
    let mut buffer = BytesMut::from(data);
    while let Ok(Some(frame)) = next_frame(&mut buffer, FRAME_MAX) {
        if let Ok(request) = Request::decode(&frame) {
            let again = framed(|out| request.encode(out));
            assert_eq!(Request::decode(&again[4..]).as_ref(), Ok(&request));
        }
        if let Ok(sent) = ServerFrame::decode(&frame) {
            let again = framed(|out| sent.encode(out));
            assert_eq!(ServerFrame::decode(&again[4..]).as_ref(), Ok(&sent));
        }
    }
}
