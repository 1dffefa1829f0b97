//! SASL: every login message a client sends to either front, and the credential forms
//! the server checks them against.
//!
//! Feeds, by the input's first byte:
//! - AMQP connection.start-ok responses (`amqp::connection::sasl::response`): PLAIN
//!   (`authzid NUL user NUL password`), AMQPLAIN (a field table without its length) and
//!   EXTERNAL with and without a client certificate (its names from the input);
//! - Kafka SaslHandshake mechanism names and SaslAuthenticate PLAIN messages;
//! - a SCRAM exchange (`auth::scram`): client-first, then client-final (the input split
//!   at a 0xFF byte, which UTF-8 never holds; `%N` in client-final stands for the nonce the
//!   server sent, so proofs are checked), for both mechanisms, with a genuine credential
//!   and with the fake one of an unknown user;
//! - stored credential text: `ScramCredential::parse` (Kafka's form), `PasswordHash::parse`
//!   (RabbitMQ's), and `ssl.principal.mapping.rules` applied to a certificate subject.
//!
//! Bound: parsing allocates within the message (no length field drives an allocation),
//! and no message costs more than one HMAC: the PBKDF2 of a credential runs only when it
//! is made, never per message (a hang here is a timeout).

use ferry::fuzzing::{amqp_sasl_response, kafka_sasl_handshake, kafka_sasl_plain};
use ferry_auth::password::PasswordHash;
use ferry_auth::peer::{CertificateNames, Peer, TlsPeer};
use ferry_auth::principal::PrincipalRules;
use ferry_auth::scram::exchange::{ClientFirst, Finish, ScramExchange};
use ferry_auth::scram::{MIN_ITERATIONS, Mechanism, ScramCredential};
use kafka_protocol::messages::SaslHandshakeRequest;
use kafka_protocol::protocol::StrBytes;
use std::sync::LazyLock;

/// One genuine credential per mechanism, made once (PBKDF2 is the slow part of a login,
/// not of a message).
static CREDENTIALS: LazyLock<[ScramCredential; 2]> = LazyLock::new(|| {
    Mechanism::ALL
        .map(|m| ScramCredential::with_salt(m, "pencil", b"salt".to_vec(), MIN_ITERATIONS))
});

/// The fake credential of an unknown user, per mechanism (made as the authenticator makes
/// it, once).
static FAKES: LazyLock<[ScramCredential; 2]> = LazyLock::new(|| {
    Mechanism::ALL.map(|m| ferry_auth::scram::exchange::fake_credential(m, "ghost", b"fake-key"))
});

/// Feeds `data` to what this target drives; panics on what the target finds.
pub fn run(data: &[u8]) {
    let [selector, rest @ ..] = data else {
        return;
    };
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 40_000));
    match selector % 8 {
        0 => {
            let _ = amqp_sasl_response(&Peer::plaintext(addr), "PLAIN", rest);
        }
        1 => {
            let _ = amqp_sasl_response(&Peer::plaintext(addr), "AMQPLAIN", rest);
        }
        2 => external(addr, rest),
        3 => {
            let _ = kafka_sasl_plain(rest);
        }
        4 => {
            let mechanism = String::from_utf8_lossy(rest).into_owned();
            let request =
                SaslHandshakeRequest::default().with_mechanism(StrBytes::from_string(mechanism));
            let _ = kafka_sasl_handshake(request);
        }
        5 => scram(rest, selector & 0x10 != 0, selector & 0x20 != 0),
        6 => stored_credentials(rest),
        _ => principal(rest),
    }
}

/// EXTERNAL with a certificate whose names are the input's NUL-separated fields.
fn external(addr: std::net::SocketAddr, rest: &[u8]) {
    let text = String::from_utf8_lossy(rest);
    let mut fields = text.split('\0');
    let names = CertificateNames {
        subject: fields.next().unwrap_or_default().to_owned(),
        common_name: fields.next().map(str::to_owned),
        dns_names: fields.next().into_iter().map(str::to_owned).collect(),
        emails: fields.next().into_iter().map(str::to_owned).collect(),
    };
    for certificate in [None, Some(names)] {
        let peer = Peer {
            addr,
            tls: Some(TlsPeer { certificate }),
        };
        for mechanism in ["EXTERNAL", "PLAIN", "AMQPLAIN", "SCRAM-SHA-256"] {
            let _ = amqp_sasl_response(&peer, mechanism, rest);
        }
    }
}

/// A SCRAM exchange: client-first, 0xFF, client-final.
fn scram(rest: &[u8], sha512: bool, genuine: bool) {
    let (first, last) = match rest.iter().position(|&b| b == 0xff) {
        Some(at) => (&rest[..at], Some(&rest[at + 1..])),
        None => (rest, None),
    };
    let Ok(first) = ClientFirst::parse(first) else {
        return;
    };
    let index = usize::from(sha512);
    let mechanism = Mechanism::ALL[index];
    let credential = genuine.then(|| &CREDENTIALS[index]);
    let fake = &FAKES[index];
    let (exchange, server_first) =
        ScramExchange::start(mechanism, first, credential.or(Some(fake)), b"fake-key");
    let Some(last) = last else {
        return;
    };
    let server_first = String::from_utf8(server_first).expect("server-first is text");
    let nonce = server_first
        .strip_prefix("r=")
        .and_then(|s| s.split(',').next())
        .expect("server-first starts with the nonce");
    let mut client_final = Vec::with_capacity(last.len() + nonce.len());
    let mut i = 0;
    while i < last.len() {
        if last[i..].starts_with(b"%N") {
            client_final.extend_from_slice(nonce.as_bytes());
            i += 2;
        } else {
            client_final.push(last[i]);
            i += 1;
        }
    }
    if let Ok(Finish::Proved(server_final)) = exchange.finish(&client_final) {
        assert!(genuine, "only a genuine credential proves");
        assert!(server_final.starts_with(b"v="));
    }
}

/// The stored forms of credentials: SCRAM (both mechanisms) and RabbitMQ's hash.
fn stored_credentials(rest: &[u8]) {
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    for mechanism in Mechanism::ALL {
        if let Ok(credential) = ScramCredential::parse(mechanism, text) {
            let again = ScramCredential::parse(mechanism, &credential.to_string())
                .expect("a credential's text form parses");
            assert_eq!(again, credential);
        }
    }
    if let Ok(hash) = PasswordHash::parse(text) {
        assert!(!hash.verify("not the password\u{0}"));
        assert_eq!(PasswordHash::parse(&hash.to_string()), Ok(hash));
    }
}

/// `ssl.principal.mapping.rules` and a certificate subject: rules, NUL, subject.
fn principal(rest: &[u8]) {
    let text = String::from_utf8_lossy(rest);
    let (rules, subject) = text
        .split_once('\0')
        .unwrap_or((&text, "CN=alice,O=Example"));
    if let Ok(rules) = PrincipalRules::parse(rules) {
        let _ = rules.apply(subject);
    }
}
