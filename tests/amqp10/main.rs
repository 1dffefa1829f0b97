//! AMQP 1.0 (`ferry-amqp10`) against Qpid Proton, the reference implementation: seeded
//! random messages Proton encodes (every section, every type it writes) are decoded by
//! Ferry, encoded again, and read back by Proton as the messages it made
//! (`tests/python/amqp10_proton.py`); and Proton's engine as a client authenticates,
//! attaches and transfers to a server speaking in Ferry's frames
//! (`tests/python/amqp10_proton_engine.py`). One test binary.

use bytes::{Bytes, BytesMut};
use ferry_amqp10::{
    Attach, Begin, Body, Flow, Frame, FrameType, Layer, Message, Open, SaslInit, SaslMechanisms,
    SaslOutcome, Typed, encode_frame, next_frame,
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

/// A frame of `typed` on channel 0.
fn frame(frame_type: FrameType, typed: Typed) -> Frame {
    Frame {
        frame_type,
        channel: 0,
        performative: Some(typed.performative()),
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

/// Each frame's performative, typed.
fn typed(frames: &[Frame]) -> Vec<Typed> {
    frames
        .iter()
        .map(|f| Typed::read(f.performative.as_ref().expect("a performative")).expect("typed"))
        .collect()
}

#[test]
fn proton_as_a_client_authenticates_attaches_and_transfers_to_a_server_of_ferrys_frames() {
    let mut client = ProtonClient::start();

    // SASL: the client's header; the server offers PLAIN; the client's sasl-init.
    let mut sent = client.read();
    assert_eq!(header(&mut sent), Some(Layer::Sasl));
    let offer = SaslMechanisms {
        mechanisms: vec!["PLAIN".into(), "ANONYMOUS".into()],
    };
    let mut sent = client.exchange(&server_bytes(
        Some(Layer::Sasl),
        &[frame(FrameType::Sasl, Typed::SaslMechanisms(offer))],
    ));
    assert_eq!(
        typed(&frames(&mut sent)),
        [Typed::SaslInit(SaslInit {
            mechanism: "PLAIN".into(),
            initial_response: Some(Bytes::from_static(b"\0guest\0guest")),
            // Proton names the host in open, not here.
            hostname: None,
        })]
    );

    // The outcome: then the client's AMQP header, open, begin and attach.
    let ok = SaslOutcome {
        code: 0,
        additional_data: None,
    };
    let mut sent = client.exchange(&server_bytes(
        None,
        &[frame(FrameType::Sasl, Typed::SaslOutcome(ok))],
    ));
    assert_eq!(header(&mut sent), Some(Layer::Amqp));
    let [
        Typed::Open(open),
        Typed::Begin(begin),
        Typed::Attach(attach),
    ] = &typed(&frames(&mut sent))[..]
    else {
        panic!("not open, begin, attach");
    };
    assert_eq!(
        (open.container_id.as_str(), open.hostname.as_deref()),
        ("proton-client", Some("vhost:/"))
    );
    assert_eq!(begin.remote_channel, None);
    assert_eq!((attach.name.as_str(), attach.role), ("sender-link", false));
    let target = attach.target.clone().expect("a target");
    assert_eq!(target.address.as_deref(), Some("/queues/q"));

    // The server's open, begin, attach (receiver, the target echoed) and credit: the
    // client transfers.
    let mut sent = client.exchange(&server_bytes(
        Some(Layer::Amqp),
        &[
            frame(
                FrameType::Amqp,
                Typed::Open(Open {
                    container_id: "ferry".into(),
                    max_frame_size: Some(1 << 20),
                    ..Open::default()
                }),
            ),
            frame(
                FrameType::Amqp,
                Typed::Begin(Begin {
                    remote_channel: Some(0),
                    next_outgoing_id: 0,
                    incoming_window: 100,
                    outgoing_window: 100,
                    handle_max: None,
                }),
            ),
            frame(
                FrameType::Amqp,
                Typed::Attach(Attach {
                    name: attach.name.clone(),
                    handle: 0,
                    role: true,
                    snd_settle_mode: None,
                    rcv_settle_mode: None,
                    source: attach.source.clone(),
                    target: Some(target),
                    initial_delivery_count: None,
                    max_message_size: None,
                }),
            ),
            frame(
                FrameType::Amqp,
                Typed::Flow(Flow {
                    next_incoming_id: Some(0),
                    incoming_window: 100,
                    next_outgoing_id: 0,
                    outgoing_window: 100,
                    handle: Some(0),
                    delivery_count: Some(0),
                    link_credit: Some(10),
                    ..Flow::default()
                }),
            ),
        ],
    ));
    let transferred = frames(&mut sent);
    let [Typed::Transfer(transfer)] = &typed(&transferred)[..] else {
        panic!("not one transfer: {transferred:?}");
    };
    assert_eq!(
        (
            transfer.handle,
            transfer.delivery_id,
            transfer.delivery_tag.as_deref()
        ),
        (attach.handle, Some(0), Some(&b"tag1"[..]))
    );
    let message = Message::decode(&transferred[0].payload).expect("the transfer holds a message");
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
