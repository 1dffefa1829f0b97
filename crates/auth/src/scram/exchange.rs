//! The server side of a SCRAM exchange (RFC 5802; SCRAM-SHA-256 and -512 as Kafka's KIP-84
//! runs them), without I/O: client-first → server-first, then client-final → server-final.
//!
//! Channel binding is not supported (`n,,` or `y,,` only), nor extensions Ferry does not
//! know (a mandatory `m=` fails). For a user who does not exist, or who has no credential
//! for the mechanism, the exchange goes on with a fake credential whose salt is derived
//! from the user name, and fails only at client-final — as a wrong password does, so the
//! answers do not reveal whether the user exists.

use super::{Mechanism, ScramCredential, constant_time_eq, random_bytes};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

/// Random bytes in the server's part of the nonce.
const SERVER_NONCE_LEN: usize = 24;

/// Why a SCRAM exchange failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScramError {
    /// A message does not have SCRAM's form.
    #[error("the SCRAM {message} message is malformed: {why}")]
    Malformed {
        /// Which message (`client-first`, `client-final`).
        message: &'static str,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The client-final nonce is not the one server-first sent.
    #[error("the SCRAM client-final nonce does not match the exchange's")]
    NonceMismatch,
}

/// A parsed client-first message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFirst {
    /// The user name (`n=`, with `=2C` and `=3D` decoded).
    pub user: String,
    /// The GS2 header (`n,,`), which client-final echoes in `c=`.
    gs2_header: String,
    /// The message without the GS2 header, part of AuthMessage.
    bare: String,
    /// The client's nonce.
    nonce: String,
}

impl ClientFirst {
    /// Parses `gs2-header client-first-message-bare`.
    ///
    /// # Errors
    /// [`ScramError::Malformed`].
    pub fn parse(bytes: &[u8]) -> Result<Self, ScramError> {
        let bad = |why| ScramError::Malformed {
            message: "client-first",
            why,
        };
        let text = std::str::from_utf8(bytes).map_err(|_| bad("it is not UTF-8"))?;
        let mut parts = text.splitn(3, ',');
        let (Some(binding), Some(authzid), Some(bare)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(bad("it has no GS2 header"));
        };
        match binding {
            "n" | "y" => {}
            b if b.starts_with("p=") => return Err(bad("channel binding is not supported")),
            _ => return Err(bad("the GS2 header's binding flag is not n, y or p")),
        }
        let mut fields = bare.split(',');
        let user = fields
            .next()
            .and_then(|f| f.strip_prefix("n="))
            .ok_or_else(|| bad("it has no n= user name"))?;
        let user = decode_saslname(user).ok_or_else(|| bad("the user name is badly escaped"))?;
        let nonce = fields
            .next()
            .and_then(|f| f.strip_prefix("r="))
            .filter(|n| !n.is_empty())
            .ok_or_else(|| bad("it has no r= nonce"))?;
        if fields.any(|f| f.starts_with("m=")) {
            return Err(bad("it asks for a mandatory extension"));
        }
        match authzid.strip_prefix("a=") {
            None if authzid.is_empty() => {}
            Some(a) if decode_saslname(a).as_deref() == Some(user.as_str()) => {}
            _ => return Err(bad("the authorization identity is not the user name")),
        }
        if user.is_empty() {
            return Err(bad("the user name is empty"));
        }
        Ok(Self {
            gs2_header: format!("{binding},{authzid},"),
            nonce: nonce.to_owned(),
            user,
            bare: bare.to_owned(),
        })
    }
}

/// An exchange waiting for client-final.
#[derive(Debug, Clone)]
pub struct ScramExchange {
    first: ClientFirst,
    server_first: String,
    nonce: String,
    credential: ScramCredential,
    /// Whether `credential` is the user's (false: a fake one; client-final fails).
    genuine: bool,
}

/// How client-final ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finish {
    /// The proof is right: send this server-final message.
    Proved(Vec<u8>),
    /// The proof is wrong, or the user has no credential for the mechanism.
    WrongProof,
}

impl ScramExchange {
    /// Answers `first` with server-first, using `credential` when the user has one for
    /// `mechanism`, or a fake one derived from `fake_key` and the user name.
    pub fn start(
        mechanism: Mechanism,
        first: ClientFirst,
        credential: Option<&ScramCredential>,
        fake_key: &[u8],
    ) -> (Self, Vec<u8>) {
        let (credential, genuine) = match credential {
            Some(c) => (c.clone(), true),
            None => (fake_credential(mechanism, &first.user, fake_key), false),
        };
        let nonce = format!(
            "{}{}",
            first.nonce,
            BASE64.encode(random_bytes(SERVER_NONCE_LEN))
        );
        let server_first = format!(
            "r={nonce},s={},i={}",
            BASE64.encode(credential.salt()),
            credential.iterations()
        );
        let message = server_first.clone().into_bytes();
        (
            Self {
                first,
                server_first,
                nonce,
                credential,
                genuine,
            },
            message,
        )
    }

