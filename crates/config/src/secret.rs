//! Secrets inside configuration values, and how they are shown: a broker URI's password and
//! librdkafka properties that hold passwords or keys never appear in logs, `/readyz`,
//! errors, `ferry validate` output or `Debug` output. [`AmqpUri`] and [`KafkaProperties`]
//! carry such values; their `Debug` (and [`AmqpUri::redacted`]) replace the secret with
//! [`REDACTED`], and only the code that connects asks for the real value.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Deref;

/// What a secret is shown as.
pub const REDACTED: &str = "***";

/// An AMQP URI as configured (`amqp://user:password@host:port/vhost`), whose password is
/// shown as [`REDACTED`] everywhere but where Ferry connects.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct AmqpUri(String);

impl AmqpUri {
    /// The URI with its password, for connecting only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The URI with its password replaced by [`REDACTED`], for logs, `/readyz` and errors.
    pub fn redacted(&self) -> String {
        redacted_uri(&self.0)
    }
}

impl From<String> for AmqpUri {
    fn from(uri: String) -> Self {
        Self(uri)
    }
}

impl From<&str> for AmqpUri {
    fn from(uri: &str) -> Self {
        Self(uri.to_owned())
    }
}

impl fmt::Debug for AmqpUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.redacted())
    }
}

/// `uri` with the password of its user information replaced by [`REDACTED`]. Everything
/// between the first `:` after the scheme's `//` and the *last* `@` counts as the
/// password, so one that contains an unescaped `@` is hidden whole.
pub fn redacted_uri(uri: &str) -> String {
    let Some((scheme, rest)) = uri.split_once("://") else {
        return uri.to_owned();
    };
    match rest.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:{REDACTED}@{host}"),
            None => uri.to_owned(),
        },
        None => uri.to_owned(),
    }
}

/// Extra librdkafka properties as configured; `Debug` shows the values of
/// [secret ones](is_secret_property) as [`REDACTED`].
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct KafkaProperties(BTreeMap<String, String>);

impl Deref for KafkaProperties {
    type Target = BTreeMap<String, String>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl From<BTreeMap<String, String>> for KafkaProperties {
    fn from(properties: BTreeMap<String, String>) -> Self {
        Self(properties)
    }
}

impl fmt::Debug for KafkaProperties {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(k, v)| {
                let shown = if is_secret_property(k) {
                    REDACTED
                } else {
                    v.as_str()
                };
                (k, shown)
            }))
            .finish()
    }
}

/// Whether the librdkafka property `name` holds a secret: a password (`sasl.password`,
/// `ssl.key.password`, `ssl.keystore.password`), a key in PEM (`ssl.key.pem`), a client
/// secret or a login configuration (`sasl.oauthbearer.client.secret`,
/// `sasl.oauthbearer.config`).
pub fn is_secret_property(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name.contains("password")
        || name.contains("secret")
        || name.contains("key.pem")
        || name == "sasl.oauthbearer.config"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacted_uris_keep_the_user_and_hide_the_password() {
        assert_eq!(
            redacted_uri("amqp://bob:secret@host:5672/%2f"),
            "amqp://bob:***@host:5672/%2f"
        );
        assert_eq!(
            redacted_uri("amqps://bob:p@ss@host/%2f"),
            "amqps://bob:***@host/%2f"
        );
        assert_eq!(redacted_uri("amqp://host/%2f"), "amqp://host/%2f");
        assert_eq!(redacted_uri("amqp://bob@host/%2f"), "amqp://bob@host/%2f");
    }

    #[test]
    fn debug_hides_the_password_and_secret_properties() {
        let uri = AmqpUri::from("amqps://bob:hunter2@host/%2f");
        assert_eq!(format!("{uri:?}"), "\"amqps://bob:***@host/%2f\"");
        let properties = KafkaProperties::from(BTreeMap::from([
            ("sasl.password".to_owned(), "hunter2".to_owned()),
            ("ssl.key.pem".to_owned(), "-----BEGIN".to_owned()),
            ("client.id".to_owned(), "ferry".to_owned()),
        ]));
        let shown = format!("{properties:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("BEGIN"),
            "{shown}"
        );
        assert!(shown.contains("\"client.id\": \"ferry\""), "{shown}");
    }
}
