//! AMQP 1.0 messages (`ferry-amqp10`): the bytes an AMQP 1.0 or stream client sends as a
//! message, decoded as a whole message (`Message::decode`) and as one value
//! (`Value::decode`); what decodes must encode to bytes that decode to the same again.
//!
//! Bound: decoding allocates within the input (sizes and counts are checked against the
//! bytes left first) and recursion stops at `MAX_DEPTH`.

use bytes::BytesMut;
use ferry_amqp10::{Message, Value};

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
}
