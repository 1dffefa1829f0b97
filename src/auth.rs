//! Users and authentication, shared by every front (AMQP SASL PLAIN/AMQPLAIN, Kafka SASL
//! PLAIN).
//!
//! Passwords are stored hashed in RabbitMQ's format (`rabbit_password_hashing_sha256`):
//! base64 of a 4-byte salt followed by SHA-256(salt ‖ password), so a hash made by
//! `rabbitmqctl hash_password` or `ferry hash-password` can be used as is. Like RabbitMQ's
//! `guest`, a user can be restricted to loopback connections.

use crate::config::UserConfig;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use sha2::{Digest, Sha256};
use std::net::IpAddr;

/// Bytes of salt in a password hash.
const SALT_LEN: usize = 4;

/// Why a login was refused; the message is safe to send to the client (it never says
/// whether the user exists).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// Unknown user or wrong password.
    #[error("login refused for user '{0}': invalid credentials")]
    InvalidCredentials(String),
    /// The user may only connect from loopback.
    #[error("user '{0}' can only connect via localhost")]
    LoopbackOnly(String),
    /// The user may not open this virtual host.
    #[error("access to vhost '{vhost}' refused for user '{user}'")]
    VhostRefused {
        /// The user.
        user: String,
        /// The virtual host asked for.
        vhost: String,
    },
}

/// A password hash in RabbitMQ's SHA-256 format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PasswordHash {
    salt: [u8; SALT_LEN],
    digest: [u8; 32],
}

impl PasswordHash {
    /// Hashes `password` with a random salt.
    pub fn new(password: &str) -> Self {
        let salt = fastrand::u32(..).to_be_bytes();
        Self {
            salt,
            digest: digest(&salt, password),
        }
    }

    /// Parses the base64 form.
    ///
    /// # Errors
    /// A sentence saying what is wrong with it.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bytes = BASE64
            .decode(text.trim())
            .map_err(|e| format!("is not base64 ({e})"))?;
        if bytes.len() != SALT_LEN + 32 {
            return Err(format!(
                "decodes to {} bytes, not the {} of a salted SHA-256 hash (make one with `ferry hash-password`)",
                bytes.len(),
                SALT_LEN + 32
            ));
        }
        let (salt, hash) = bytes.split_at(SALT_LEN);
        Ok(Self {
            salt: salt.try_into().expect("split at SALT_LEN"),
            digest: hash.try_into().expect("32 bytes remain"),
        })
    }

    /// Whether `password` matches (compared in constant time).
    pub fn verify(&self, password: &str) -> bool {
        let candidate = digest(&self.salt, password);
        candidate
            .iter()
            .zip(self.digest.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}

impl std::fmt::Display for PasswordHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut bytes = self.salt.to_vec();
        bytes.extend_from_slice(&self.digest);
        f.write_str(&BASE64.encode(bytes))
    }
}

fn digest(salt: &[u8], password: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(salt);
    h.update(password.as_bytes());
    h.finalize().into()
}

/// A user allowed to connect.
#[derive(Debug, Clone)]
pub struct User {
    /// The login name.
    pub name: String,
    hash: PasswordHash,
    /// The virtual hosts this user may open.
    pub vhosts: Vec<String>,
    /// Whether the user may connect only from a loopback address.
    pub loopback_only: bool,
}

impl User {
    /// Whether the user may open `vhost`.
    ///
    /// # Errors
    /// [`AuthError::VhostRefused`].
    pub fn check_vhost(&self, vhost: &str) -> Result<(), AuthError> {
        if self.vhosts.iter().any(|v| v == vhost) {
            Ok(())
        } else {
            Err(AuthError::VhostRefused {
                user: self.name.clone(),
                vhost: vhost.to_owned(),
            })
        }
    }
}

/// The users of a Ferry instance.
#[derive(Debug, Clone, Default)]
pub struct Users {
    users: Vec<User>,
}

