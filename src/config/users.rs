//! `[[users]]`: who may connect to the fronts (AMQP and Kafka), with their credentials: a
//! RabbitMQ-format password hash and/or SCRAM credentials in Kafka's form. These seed the
//! user store at startup (see `docs/security.md`, "Users and credentials").

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
    /// The AMQP virtual hosts the user may open (Kafka clients use the first).
    #[serde(default = "default_vhosts")]
    pub vhosts: Vec<String>,
    /// Whether the user may connect only from a loopback address, like RabbitMQ's `guest`.
    #[serde(default)]
    pub loopback_only: bool,
    /// Whether the user may log in only over TLS (amqps, Kafka SSL/SASL_SSL); a login on a
    /// plaintext listener is refused.
    #[serde(default)]
    pub require_tls: bool,
}

/// The default virtual host.
pub const DEFAULT_VHOST: &str = "/";

fn default_vhosts() -> Vec<String> {
    vec![DEFAULT_VHOST.to_owned()]
}

/// The hash of the password `guest` that the default `guest` user ships with (made by
/// RabbitMQ for its own `guest` user).
pub const GUEST_PASSWORD_HASH: &str = "ZASDEfwPLhXM0KUkbGOfccSogyK5KTa288+2WO7UH7q+4kkQ";

/// The SCRAM-SHA-256 credential of the password `guest` that the default `guest` user
/// ships with.
pub const GUEST_SCRAM_SHA_256: &str = "salt=nCXlPbBN5aOdW574xc29pCtYwpHKGdW4URvK609sqqI=,stored_key=Kt8xsn/Yo8wC7/rfos3FPLAgaWCRHCCqdlGZX6CvpMA=,server_key=+eJjGMlpLtQZVsnHbA4vX7kFR800mkBm5K61Rpq1vrw=,iterations=4096";

/// The SCRAM-SHA-512 credential of the password `guest`.
pub const GUEST_SCRAM_SHA_512: &str = "salt=HurKBvytLlOElBRL9Cug4cc3noA8vFivsER1baHNizQ=,stored_key=zEMigg4VaFi++AsJCLc5S9eyPf0Gb07bzGKJLZlt6O8dDBbJ6R3xmlhi/bshHNjgjS17KvdZZQx9EAvbC+5VWg==,server_key=/Mp0t61/rXPdAym4ItuCpTPsJ+dtBAxDWueliCyTHHE/piLcudO420OvmD4X6QBj7K9yD3TnQiN6RVAGbZen0A==,iterations=4096";

/// The users when `[[users]]` is absent: `guest`/`guest`, from loopback only.
pub fn default_users() -> Vec<UserConfig> {
    vec![UserConfig {
        name: "guest".to_owned(),
        password_hash: Some(GUEST_PASSWORD_HASH.to_owned()),
        scram_sha_256: Some(GUEST_SCRAM_SHA_256.to_owned()),
        scram_sha_512: Some(GUEST_SCRAM_SHA_512.to_owned()),
        vhosts: default_vhosts(),
        loopback_only: true,
        require_tls: false,
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
