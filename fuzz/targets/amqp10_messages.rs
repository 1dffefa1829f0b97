//! AMQP 1.0 (`ferry-amqp10`): the bytes an AMQP 1.0 or stream client sends, decoded as a
//! whole message (`Message::decode`), as one value (`Value::decode`) and as transport
//! frames (`next_frame`, frames up to 1 MiB) whose performatives are then typed
//! (`Typed::read`); what decodes must encode to bytes that decode to the same again.
//!
//! Bound: decoding allocates within the input (sizes and counts are checked against the
//! bytes left first) and recursion stops at `MAX_DEPTH`.

use bytes::BytesMut;
use ferry_amqp10::{Frame, Message, Typed, Value, encode_frame, next_frame};

pub fn run(data: &[u8]) {
    // Compared by their encodings: a NaN is not equal to itself.
    if let Ok(message) = Message::decode(data) {
        let again = message.to_bytes();
        let back = Message::decode(&again).expect("its own encoding decodes");
        assert_eq!(back.to_bytes(), again);
    }
    let mut input = data;
    if let Ok(value) = Value::decode(&mut input) {
        let mut again = BytesMut::new();
        value.encode(&mut again);
        let back = Value::decode(&mut &again[..]).expect("its own encoding decodes");
        assert_eq!(back.to_bytes(), again);
    }
    let mut buffer = BytesMut::from(data);
    while let Ok(Some(frame)) = next_frame(&mut buffer, 1 << 20) {
        let mut again = BytesMut::new();
        encode_frame(&frame, &mut again);
        let back = next_frame(&mut again.clone(), 1 << 20)
            .expect("its own encoding decodes")
            .expect("whole");
        let mut twice = BytesMut::new();
        encode_frame(&back, &mut twice);
        assert_eq!(twice, again);
        if let Some(Ok(typed)) = frame.performative.as_ref().map(Typed::read) {
            let fields = typed.performative();
            let read_again = Typed::read(&fields).expect("its own fields read");
            let bytes = |performative| {
                let mut out = BytesMut::new();
                let frame = Frame {
                    performative: Some(performative),
                    ..frame.clone()
                };
                encode_frame(&frame, &mut out);
                out
            };
            assert_eq!(bytes(read_again.performative()), bytes(fields));
        }
    }
}
