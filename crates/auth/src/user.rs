//! A user: login name, credentials (a RabbitMQ-format password hash and/or SCRAM
//! credentials), its tags and the restrictions on where it may log in from — as
//! `[[users]]` declares it and as the user store keeps it. What it may do in each virtual
//! host is kept apart, as its permissions ([`crate::permissions`]).

use crate::UserConfig;
use crate::password::PasswordHash;
use crate::scram::{Mechanism, ScramCredential};

/// The version of a stored user record's layout (the first element of its tuple).
const RECORD_VERSION: i64 = 2;

/// The first layout, which carried the user's virtual hosts instead of tags (still read).
const RECORD_VERSION_1: i64 = 1;

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
    /// RabbitMQ's user tags (`administrator`, `monitoring`, `management`, `policymaker`,
    /// `impersonator` or any other word), sorted and without duplicates: see
    /// [`User::set_tags`].
    pub tags: Vec<String>,
    /// Whether the user may connect only from a loopback address.
    pub loopback_only: bool,
    /// Whether the user may log in only over TLS.
    pub require_tls: bool,
}

impl User {
    /// User `name` with no credentials, no tags and no restrictions.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            password_hash: None,
            scram_sha_256: None,
            scram_sha_512: None,
            tags: Vec::new(),
            loopback_only: false,
            require_tls: false,
        }
    }

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
        .map(|user| {
            Self {
                loopback_only: config.loopback_only,
                require_tls: config.require_tls,
                ..user
            }
            .with_tags(config.tags.iter().cloned())
        })
    }

    /// The user with `tags`, kept as given, sorted and without duplicates.
    pub fn with_tags(mut self, tags: impl IntoIterator<Item = String>) -> Self {
        self.set_tags(tags);
        self
    }

    /// Replaces the user's tags with `tags`, kept as given, sorted and without duplicates.
    pub fn set_tags(&mut self, tags: impl IntoIterator<Item = String>) {
        let mut tags: Vec<String> = tags.into_iter().collect();
        tags.sort();
        tags.dedup();
        self.tags = tags;
    }

    /// Whether the user has tag `tag`.
    pub fn has_tag(&self, tag: &str) -> bool {
        self.tags.iter().any(|t| t == tag)
    }

    /// A user with credentials in their text forms (password hash, SCRAM-SHA-256,
    /// SCRAM-SHA-512), each named by `keys` in errors; no tags and no restrictions.
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
            password_hash: hash
                .map(|h| PasswordHash::parse(h).map_err(bad(hash_key)))
                .transpose()?,
            scram_sha_256: scram(Mechanism::Sha256, sha256, sha256_key)?,
            scram_sha_512: scram(Mechanism::Sha512, sha512, sha512_key)?,
            ..Self::new(name)
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

    /// Sets the user's credential for `mechanism` (`None`: removes it); returns the one it
    /// replaces.
    pub fn set_scram(
        &mut self,
        mechanism: Mechanism,
        credential: Option<ScramCredential>,
    ) -> Option<ScramCredential> {
        let slot = match mechanism {
            Mechanism::Sha256 => &mut self.scram_sha_256,
            Mechanism::Sha512 => &mut self.scram_sha_512,
        };
        std::mem::replace(slot, credential)
    }

    /// The stored form: the tuple `(2, password_hash, scram_sha_256, scram_sha_512,
    /// loopback_only, require_tls, (tag, …))`, credentials in their text forms or nil.
    pub fn encode(&self) -> Vec<u8> {
        let text = |c: &Option<ScramCredential>| c.as_ref().map(ToString::to_string);
        let mut tags = self.tags.clone();
        tags.sort();
        tags.dedup();
        foundationdb_tuple::pack(&(
            RECORD_VERSION,
            self.password_hash.as_ref().map(ToString::to_string),
            text(&self.scram_sha_256),
            text(&self.scram_sha_512),
            self.loopback_only,
            self.require_tls,
            tags,
        ))
    }

    /// The user `name` from its stored form (either version).
    ///
    /// # Errors
    /// [`BadUser`] when the bytes are not a user record this ferry reads.
    pub fn decode(name: &str, bytes: &[u8]) -> Result<Self, BadUser> {
        Self::decode_stored(name, bytes).map(|stored| stored.user)
    }

    /// The user `name` from its stored form, with the virtual hosts a version-1 record
    /// granted (which the store turns into permissions).
    ///
    /// # Errors
    /// [`BadUser`] when the bytes are not a user record this ferry reads.
    pub fn decode_stored(name: &str, bytes: &[u8]) -> Result<StoredUser, BadUser> {
        type Version1 = (
            i64,
            Option<String>,
            Option<String>,
            Option<String>,
            Vec<String>,
            bool,
            bool,
        );
        type Version2 = (
            i64,
            Option<String>,
            Option<String>,
            Option<String>,
            bool,
            bool,
            Vec<String>,
        );
        let key = format!("user '{name}' in the store");
        // The layouts differ in their fifth element (a boolean, a tuple of vhosts).
        let (version, hash, sha256, sha512, loopback_only, require_tls, tags, vhosts) =
            match foundationdb_tuple::unpack::<Version2>(bytes) {
                Ok((v, h, s256, s512, loopback, tls, tags)) => {
                    (v, h, s256, s512, loopback, tls, tags, None)
                }
                Err(_) => {
                    let (v, h, s256, s512, vhosts, loopback, tls): Version1 =
                        foundationdb_tuple::unpack(bytes).map_err(|e| BadUser {
                            key: key.clone(),
                            reason: format!("is not a user record ({e})"),
                        })?;
                    (v, h, s256, s512, loopback, tls, Vec::new(), Some(vhosts))
                }
            };
        let expected = if vhosts.is_some() {
            RECORD_VERSION_1
        } else {
            RECORD_VERSION
        };
        if version != expected {
            return Err(BadUser {
                key,
                reason: format!(
                    "has record version {version}, this ferry reads {RECORD_VERSION_1} and {RECORD_VERSION}"
                ),
            });
        }
        let user = Self::from_texts(
            name,
            [hash.as_deref(), sha256.as_deref(), sha512.as_deref()],
            [key.clone(), key.clone(), key],
        )?;
        Ok(StoredUser {
            user: Self {
                loopback_only,
                require_tls,
                ..user
            }
            .with_tags(tags),
            version_1_vhosts: vhosts,
        })
    }
}

