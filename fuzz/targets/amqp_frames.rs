//! AMQP 0-9-1 front: bytes a client sends after the protocol header.
//!
//! Feeds: `amqp::codec::decode` (frame splitting, method and content-header parsing with
//! `amq-protocol`), in chunks of the input's choosing (so partial frames wait for more
//! bytes), at a frame_max the input picks from 4096 to 1 MiB and then, after a
//! connection.tune-ok, at the frame_max the handshake negotiates; every decoded frame goes
//! where the connection sends it, as far as that is pure:
//! - channel 0: connection.start-ok's SASL response (`sasl::response`, PLAIN and AMQPLAIN)
//!   and client capabilities, connection.tune-ok's frame_max negotiation;
//! - other channels, in any order: each channel's content assembly (`channel::content`:
//!   basic.publish, content header, body frames, with the exceptions a channel raises for
//!   frames out of order), queue.declare arguments (`QueueArgs::parse`),
//!   exchange.declare kinds, and every completed message's properties (`expiration`,
//!   `x-delay`), stored form (`StoredMessage` encode/decode) and delivered properties.
//!
//! The connection and channel loops themselves (`connection::Connection::run`,
//! `channel::Channel::serve`) cannot run here: they own a socket's halves, tokio tasks, a
//! `Broker` over the store and the user store, and every channel method other than
//! publish commits to the store before it is answered. What they decide without I/O —
//! which frame may come when — is the content assembly and the handshake checks above.
//!
//! Bound: a frame is refused before anything is reserved for it above frame_max, and a
//! body grows only as body frames arrive, so memory stays within the input and 1 MiB
//! (`-malloc_limit_mb` catches a length-driven allocation); a completed message survives
//! the stored form byte for byte.

use amq_protocol::protocol::{AMQPClass, basic, connection, exchange, queue};
use bytes::BytesMut;
use ferry::fuzzing::{
    AmqpContent, amqp_capabilities, amqp_negotiate_frame_max, amqp_sasl_response,
};
use ferry_amqp::ExchangeKind;
use ferry_amqp::QueueArgs;
use ferry_amqp::StoredMessage;
use ferry_amqp::codec::{self, Frame};
use ferry_amqp::delay_of;
use ferry_auth::peer::Peer;
use std::collections::HashMap;

/// frame_max values the server may be configured with (AMQP's minimum to 1 MiB).
const FRAME_MAX: [u32; 4] = [4096, 8192, 131_072, 1 << 20];
/// `amqp.max_message_size` values: tiny, small, the default.
const MAX_MESSAGE_SIZE: [u32; 3] = [16, 4096, 4 * 1024 * 1024];

/// Feeds `data` to what this target drives; panics on what the target finds.
pub fn run(data: &[u8]) {
    let [frame_sel, size_sel, chunk, stream @ ..] = data else {
        return;
    };
    let ours = FRAME_MAX[usize::from(*frame_sel) % FRAME_MAX.len()];
    let max_message = MAX_MESSAGE_SIZE[usize::from(*size_sel) % MAX_MESSAGE_SIZE.len()];
    let chunk = match *chunk {
        0 => stream.len().max(1),
        n => usize::from(n),
    };
    let mut connection = Connection {
        frame_max: ours,
        ours,
        max_message,
        channels: HashMap::new(),
        peer: Peer::plaintext(std::net::SocketAddr::from(([127, 0, 0, 1], 40_000))),
    };
    let mut buf = BytesMut::new();
    for piece in stream.chunks(chunk) {
        buf.extend_from_slice(piece);
        loop {
            match codec::decode(&mut buf, connection.frame_max) {
                Ok(Some(frame)) => connection.on_frame(frame),
                Ok(None) => break,
                // A connection exception: the connection closes.
                Err(_) => return,
            }
        }
    }
}

/// The pure part of one connection's state.
struct Connection {
    /// The frame_max frames are decoded with (the negotiated one after tune-ok).
    frame_max: u32,
    /// The server's configured frame_max.
    ours: u32,
    /// `amqp.max_message_size`.
    max_message: u32,
    /// The content state of each open channel.
    channels: HashMap<u16, AmqpContent>,
    /// The client.
    peer: Peer,
}

impl Connection {
    fn on_frame(&mut self, frame: Frame) {
        let id = frame.channel();
        if id == 0 {
            if let Frame::Method(_, method) = frame {
                self.on_connection_method(*method);
            }
            return;
        }
        let max_message = self.max_message;
        let content = self
            .channels
            .entry(id)
            .or_insert_with(|| AmqpContent::new(max_message));
        let outcome = match frame {
            Frame::Method(_, method) => {
                if content.in_progress() {
                    // A method while content is expected: the channel closes.
                    Err(())
                } else {
                    on_channel_method(content, &method);
                    Ok(None)
                }
            }
            Frame::Header(_, header) => content.header(header).map_err(drop),
            // A large body's segments would go to the store; the fuzzer only assembles.
            Frame::Body(_, body) => content.body(body).map(|f| f.message).map_err(drop),
            Frame::Heartbeat(_) => Ok(None),
        };
        match outcome {
            Ok(Some(message)) => on_message(message),
            Ok(None) => {}
            Err(()) => {
                self.channels.remove(&id);
            }
        }
    }

    fn on_connection_method(&mut self, method: AMQPClass) {
        match method {
            AMQPClass::Connection(connection::AMQPMethod::StartOk(start_ok)) => {
                let _ = amqp_capabilities(&start_ok.client_properties);
                let _ = amqp_sasl_response(
                    &self.peer,
                    start_ok.mechanism.as_str(),
                    start_ok.response.as_bytes(),
                );
            }
            AMQPClass::Connection(connection::AMQPMethod::TuneOk(tune_ok)) => {
                if let Ok(n) = amqp_negotiate_frame_max(tune_ok.frame_max, self.ours) {
                    assert!(n <= self.ours, "negotiated {n} above ours {}", self.ours);
                    self.frame_max = n;
                }
            }
            _ => {}
        }
    }
}

fn on_channel_method(content: &mut AmqpContent, method: &AMQPClass) {
    match method {
        AMQPClass::Basic(basic::AMQPMethod::Publish(publish)) => content.start(publish.clone()),
        AMQPClass::Queue(queue::AMQPMethod::Declare(declare)) => {
            if let Ok(args) = QueueArgs::parse(&declare.arguments) {
                let _ = args.stage_max_priority();
                let _ = args.stage_delivery_limit();
                let _ = args.lane_priority(u8::MAX);
            }
        }
        AMQPClass::Exchange(exchange::AMQPMethod::Declare(declare)) => {
            let _ = ExchangeKind::declared(declare.kind.as_str(), &declare.arguments);
        }
        _ => {}
    }
}

/// A completed basic.publish: what `Publisher::accept` reads of it, and its stored form.
fn on_message(message: ferry_amqp::Incoming) {
    let properties = &message.header.properties;
    if let Some(e) = properties.expiration() {
        let _ = e.as_str().parse::<u64>();
    }
    let _ = delay_of(properties.headers().as_ref());
    let stored = StoredMessage {
        exchange: message.publish.exchange.to_string(),
        routing_key: message.publish.routing_key.to_string(),
        raw_properties: message.header.raw_properties.clone(),
        body: message.body.clone(),
    };
    let decoded = StoredMessage::decode(stored.encode()).expect("a stored message decodes");
    assert_eq!(decoded, stored, "the stored form round-trips");
    decoded
        .properties()
        .expect("properties the codec parsed parse again");
    for returns in [0, 1, u32::MAX] {
        let _ = decoded.delivered_properties(true, returns);
    }
}