    /// The mechanism (the credential's hash function) of this exchange.
    pub fn mechanism(&self) -> Mechanism {
        self.credential.mechanism()
    }

    /// The user name client-first gave.
    pub fn user(&self) -> &str {
        &self.first.user
    }

    /// Checks client-final (`c=…,r=…,p=…`).
    ///
    /// # Errors
    /// [`ScramError`] for a malformed message or a nonce that is not this exchange's.
    pub fn finish(&self, bytes: &[u8]) -> Result<Finish, ScramError> {
        let bad = |why| ScramError::Malformed {
            message: "client-final",
            why,
        };
        let text = std::str::from_utf8(bytes).map_err(|_| bad("it is not UTF-8"))?;
        let (without_proof, proof) = text
            .rsplit_once(",p=")
            .ok_or_else(|| bad("it has no p= proof"))?;
        let proof = BASE64
            .decode(proof)
            .map_err(|_| bad("the proof is not base64"))?;
        let mut fields = without_proof.split(',');
        let binding = fields
            .next()
            .and_then(|f| f.strip_prefix("c="))
            .ok_or_else(|| bad("it has no c= channel binding"))?;
        let nonce = fields
            .next()
            .and_then(|f| f.strip_prefix("r="))
            .ok_or_else(|| bad("it has no r= nonce"))?;
        if BASE64.decode(binding).ok().as_deref() != Some(self.first.gs2_header.as_bytes()) {
            return Err(bad("c= is not the client-first GS2 header"));
        }
        // librdkafka before 2.6.1 (Debian's kcat, most distributions' packages) puts its own
        // nonce once more in front of the exchange's (its #4895); Kafka before 4.0 accepted
        // that, so Ferry does: all of the exchange's nonce, fresh server part included,
        // must still follow exactly the client's.
        let doubled = format!("{}{}", self.first.nonce, self.nonce);
        if !constant_time_eq(nonce.as_bytes(), self.nonce.as_bytes())
            && !constant_time_eq(nonce.as_bytes(), doubled.as_bytes())
        {
            return Err(ScramError::NonceMismatch);
        }
        let auth_message = format!("{},{},{without_proof}", self.first.bare, self.server_first);
        if self.genuine
            && self
                .credential
                .verify_proof(auth_message.as_bytes(), &proof)
        {
            let signature = self.credential.server_signature(auth_message.as_bytes());
            Ok(Finish::Proved(
                format!("v={}", BASE64.encode(signature)).into_bytes(),
            ))
        } else {
            Ok(Finish::WrongProof)
        }
    }
}

/// A credential for a user without one: its salt is HMAC(key, mechanism ‖ user), the same
/// on every attempt and every instance over the store, with the default iteration count.
/// No password verifies against it.
pub fn fake_credential(mechanism: Mechanism, user: &str, key: &[u8]) -> ScramCredential {
    let seed = mechanism.hmac(key, format!("{}\0{user}", mechanism.name()).as_bytes());
    let salt = seed[..16].to_vec();
    let password = BASE64.encode(&seed[16..]);
    ScramCredential::with_salt(mechanism, &password, salt, crate::scram::DEFAULT_ITERATIONS)
}

