//! A user: login name, credentials (a RabbitMQ-format password hash and/or SCRAM
//! credentials), the virtual hosts it may open and the restrictions on where it may log in
//! from — as `[[users]]` declares it and as the user store keeps it.

use crate::config::UserConfig;
use crate::password::PasswordHash;
use crate::scram::{Mechanism, ScramCredential};

/// The version of a stored user record's layout (the first element of its tuple).
const RECORD_VERSION: i64 = 1;

/// Why a user record cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {reason}")]
pub struct BadUser {
    /// Where the record came from (`users[2].scram_sha_256`, or the user's store key).
    pub key: String,
    /// What is wrong with it.
    pub reason: String,
}

/// A user allowed to connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// The login name.
    pub name: String,
    /// The RabbitMQ-format hash of the password, if the user has one.
    pub password_hash: Option<PasswordHash>,
    /// The SCRAM-SHA-256 credential, if the user has one.
    pub scram_sha_256: Option<ScramCredential>,
    /// The SCRAM-SHA-512 credential, if the user has one.
    pub scram_sha_512: Option<ScramCredential>,
    /// The virtual hosts this user may open (Kafka clients use the first).
    pub vhosts: Vec<String>,
    /// Whether the user may connect only from a loopback address.
    pub loopback_only: bool,
    /// Whether the user may log in only over TLS.
    pub require_tls: bool,
}

impl User {
    /// The user `[[users]]` entry `index` declares.
    ///
    /// # Errors
    /// [`BadUser`] naming the key of a credential that does not parse (validation checks
    /// them first, so this only fails for a config that skipped validation).
    pub fn from_config(index: usize, config: &UserConfig) -> Result<Self, BadUser> {
        let key = |field: &str| format!("users[{index}].{field}");
        Self::from_texts(
            &config.name,
            [
                config.password_hash.as_deref(),
                config.scram_sha_256.as_deref(),
                config.scram_sha_512.as_deref(),
            ],
            [
                key("password_hash"),
                key("scram_sha_256"),
                key("scram_sha_512"),
            ],
        )
        .map(|user| Self {
            vhosts: config.vhosts.clone(),
            loopback_only: config.loopback_only,
            require_tls: config.require_tls,
            ..user
        })
    }

    /// A user with credentials in their text forms (password hash, SCRAM-SHA-256,
    /// SCRAM-SHA-512), each named by `keys` in errors; no vhosts and no restrictions.
    fn from_texts(
        name: &str,
        texts: [Option<&str>; 3],
        keys: [String; 3],
    ) -> Result<Self, BadUser> {
        let [hash, sha256, sha512] = texts;
        let [hash_key, sha256_key, sha512_key] = keys;
        let bad = |key: String| move |reason: String| BadUser { key, reason };
        let scram = |mechanism, text: Option<&str>, key: String| {
            text.map(|t| ScramCredential::parse(mechanism, t).map_err(bad(key)))
                .transpose()
        };
        Ok(Self {
            name: name.to_owned(),
            password_hash: hash
                .map(|h| PasswordHash::parse(h).map_err(bad(hash_key)))
                .transpose()?,
            scram_sha_256: scram(Mechanism::Sha256, sha256, sha256_key)?,
            scram_sha_512: scram(Mechanism::Sha512, sha512, sha512_key)?,
            vhosts: Vec::new(),
            loopback_only: false,
            require_tls: false,
        })
    }

    /// Whether `password` is the user's: any credential the user has may verify it (the
    /// password hash first; a SCRAM credential costs one PBKDF2).
    pub fn verify_password(&self, password: &str) -> bool {
        self.password_hash
            .as_ref()
            .is_some_and(|h| h.verify(password))
            || [&self.scram_sha_256, &self.scram_sha_512]
                .into_iter()
                .flatten()
                .any(|c| c.verify_password(password))
    }