/// A user as read from the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredUser {
    /// The user.
    pub user: User,
    /// For a version-1 record, the virtual hosts it granted (full permissions on each).
    pub version_1_vhosts: Option<Vec<String>>,
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
            tags: vec![
                "monitoring".into(),
                "administrator".into(),
                "monitoring".into(),
            ],
            loopback_only: false,
            require_tls: true,
            ..UserConfig::default()
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
    fn a_scram_credential_is_set_and_removed_by_mechanism() {
        let mut user = User::new("kafka-made");
        assert!(!user.verify_password("pw") && user.tags.is_empty());
        let credential = ScramCredential::new(Mechanism::Sha512, "pw", 4096);
        assert_eq!(
            user.set_scram(Mechanism::Sha512, Some(credential.clone())),
            None
        );
        assert!(user.verify_password("pw") && user.scram(Mechanism::Sha256).is_none());
        assert_eq!(user.set_scram(Mechanism::Sha512, None), Some(credential));
        assert_eq!(user, User::new("kafka-made"));
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
    fn tags_are_kept_as_given_sorted_and_without_duplicates() {
        let user = User::from_config(0, &config()).unwrap();
        assert_eq!(user.tags, ["administrator", "monitoring"]);
        assert!(user.has_tag("administrator") && !user.has_tag("management"));
        let odd = user.with_tags(["Custom Tag".to_owned(), "impersonator".to_owned()]);
        assert_eq!(odd.tags, ["Custom Tag", "impersonator"]);
    }

    #[test]
    fn a_version_1_record_is_read_with_the_vhosts_it_granted() {
        let hash = PasswordHash::new("pw").to_string();
        let version_1 = foundationdb_tuple::pack(&(
            1_i64,
            Some(hash.clone()),
            None::<String>,
            None::<String>,
            vec!["/".to_owned(), "orders".to_owned()],
            true,
            false,
        ));
        let stored = User::decode_stored("old", &version_1).unwrap();
        assert!(stored.user.verify_password("pw"));
        assert!(stored.user.loopback_only && !stored.user.require_tls);
        assert!(stored.user.tags.is_empty());
        assert_eq!(
            stored.version_1_vhosts,
            Some(vec!["/".to_owned(), "orders".to_owned()])
        );
        let rewritten = User::decode_stored("old", &stored.user.encode()).unwrap();
        assert_eq!(rewritten.user, stored.user);
        assert_eq!(rewritten.version_1_vhosts, None);
        let future = foundationdb_tuple::pack(&(
            3_i64,
            Some(hash),
            None::<String>,
            None::<String>,
            false,
            false,
            Vec::<String>::new(),
        ));
        assert_eq!(
            User::decode("new", &future).unwrap_err().reason,
            "has record version 3, this ferry reads 1 and 2"
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