/// A SCRAM `saslname`: `=2C` is `,` and `=3D` is `=`; any other `=` is malformed.
fn decode_saslname(name: &str) -> Option<String> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        match rest.get(at..at + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return None,
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scram::test_client::client_final;

    fn exchange(
        credential: Option<&ScramCredential>,
        user: &str,
    ) -> (ScramExchange, String, String) {
        let bare = format!("n={user},r=fyko+d2lbbFgONRv9qkxdawL");
        let first = ClientFirst::parse(format!("n,,{bare}").as_bytes()).unwrap();
        let (exchange, server_first) =
            ScramExchange::start(Mechanism::Sha256, first, credential, b"key");
        (exchange, bare, String::from_utf8(server_first).unwrap())
    }

    #[test]
    fn the_right_password_proves_and_the_wrong_one_does_not() {
        let credential = ScramCredential::new(Mechanism::Sha256, "pencil", 4096);
        let (x, bare, server_first) = exchange(Some(&credential), "user");
        assert!(server_first.starts_with("r=fyko+d2lbbFgONRv9qkxdawL"));
        let good = client_final(Mechanism::Sha256, "pencil", &bare, &server_first, None);
        let Finish::Proved(server_final) = x.finish(good.as_bytes()).unwrap() else {
            panic!("the proof is right");
        };
        assert!(server_final.starts_with(b"v="));
        let wrong = client_final(Mechanism::Sha256, "pencil!", &bare, &server_first, None);
        assert_eq!(x.finish(wrong.as_bytes()).unwrap(), Finish::WrongProof);
    }

    #[test]
    fn an_unknown_user_gets_a_stable_fake_salt_and_always_fails() {
        let (x, bare, first_answer) = exchange(None, "ghost");
        let (_, _, second_answer) = exchange(None, "ghost");
        let salt = |s: &str| s.split(',').nth(1).unwrap().to_owned();
        assert_eq!(salt(&first_answer), salt(&second_answer));
        assert_ne!(salt(&first_answer), salt(&exchange(None, "other").2));
        assert!(first_answer.ends_with(",i=4096"));
        let any = client_final(Mechanism::Sha256, "guess", &bare, &first_answer, None);
        assert_eq!(x.finish(any.as_bytes()).unwrap(), Finish::WrongProof);
    }

    #[test]
    fn a_nonce_that_is_not_the_exchanges_fails() {
        let credential = ScramCredential::new(Mechanism::Sha256, "pencil", 4096);
        let (x, bare, server_first) = exchange(Some(&credential), "user");
        let forged = server_first.replacen("r=fyko", "r=fykO", 1);
        let message = client_final(Mechanism::Sha256, "pencil", &bare, &forged, None);
        assert_eq!(x.finish(message.as_bytes()), Err(ScramError::NonceMismatch));
    }

    #[test]
    fn the_nonce_old_librdkafka_sends_with_the_client_part_twice_is_accepted() {
        let credential = ScramCredential::new(Mechanism::Sha256, "pencil", 4096);
        let (x, bare, server_first) = exchange(Some(&credential), "user");
        let nonce = server_first
            .split(',')
            .next()
            .unwrap()
            .strip_prefix("r=")
            .unwrap();
        let doubled = format!("fyko+d2lbbFgONRv9qkxdawL{nonce}");
        let message = client_final(
            Mechanism::Sha256,
            "pencil",
            &bare,
            &server_first,
            Some(&doubled),
        );
        assert!(matches!(
            x.clone().finish(message.as_bytes()),
            Ok(Finish::Proved(_))
        ));
        // Anything else in front is still a mismatch.
        let tripled = format!("fyko+d2lbbFgONRv9qkxdawL{doubled}");
        let message = client_final(
            Mechanism::Sha256,
            "pencil",
            &bare,
            &server_first,
            Some(&tripled),
        );
        assert_eq!(x.finish(message.as_bytes()), Err(ScramError::NonceMismatch));
    }

    #[test]
    fn malformed_messages_say_what_is_wrong() {
        let malformed = |bytes: &[u8]| ClientFirst::parse(bytes).unwrap_err().to_string();
        assert_eq!(
            malformed(b"n=user,r=abc"),
            "the SCRAM client-first message is malformed: it has no GS2 header"
        );
        assert_eq!(
            malformed(b"x,,n=user,r=abc"),
            "the SCRAM client-first message is malformed: the GS2 header's binding flag is not n, y or p"
        );
        assert_eq!(
            malformed(b"p=tls-unique,,n=user,r=abc"),
            "the SCRAM client-first message is malformed: channel binding is not supported"
        );
        assert_eq!(
            malformed(b"n,,n=us=er,r=abc"),
            "the SCRAM client-first message is malformed: the user name is badly escaped"
        );
        assert_eq!(
            malformed(b"n,,n=user"),
            "the SCRAM client-first message is malformed: it has no r= nonce"
        );
        assert_eq!(
            ClientFirst::parse(b"n,a=x=2Cy,n=x=2Cy,r=abc").unwrap().user,
            "x,y"
        );
        let (x, _, _) = exchange(None, "user");
        assert_eq!(
            x.finish(b"c=biws,r=abc").unwrap_err().to_string(),
            "the SCRAM client-final message is malformed: it has no p= proof"
        );
        assert_eq!(
            x.finish(b"c=eSws,r=abc,p=AAAA").unwrap_err().to_string(),
            "the SCRAM client-final message is malformed: c= is not the client-first GS2 header"
        );
    }
}
