//! AMQP 1.0 (`ferry-amqp10`) against Qpid Proton, the reference implementation: seeded
//! random messages Proton encodes (every section, every type it writes) are decoded by
//! Ferry, encoded again, and read back by Proton as the messages it made
//! (`tests/python/amqp10_proton.py`); and Proton's engine as a client authenticates,
//! attaches and transfers to a server speaking in Ferry's frames
//! (`tests/python/amqp10_proton_engine.py`). One test binary.

use bytes::{Bytes, BytesMut};
use ferry_amqp10::{
    Array, Body, Frame, FrameType, Layer, Message, Performative, Value, encode_frame, next_frame,
};
use ferry_test_support::clients::python_script;
use std::io::Write;
use std::process::{Command, Stdio};

/// Messages per seed.
const COUNT: usize = 400;

/// `amqp10_proton.py MODE SEED COUNT` with `input` on stdin: its standard output.
fn proton(mode: &str, seed: &str, input: &str) -> String {
    let mut child = Command::new("python3")
        .arg(python_script("amqp10_proton.py"))
        .args([mode, seed, &COUNT.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "amqp10_proton.py {mode}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn messages_proton_makes_read_and_write_back_as_proton_made_them() {
    for seed in ["1", "2", "3"] {
        let made = proton("make", seed, "");
        let mut again = String::new();
        for (i, line) in made.lines().enumerate() {
            let bytes = unhex(line);
            let message = Message::decode(&bytes)
                .unwrap_or_else(|e| panic!("seed {seed} message {i} ({line}): {e}"));
            let mut out = BytesMut::new();
            message.encode(&mut out);
            // Ferry reads its own encoding as it read Proton's.
            assert_eq!(
                Message::decode(&out).as_ref(),
                Ok(&message),
                "seed {seed} message {i}"
            );
            again.push_str(&hex(&out));
            again.push('\n');
        }
        assert_eq!(proton("check", seed, &again).trim(), "OK", "seed {seed}");
    }
}

/// Proton's engine as a client (`amqp10_proton_engine.py`), one line of hex each way.
struct ProtonClient {
    child: std::process::Child,
    out: std::io::BufReader<std::process::ChildStdout>,
}

impl ProtonClient {
    fn start() -> Self {
        let mut child = Command::new("python3")
            .arg(python_script("amqp10_proton_engine.py"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs");
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        Self { child, out }
    }

    /// What the client sent since the last call.
    fn read(&mut self) -> BytesMut {
        let mut line = String::new();
        std::io::BufRead::read_line(&mut self.out, &mut line).unwrap();
        BytesMut::from(&unhex(line.trim())[..])
    }

    /// Gives the client `bytes` and returns what it sends then.
    fn exchange(&mut self, bytes: &[u8]) -> BytesMut {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{}", hex(bytes)).unwrap();
        self.read()
    }

    /// The client's state at the end.
    fn finish(mut self) -> String {
        writeln!(self.child.stdin.as_mut().unwrap(), "END").unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut self.out, &mut line).unwrap();
        self.child.wait().unwrap();
        line
    }
}

/// Takes a protocol header off `bytes`.
fn header(bytes: &mut BytesMut) -> Option<Layer> {
    Layer::of_header(&bytes.split_to(8))
}

/// Every frame in `bytes`.
fn frames(bytes: &mut BytesMut) -> Vec<Frame> {
    let mut out = Vec::new();
    while let Some(frame) = next_frame(bytes, 1 << 20).expect("Proton's frames decode") {
        out.push(frame);
    }
    assert!(bytes.is_empty(), "bytes after the last frame: {bytes:?}");
    out
}

/// The frame of `performative` with `fields`, on `channel`.
fn frame(frame_type: FrameType, channel: u16, code: u64, fields: Vec<Value>) -> Frame {
    Frame {
        frame_type,
        channel,
        performative: Some(Performative { code, fields }),
        payload: Bytes::new(),
    }
}

/// `frames` encoded after `layer`'s header, when given.
fn server_bytes(layer: Option<Layer>, frames: &[Frame]) -> Vec<u8> {
    let mut out = BytesMut::new();
    if let Some(layer) = layer {
        out.extend_from_slice(&layer.header());
    }
    for f in frames {
        encode_frame(f, &mut out);
    }
    out.to_vec()
}

/// The codes of `frames`' performatives.
fn codes(frames: &[Frame]) -> Vec<u64> {
    frames
        .iter()
        .filter_map(|f| f.performative.as_ref().map(|p| p.code))
        .collect()
}

#[test]
fn proton_as_a_client_authenticates_attaches_and_transfers_to_a_server_of_ferrys_frames() {
    use ferry_amqp10::performative as p;
    let text = |s: &str| Value::String(s.into());
    let mut client = ProtonClient::start();

    // SASL: the client's header; the server offers PLAIN; the client's sasl-init.
    let mut sent = client.read();
    assert_eq!(header(&mut sent), Some(Layer::Sasl));
    let mechanisms = Value::Array(Array {
        descriptor: None,
        code: 0xa3,
        elements: vec![
            Value::Symbol("PLAIN".into()),
            Value::Symbol("ANONYMOUS".into()),
        ],
    });
    let mut sent = client.exchange(&server_bytes(
        Some(Layer::Sasl),
        &[frame(
            FrameType::Sasl,
            0,
            p::SASL_MECHANISMS,
            vec![mechanisms],
        )],
    ));
    let init = frames(&mut sent);
    assert_eq!(codes(&init), [p::SASL_INIT]);
    let init = init[0].performative.as_ref().unwrap();
    assert_eq!(init.field(0), Some(&Value::Symbol("PLAIN".into())));
    assert_eq!(
        init.field(1),
        Some(&Value::Binary(Bytes::from_static(b"\0guest\0guest")))
    );

    // The outcome: then the client's AMQP header, open, begin and attach.
    let mut sent = client.exchange(&server_bytes(
        None,
        &[frame(
            FrameType::Sasl,
            0,
            p::SASL_OUTCOME,
            vec![Value::Ubyte(0)],
        )],
    ));
    assert_eq!(header(&mut sent), Some(Layer::Amqp));
    let opened = frames(&mut sent);
    assert_eq!(codes(&opened), [p::OPEN, p::BEGIN, p::ATTACH]);
    let open = opened[0].performative.as_ref().unwrap();
    assert_eq!(open.field(0), Some(&text("proton-client")));
    assert_eq!(open.field(1), Some(&text("vhost:/")));
    let attach = opened[2].performative.as_ref().unwrap();
    assert_eq!(attach.field(0), Some(&text("sender-link")));
    assert_eq!(
        attach.field(2),
        Some(&Value::Bool(false)),
        "the client's role: sender"
    );
    let Some(Value::Described(_, target)) = attach.field(6) else {
        panic!("no target: {attach:?}");
    };
    let Value::List(target_fields) = &**target else {
        panic!("a target that is not a list: {target:?}");
    };
    assert_eq!(
        target_fields.first(),
        Some(&text("/queues/q")),
        "the target's address"
    );

    // The server's open, begin, attach (receiver) and credit: the client transfers.
    let handle = Value::Uint(0);
    let mut sent = client.exchange(&server_bytes(
        Some(Layer::Amqp),
        &[
            frame(FrameType::Amqp, 0, p::OPEN, vec![text("ferry")]),
            frame(
                FrameType::Amqp,
                0,
                p::BEGIN,
                vec![
                    Value::Ushort(0),
                    Value::Uint(0),
                    Value::Uint(100),
                    Value::Uint(100),
                ],
            ),
            frame(
                FrameType::Amqp,
                0,
                p::ATTACH,
                vec![
                    text("sender-link"),
                    handle.clone(),
                    Value::Bool(true),
                    Value::Null,
                    Value::Null,
                    Value::Described(Box::new(Value::Ulong(0x28)), Box::new(Value::List(vec![]))),
                    Value::Described(Box::new(Value::Ulong(0x29)), target.clone()),
                ],
            ),
            frame(
                FrameType::Amqp,
                0,
                p::FLOW,
                vec![
                    Value::Uint(0),
                    Value::Uint(100),
                    Value::Uint(0),
                    Value::Uint(100),
                    handle,
                    Value::Uint(0),
                    Value::Uint(10),
                ],
            ),
        ],
    ));
    let transferred = frames(&mut sent);
    assert_eq!(codes(&transferred), [p::TRANSFER]);
    let transfer = &transferred[0];
    let fields = transfer.performative.as_ref().unwrap();
    assert_eq!(fields.field(0), Some(&Value::Uint(0)), "handle");
    assert_eq!(fields.field(1), Some(&Value::Uint(0)), "delivery-id");
    assert_eq!(
        fields.field(2),
        Some(&Value::Binary(Bytes::from_static(b"tag1")))
    );
    let message = Message::decode(&transfer.payload).expect("the transfer holds a message");
    assert_eq!(
        message.body,
        Some(Body::Data(vec![Bytes::from_static(b"hello")]))
    );

    let state: serde_json::Value = serde_json::from_str(&client.finish()).unwrap();
    assert_eq!(
        state,
        serde_json::json!({
            "sasl_outcome": 0,
            "connection_remote_active": true,
            "session_remote_active": true,
            "link_remote_active": true,
            "credit": 9,
            "sent": true,
            "condition": "",
        })
    );
}