impl Users {
    /// The users `[[users]]` declares.
    ///
    /// # Errors
    /// The key path of a password hash that does not parse (validation has checked it
    /// already, so this only fails for a config that skipped validation).
    pub fn from_config(users: &[UserConfig]) -> Result<Self, String> {
        let users = users
            .iter()
            .enumerate()
            .map(|(i, u)| {
                Ok(User {
                    name: u.name.clone(),
                    hash: PasswordHash::parse(&u.password_hash)
                        .map_err(|e| format!("users[{i}].password_hash: {e}"))?,
                    vhosts: u.vhosts.clone(),
                    loopback_only: u.loopback_only,
                })
            })
            .collect::<Result<_, String>>()?;
        Ok(Self { users })
    }

    /// Checks a login from `peer`.
    ///
    /// # Errors
    /// [`AuthError::InvalidCredentials`] for an unknown user or a wrong password,
    /// [`AuthError::LoopbackOnly`] for a loopback-only user connecting from elsewhere.
    pub fn authenticate(
        &self,
        name: &str,
        password: &str,
        peer: IpAddr,
    ) -> Result<&User, AuthError> {
        let user = self
            .users
            .iter()
            .find(|u| u.name == name && u.hash.verify(password))
            .ok_or_else(|| AuthError::InvalidCredentials(name.to_owned()))?;
        if user.loopback_only && !is_loopback(peer) {
            return Err(AuthError::LoopbackOnly(name.to_owned()));
        }
        Ok(user)
    }
}

fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users() -> Users {
        Users::from_config(&[
            UserConfig {
                name: "guest".into(),
                password_hash: PasswordHash::new("guest").to_string(),
                vhosts: vec!["/".into()],
                loopback_only: true,
            },
            UserConfig {
                name: "app".into(),
                password_hash: PasswordHash::new("s3cret").to_string(),
                vhosts: vec!["/".into(), "orders".into()],
                loopback_only: false,
            },
        ])
        .unwrap()
    }

    #[test]
    fn a_hash_exported_by_rabbitmq_verifies() {
        // The `guest` user's hash from `rabbitmqctl export_definitions` (RabbitMQ 3.10).
        let exported = "ZASDEfwPLhXM0KUkbGOfccSogyK5KTa288+2WO7UH7q+4kkQ";
        let h = PasswordHash::parse(exported).unwrap();
        assert!(h.verify("guest"));
        assert!(!h.verify("Guest"));
        assert_eq!(h.to_string(), exported);
    }

    #[test]
    fn hash_round_trips_and_verifies() {
        let h = PasswordHash::new("pw");
        let parsed = PasswordHash::parse(&h.to_string()).unwrap();
        assert!(parsed.verify("pw"));
        assert!(!parsed.verify("pW"));
    }

    #[test]
    fn bad_hashes_say_why() {
        assert!(
            PasswordHash::parse("not base64!")
                .unwrap_err()
                .contains("base64")
        );
        assert!(PasswordHash::parse("AAAA").unwrap_err().contains("bytes"));
    }

    #[test]
    fn loopback_only_user_is_refused_from_elsewhere() {
        let u = users();
        assert!(
            u.authenticate("guest", "guest", "127.0.0.1".parse().unwrap())
                .is_ok()
        );
        assert!(
            u.authenticate("guest", "guest", "::1".parse().unwrap())
                .is_ok()
        );
        assert_eq!(
            u.authenticate("guest", "guest", "10.0.0.5".parse().unwrap())
                .unwrap_err(),
            AuthError::LoopbackOnly("guest".into())
        );
        assert!(
            u.authenticate("app", "s3cret", "10.0.0.5".parse().unwrap())
                .is_ok()
        );
    }

    #[test]
    fn wrong_password_and_unknown_user_look_the_same() {
        let u = users();
        let local = "127.0.0.1".parse().unwrap();
        assert_eq!(
            u.authenticate("app", "nope", local)
                .unwrap_err()
                .to_string(),
            "login refused for user 'app': invalid credentials"
        );
        assert!(matches!(
            u.authenticate("ghost", "x", local),
            Err(AuthError::InvalidCredentials(_))
        ));
    }

    #[test]
    fn vhost_permissions() {
        let u = users();
        let app = u
            .authenticate("app", "s3cret", "127.0.0.1".parse().unwrap())
            .unwrap();
        assert!(app.check_vhost("orders").is_ok());
        assert!(app.check_vhost("billing").is_err());
    }
}