    /// The user's credential for `mechanism`, if it has one.
    pub fn scram(&self, mechanism: Mechanism) -> Option<&ScramCredential> {
        match mechanism {
            Mechanism::Sha256 => self.scram_sha_256.as_ref(),
            Mechanism::Sha512 => self.scram_sha_512.as_ref(),
        }
    }

    /// Whether the user may open `vhost`.
    ///
    /// # Errors
    /// [`super::AuthError::VhostRefused`].
    pub fn check_vhost(&self, vhost: &str) -> Result<(), super::AuthError> {
        if self.vhosts.iter().any(|v| v == vhost) {
            Ok(())
        } else {
            Err(super::AuthError::VhostRefused {
                user: self.name.clone(),
                vhost: vhost.to_owned(),
            })
        }
    }

    /// The stored form: the tuple `(1, password_hash, scram_sha_256, scram_sha_512,
    /// (vhost, …), loopback_only, require_tls)`, credentials in their text forms or nil.
    pub fn encode(&self) -> Vec<u8> {
        let text = |c: &Option<ScramCredential>| c.as_ref().map(ToString::to_string);
        foundationdb_tuple::pack(&(
            RECORD_VERSION,
            self.password_hash.as_ref().map(ToString::to_string),
            text(&self.scram_sha_256),
            text(&self.scram_sha_512),
            self.vhosts.clone(),
            self.loopback_only,
            self.require_tls,
        ))
    }

    /// The user `name` from its stored form.
    ///
    /// # Errors
    /// [`BadUser`] when the bytes are not a user record of this version.
    pub fn decode(name: &str, bytes: &[u8]) -> Result<Self, BadUser> {
        type Record = (
            i64,
            Option<String>,
            Option<String>,
            Option<String>,
            Vec<String>,
            bool,
            bool,
        );
        let key = format!("user '{name}' in the store");
        let (version, hash, sha256, sha512, vhosts, loopback_only, require_tls): Record =
            foundationdb_tuple::unpack(bytes).map_err(|e| BadUser {
                key: key.clone(),
                reason: format!("is not a user record ({e})"),
            })?;
        if version != RECORD_VERSION {
            return Err(BadUser {
                key,
                reason: format!("has record version {version}, this ferry reads {RECORD_VERSION}"),
            });
        }
        let user = Self::from_texts(
            name,
            [hash.as_deref(), sha256.as_deref(), sha512.as_deref()],
            [key.clone(), key.clone(), key],
        )?;
        Ok(Self {
            vhosts,
            loopback_only,
            require_tls,
            ..user
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> UserConfig {
        UserConfig {
            name: "app".into(),
            password_hash: None,
            scram_sha_256: Some(ScramCredential::new(Mechanism::Sha256, "pw", 4096).to_string()),
            scram_sha_512: None,
            vhosts: vec!["/".into(), "orders".into()],
            loopback_only: false,
            require_tls: true,
        }
    }

    #[test]
    fn a_scram_credential_alone_verifies_a_plain_password() {
        let user = User::from_config(0, &config()).unwrap();
        assert!(user.verify_password("pw"));
        assert!(!user.verify_password("pW"));
        assert!(user.scram(Mechanism::Sha256).is_some());
        assert!(user.scram(Mechanism::Sha512).is_none());
    }

    #[test]
    fn the_stored_form_round_trips() {
        let mut c = config();
        c.password_hash = Some(PasswordHash::new("pw").to_string());
        let user = User::from_config(0, &c).unwrap();
        assert_eq!(User::decode("app", &user.encode()).unwrap(), user);
        assert!(
            User::decode("app", b"junk")
                .unwrap_err()
                .to_string()
                .starts_with("user 'app' in the store: is not a user record")
        );
    }

    #[test]
    fn a_bad_credential_is_named_by_its_key() {
        let mut c = config();
        c.scram_sha_512 = Some("salt=AAAA".into());
        assert_eq!(
            User::from_config(3, &c).unwrap_err().key,
            "users[3].scram_sha_512"
        );
    }
}
