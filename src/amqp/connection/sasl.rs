//! SASL responses of connection.start-ok: PLAIN and AMQPLAIN, the two mechanisms RabbitMQ
//! clients use with passwords.

use amq_protocol::types::parsing::parse_field_table;

/// The mechanisms Ferry offers, in connection.start's order.
pub const MECHANISMS: &str = "PLAIN AMQPLAIN";

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
    #[error("authentication mechanism '{0}' is not supported; use PLAIN or AMQPLAIN")]
    Mechanism(String),
    /// The response does not have the mechanism's form.
    #[error("the {0} response is malformed")]
    Malformed(&'static str),
}

/// Extracts credentials from `response` for `mechanism`.
///
/// # Errors
/// [`SaslError`] for another mechanism or a malformed response.
pub fn credentials(mechanism: &str, response: &[u8]) -> Result<Credentials, SaslError> {
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
                    .and_then(crate::amqp::topology::args::text)
                    .ok_or(SaslError::Malformed("AMQPLAIN"))
            };
            Ok(Credentials {
                user: field("LOGIN")?,
                password: field("PASSWORD")?,
            })
        }
        other => Err(SaslError::Mechanism(other.to_owned())),
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
        assert_eq!(
            credentials("EXTERNAL", b"").unwrap_err().to_string(),
            "authentication mechanism 'EXTERNAL' is not supported; use PLAIN or AMQPLAIN"
        );
    }
}
