//! `[[users]]`: who may connect to the fronts (AMQP and Kafka), with RabbitMQ-format
//! password hashes.

use serde::Deserialize;

/// One `[[users]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    /// The login name.
    pub name: String,
    /// Base64 of a 4-byte salt and SHA-256(salt ‖ password), RabbitMQ's
    /// `rabbit_password_hashing_sha256` format: make one with `ferry hash-password` or
    /// `rabbitmqctl hash_password`. Plain passwords are never stored.
    pub password_hash: String,
    /// The AMQP virtual hosts the user may open (Kafka clients use the first).
    #[serde(default = "default_vhosts")]
    pub vhosts: Vec<String>,
    /// Whether the user may connect only from a loopback address, like RabbitMQ's `guest`.
    #[serde(default)]
    pub loopback_only: bool,
}

/// The default virtual host.
pub const DEFAULT_VHOST: &str = "/";

fn default_vhosts() -> Vec<String> {
    vec![DEFAULT_VHOST.to_owned()]
}

/// The hash of the password `guest` that the default `guest` user ships with (made by
/// RabbitMQ for its own `guest` user).
pub const GUEST_PASSWORD_HASH: &str = "ZASDEfwPLhXM0KUkbGOfccSogyK5KTa288+2WO7UH7q+4kkQ";

/// The users when `[[users]]` is absent: `guest`/`guest`, from loopback only.
pub fn default_users() -> Vec<UserConfig> {
    vec![UserConfig {
        name: "guest".to_owned(),
        password_hash: GUEST_PASSWORD_HASH.to_owned(),
        vhosts: default_vhosts(),
        loopback_only: true,
    }]
}
