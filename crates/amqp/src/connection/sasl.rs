//! SASL responses of connection.start-ok: PLAIN and AMQPLAIN, the two mechanisms RabbitMQ
//! clients use with passwords, and EXTERNAL (the client certificate's name), offered only
//! when the connection has a verified client certificate, as RabbitMQ's
//! `rabbitmq_auth_mechanism_ssl` does.

use amq_protocol::types::parsing::parse_field_table;
use ferry_auth::peer::{CertificateNames, Peer};

/// The mechanisms offered without a client certificate, in connection.start's order.
const PASSWORD_MECHANISMS: &str = "PLAIN AMQPLAIN";

/// The mechanisms offered with a verified client certificate.
const ALL_MECHANISMS: &str = "EXTERNAL PLAIN AMQPLAIN";

/// The mechanisms connection.start offers `peer`.
pub(crate) fn mechanisms(peer: &Peer) -> &'static str {
    if peer.certificate().is_some() {
        ALL_MECHANISMS
    } else {
        PASSWORD_MECHANISMS
    }
}

/// What a SASL response logs in with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response<'a> {
    /// A name and password (PLAIN, AMQPLAIN).
    Password(Credentials),
    /// The connection's verified client certificate (EXTERNAL).
    External(&'a CertificateNames),
}

/// A login name and password taken from a SASL response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The login name.
    pub user: String,
    /// The password.
    pub password: String,
}

/// Why a response gives no credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SaslError {
    /// The client chose a mechanism not offered.
    #[error("authentication mechanism '{0}' is not offered; use one of {1}")]
    Mechanism(String, &'static str),
    /// The response does not have the mechanism's form.
    #[error("the {0} response is malformed")]
    Malformed(&'static str),
}

/// What `response` for `mechanism` logs in with, on `peer`'s connection.
///
/// # Errors
/// [`SaslError`] for a mechanism not offered to `peer` or a malformed response.
pub fn response<'a>(
    peer: &'a Peer,
    mechanism: &str,
    response: &[u8],
) -> Result<Response<'a>, SaslError> {
    match (mechanism, peer.certificate()) {
        // The response is an authorization identity, which RabbitMQ ignores too.
        ("EXTERNAL", Some(names)) => Ok(Response::External(names)),
        ("PLAIN" | "AMQPLAIN", _) => credentials(mechanism, response).map(Response::Password),
        (other, _) => Err(SaslError::Mechanism(other.to_owned(), mechanisms(peer))),
    }
}

/// Extracts credentials from `response` for PLAIN or AMQPLAIN.
fn credentials(mechanism: &str, response: &[u8]) -> Result<Credentials, SaslError> {
    match mechanism {
        // authzid NUL authcid NUL password; the authorization identity is ignored.
        "PLAIN" => {
            let mut parts = response.split(|b| *b == 0);
            let (Some(_), Some(user), Some(password), None) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return Err(SaslError::Malformed("PLAIN"));
            };
            Ok(Credentials {
                user: utf8(user, "PLAIN")?,
                password: utf8(password, "PLAIN")?,
            })
        }
        // A field table without its 4-byte length: LOGIN and PASSWORD.
        "AMQPLAIN" => {
            let mut framed = (response.len() as u32).to_be_bytes().to_vec();
            framed.extend_from_slice(response);
            let table = match parse_field_table(&framed[..]) {
                Ok(([], table)) => table,
                _ => return Err(SaslError::Malformed("AMQPLAIN")),
            };
            let field = |name: &str| {
                table
                    .inner()
                    .get(name)
                    .and_then(crate::state::topology::args::text)
                    .ok_or(SaslError::Malformed("AMQPLAIN"))
            };
            Ok(Credentials {
                user: field("LOGIN")?,
                password: field("PASSWORD")?,
            })
        }
        other => Err(SaslError::Mechanism(other.to_owned(), PASSWORD_MECHANISMS)),
    }
}

fn utf8(bytes: &[u8], mechanism: &'static str) -> Result<String, SaslError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| SaslError::Malformed(mechanism))
}

#[cfg(test)]
mod tests {
    use super::*;
    use amq_protocol::auth::{Credentials as ClientCredentials, SASLMechanism};

    fn expected() -> Credentials {
        Credentials {
            user: "guest".into(),
            password: "s3cret".into(),
        }
    }

    #[test]
    fn plain_and_amqplain_as_clients_send_them() {
        let client = ClientCredentials::new("guest".into(), "s3cret".into());
        for (mechanism, name) in [
            (SASLMechanism::Plain, "PLAIN"),
            (SASLMechanism::AMQPlain, "AMQPLAIN"),
        ] {
            let response = client.sasl_auth_string(mechanism);
            assert_eq!(credentials(name, response.as_bytes()).unwrap(), expected());
        }
    }

    #[test]
    fn malformed_responses_and_other_mechanisms_are_refused() {
        assert_eq!(
            credentials("PLAIN", b"guest").unwrap_err(),
            SaslError::Malformed("PLAIN")
        );
        assert_eq!(
            credentials("AMQPLAIN", b"\x05LOGIN").unwrap_err(),
            SaslError::Malformed("AMQPLAIN")
        );
    }

    #[test]
    fn external_is_offered_and_accepted_only_with_a_client_certificate() {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 5671));
        let plaintext = Peer::plaintext(addr);
        assert_eq!(mechanisms(&plaintext), "PLAIN AMQPLAIN");
        assert_eq!(
            response(&plaintext, "EXTERNAL", b"")
                .unwrap_err()
                .to_string(),
            "authentication mechanism 'EXTERNAL' is not offered; use one of PLAIN AMQPLAIN"
        );
        let names = CertificateNames {
            subject: "CN=alice".into(),
            common_name: Some("alice".into()),
            ..CertificateNames::default()
        };
        let with_certificate = Peer {
            addr,
            tls: Some(ferry_auth::peer::TlsPeer {
                certificate: Some(names.clone()),
            }),
        };
        assert_eq!(mechanisms(&with_certificate), "EXTERNAL PLAIN AMQPLAIN");
        assert_eq!(
            response(&with_certificate, "EXTERNAL", b"").unwrap(),
            Response::External(&names)
        );
        let no_certificate = Peer {
            addr,
            tls: Some(ferry_auth::peer::TlsPeer { certificate: None }),
        };
        assert!(response(&no_certificate, "EXTERNAL", b"").is_err());
    }
}
