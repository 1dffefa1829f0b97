//! Password hashes in RabbitMQ's format (`rabbit_password_hashing_sha256`): base64 of a
//! 4-byte salt followed by SHA-256(salt ‖ password), so a hash made by
//! `rabbitmqctl hash_password` or `ferry hash-password` can be used as is.
//!
//! A leaf: it imports nothing of Ferry's, so the configuration can validate hashes.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use sha2::{Digest, Sha256};

/// Bytes of salt in a password hash.
const SALT_LEN: usize = 4;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
