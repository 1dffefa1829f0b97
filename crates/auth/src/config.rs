//! `[[users]]`, authentication's own section of `ferry.toml`: who may connect to the fronts
//! (AMQP and Kafka), with their credentials (a RabbitMQ-format password hash and/or SCRAM
//! credentials in Kafka's form), their tags and their RabbitMQ permissions. These seed the
//! user store at startup, authoritative for the users they list (see `docs/security.md`,
//! "Users and credentials" and "Authorization").

use serde::Deserialize;

/// One `[[users]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    /// The login name.
    pub name: String,
    /// Base64 of a 4-byte salt and SHA-256(salt ‖ password), RabbitMQ's
    /// `rabbit_password_hashing_sha256` format: make one with `ferry hash-password` or
    /// `rabbitmqctl hash_password`. Plain passwords are never stored. A user needs this,
    /// `scram_sha_256` or `scram_sha_512` (any of them verifies a PLAIN login).
    #[serde(default)]
    pub password_hash: Option<String>,
    /// The SCRAM-SHA-256 credential, Kafka's form
    /// `salt=…,stored_key=…,server_key=…,iterations=…` (base64, iterations ≥ 4096), as
    /// `ferry hash-password` prints it; without it SCRAM-SHA-256 logins fail.
    #[serde(default)]
    pub scram_sha_256: Option<String>,
    /// The SCRAM-SHA-512 credential, in the same form as `scram_sha_256`.
    #[serde(default)]
    pub scram_sha_512: Option<String>,
    /// RabbitMQ's user tags (`administrator`, `monitoring`, `management`, `policymaker`,
    /// `impersonator` or any other word); the management API decides access by them.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Shorthand for full permissions (`.*` configure, write and read) on each listed
    /// virtual host. Absent: `["/"]` when `permissions` is empty, none otherwise.
    #[serde(default)]
    pub vhosts: Option<Vec<String>>,
    /// RabbitMQ permissions per virtual host (a vhost may not also be in `vhosts`).
    #[serde(default)]
    pub permissions: Vec<PermissionConfig>,
    /// RabbitMQ topic permissions per virtual host and topic exchange.
    #[serde(default)]
    pub topic_permissions: Vec<TopicPermissionConfig>,
    /// Whether the user may connect only from a loopback address, like RabbitMQ's `guest`.
    #[serde(default)]
    pub loopback_only: bool,
    /// Whether the user may log in only over TLS (amqps, Kafka SSL/SASL_SSL); a login on a
    /// plaintext listener is refused.
    #[serde(default)]
    pub require_tls: bool,
}

impl Default for UserConfig {
    /// A user without a name or credentials (`vhosts` absent), for struct updates.
    fn default() -> Self {
        Self {
            name: String::new(),
            password_hash: None,
            scram_sha_256: None,
            scram_sha_512: None,
            tags: Vec::new(),
            vhosts: None,
            permissions: Vec::new(),
            topic_permissions: Vec::new(),
            loopback_only: false,
            require_tls: false,
        }
    }
}

impl UserConfig {
    /// The virtual hosts `vhosts` grants full permissions on, the default applied.
    pub fn full_access_vhosts(&self) -> Vec<String> {
        match &self.vhosts {
            Some(vhosts) => vhosts.clone(),
            None if self.permissions.is_empty() => vec![DEFAULT_VHOST.to_owned()],
            None => Vec::new(),
        }
    }
}

/// One entry of a user's `permissions`: RabbitMQ's three regular expressions on one
/// virtual host (an unanchored match on a resource's name; "" matches none).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionConfig {
    /// The virtual host.
    pub vhost: String,
    /// Exchanges and queues the user may declare and delete.
    pub configure: String,
    /// Exchanges the user may publish to, queues and exchanges it may bind to.
    pub write: String,
    /// Queues the user may consume, get from and purge, exchanges it may bind from.
    pub read: String,
}

/// One entry of a user's `topic_permissions`: routing-key patterns on one topic exchange,
/// with `{username}` and `{vhost}` replaced by the connection's values.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicPermissionConfig {
    /// The virtual host.
    pub vhost: String,
    /// The topic exchange.
    pub exchange: String,
    /// Routing keys the user may publish with.
    pub write: String,
    /// Routing keys the user may bind queues and exchanges with.
    pub read: String,
}

/// The default virtual host.
pub const DEFAULT_VHOST: &str = "/";

/// The hash of the password `guest` that the default `guest` user ships with (made by
/// RabbitMQ for its own `guest` user).
pub const GUEST_PASSWORD_HASH: &str = "ZASDEfwPLhXM0KUkbGOfccSogyK5KTa288+2WO7UH7q+4kkQ";

/// The SCRAM-SHA-256 credential of the password `guest` that the default `guest` user
/// ships with.
pub const GUEST_SCRAM_SHA_256: &str = "salt=nCXlPbBN5aOdW574xc29pCtYwpHKGdW4URvK609sqqI=,stored_key=Kt8xsn/Yo8wC7/rfos3FPLAgaWCRHCCqdlGZX6CvpMA=,server_key=+eJjGMlpLtQZVsnHbA4vX7kFR800mkBm5K61Rpq1vrw=,iterations=4096";

/// The SCRAM-SHA-512 credential of the password `guest`.
pub const GUEST_SCRAM_SHA_512: &str = "salt=HurKBvytLlOElBRL9Cug4cc3noA8vFivsER1baHNizQ=,stored_key=zEMigg4VaFi++AsJCLc5S9eyPf0Gb07bzGKJLZlt6O8dDBbJ6R3xmlhi/bshHNjgjS17KvdZZQx9EAvbC+5VWg==,server_key=/Mp0t61/rXPdAym4ItuCpTPsJ+dtBAxDWueliCyTHHE/piLcudO420OvmD4X6QBj7K9yD3TnQiN6RVAGbZen0A==,iterations=4096";

/// The users when `[[users]]` is absent: `guest`/`guest`, tagged `administrator`, with
/// full permissions on `/`, from loopback only (RabbitMQ's default user).
pub fn default_users() -> Vec<UserConfig> {
    vec![UserConfig {
        name: "guest".to_owned(),
        password_hash: Some(GUEST_PASSWORD_HASH.to_owned()),
        scram_sha_256: Some(GUEST_SCRAM_SHA_256.to_owned()),
        scram_sha_512: Some(GUEST_SCRAM_SHA_512.to_owned()),
        tags: vec!["administrator".to_owned()],
        vhosts: Some(Vec::new()),
        permissions: vec![PermissionConfig {
            vhost: DEFAULT_VHOST.to_owned(),
            configure: ".*".to_owned(),
            write: ".*".to_owned(),
            read: ".*".to_owned(),
        }],
        loopback_only: true,
        ..UserConfig::default()
    }]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scram::{Mechanism, ScramCredential};

    #[test]
    fn the_guest_credentials_are_those_of_the_password_guest() {
        assert!(
            crate::password::PasswordHash::parse(GUEST_PASSWORD_HASH)
                .unwrap()
                .verify("guest")
        );
        for (mechanism, text) in [
            (Mechanism::Sha256, GUEST_SCRAM_SHA_256),
            (Mechanism::Sha512, GUEST_SCRAM_SHA_512),
        ] {
            let credential = ScramCredential::parse(mechanism, text).unwrap();
            assert!(credential.verify_password("guest"), "{mechanism:?}");
        }
    }
}
