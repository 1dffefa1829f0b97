//! AMQP 1.0's message format (`ferry-amqp10`) against Qpid Proton, the reference
//! implementation: seeded random messages Proton encodes (every section, every type it
//! writes) are decoded by Ferry, encoded again, and read back by Proton as the messages it
//! made (`tests/python/amqp10_proton.py`). One test binary.

use bytes::BytesMut;
use ferry_amqp10::Message;
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
