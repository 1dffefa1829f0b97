//! SCRAM credentials (RFC 5802, RFC 7677) as Kafka stores them (KIP-84): a salt, an
//! iteration count, StoredKey = H(HMAC(SaltedPassword, "Client Key")) and ServerKey =
//! HMAC(SaltedPassword, "Server Key"). The password itself is never kept; a credential can
//! check a SCRAM client proof and, at the cost of one PBKDF2, a plaintext password (so a
//! user with only SCRAM credentials can still log in with SASL PLAIN). A credential is made
//! from a password, or from the SaltedPassword a client computed (Kafka's
//! AlterUserScramCredentials sends that, never the password).
//!
//! The text form is Kafka's, with base64 values:
//! `salt=…,stored_key=…,server_key=…,iterations=4096`.
//!
//! A leaf: it imports nothing of Ferry's, so the configuration can validate credentials.
//! [`exchange`] is the server side of a SCRAM exchange with these credentials.

pub mod exchange;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

/// The fewest PBKDF2 iterations a credential may have (RFC 7677's minimum, Kafka's too).
pub const MIN_ITERATIONS: u32 = 4096;

/// The most PBKDF2 iterations a credential set over Kafka's AlterUserScramCredentials may
/// have (Kafka's maximum, for both mechanisms).
pub const MAX_ITERATIONS: u32 = 16384;

/// The iterations `ferry hash-password` uses.
pub const DEFAULT_ITERATIONS: u32 = 4096;

/// Bytes of salt in a new credential.
const SALT_LEN: usize = 32;

/// A SCRAM hash function, named as SASL names the mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mechanism {
    /// `SCRAM-SHA-256` (RFC 7677).
    Sha256,
    /// `SCRAM-SHA-512`.
    Sha512,
}

impl Mechanism {
    /// Both mechanisms, in the order they are offered.
    pub const ALL: [Mechanism; 2] = [Mechanism::Sha256, Mechanism::Sha512];

    /// The SASL mechanism name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sha256 => "SCRAM-SHA-256",
            Self::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// The mechanism SASL calls `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Kafka's number for the mechanism (KIP-554's `ScramMechanism`): 1 for SHA-256, 2 for
    /// SHA-512.
    pub fn kafka_number(self) -> i8 {
        match self {
            Self::Sha256 => 1,
            Self::Sha512 => 2,
        }
    }

    /// The mechanism Kafka numbers `number` (0, Kafka's `UNKNOWN`, is none).
    pub fn from_kafka_number(number: i8) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.kafka_number() == number)
    }

    /// H(data).
    pub fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Self::Sha256 => Sha256::digest(data).to_vec(),
            Self::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// HMAC(key, data).
    pub fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        fn run<M: Mac + hmac::digest::KeyInit>(key: &[u8], data: &[u8]) -> Vec<u8> {
            let mut mac = <M as hmac::digest::KeyInit>::new_from_slice(key)
                .expect("HMAC takes keys of any length");
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
        match self {
            Self::Sha256 => run::<Hmac<Sha256>>(key, data),
            Self::Sha512 => run::<Hmac<Sha512>>(key, data),
        }
    }

    /// SaltedPassword = PBKDF2-HMAC(password, salt, iterations), one hash long.
    fn salted_password(self, password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            Self::Sha256 => {
                pbkdf2::pbkdf2_hmac_array::<Sha256, 32>(password.as_bytes(), salt, iterations)
                    .to_vec()
            }
            Self::Sha512 => {
                pbkdf2::pbkdf2_hmac_array::<Sha512, 64>(password.as_bytes(), salt, iterations)
                    .to_vec()
            }
        }
    }

    /// Bytes of one hash.
    fn len(self) -> usize {
        match self {
            Self::Sha256 => 32,
            Self::Sha512 => 64,
        }
    }
}

/// One user's credential for one SCRAM mechanism.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramCredential {
    mechanism: Mechanism,
    salt: Vec<u8>,
    iterations: u32,
    stored_key: Vec<u8>,
    server_key: Vec<u8>,
}

impl ScramCredential {
    /// The credential of `password` with a fresh random salt.
    pub fn new(mechanism: Mechanism, password: &str, iterations: u32) -> Self {
        Self::with_salt(mechanism, password, random_bytes(SALT_LEN), iterations)
    }

    /// The credential of `password` with `salt`.
    pub fn with_salt(mechanism: Mechanism, password: &str, salt: Vec<u8>, iterations: u32) -> Self {
        let salted = mechanism.salted_password(password, &salt, iterations);
        Self::derive(mechanism, salt, &salted, iterations)
    }

    /// The credential of a SaltedPassword a client computed (PBKDF2 of the password with
    /// `salt` and `iterations`), as Kafka's AlterUserScramCredentials carries it.
    ///
    /// # Errors
    /// A sentence saying what is wrong (never echoing the values): too few iterations, an
    /// empty salt, a salted password that is not one hash long.
    pub fn from_salted_password(
        mechanism: Mechanism,
        salt: Vec<u8>,
        salted_password: &[u8],
        iterations: u32,
    ) -> Result<Self, String> {
        check(
            mechanism,
            &salt,
            iterations,
            &[("salted password", salted_password)],
        )?;
        Ok(Self::derive(mechanism, salt, salted_password, iterations))
    }

    /// StoredKey = H(HMAC(SaltedPassword, "Client Key")) and ServerKey =
    /// HMAC(SaltedPassword, "Server Key") (RFC 5802 section 3).
    fn derive(mechanism: Mechanism, salt: Vec<u8>, salted: &[u8], iterations: u32) -> Self {
        let client_key = mechanism.hmac(salted, b"Client Key");
        Self {
            mechanism,
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted, b"Server Key"),
            salt,
            iterations,
        }
    }

    /// Parses Kafka's text form `salt=…,stored_key=…,server_key=…,iterations=…` (in any
    /// order) for `mechanism`.
    ///
    /// # Errors
    /// A sentence saying what is wrong with it (never echoing the values).
    pub fn parse(mechanism: Mechanism, text: &str) -> Result<Self, String> {
        let (mut salt, mut stored_key, mut server_key, mut iterations) = (None, None, None, None);
        for field in text.trim().split(',') {
            let (name, value) = field
                .split_once('=')
                .ok_or_else(|| "a field is not name=value".to_owned())?;
            let bytes = || {
                BASE64
                    .decode(value)
                    .map_err(|_| format!("{name} is not base64"))
            };
            match name {
                "salt" => salt = Some(bytes()?),
                "stored_key" => stored_key = Some(bytes()?),
                "server_key" => server_key = Some(bytes()?),
                "iterations" => {
                    iterations = Some(
                        value
                            .parse::<u32>()
                            .map_err(|_| "iterations is not a number".to_owned())?,
                    );
                }
                other => return Err(format!("'{other}' is not a SCRAM credential field")),
            }
        }
        let missing = |name: &str| {
            format!(
                "has no {name} (the form is salt=…,stored_key=…,server_key=…,iterations=…; make one with `ferry hash-password`)"
            )
        };
        let salt = salt.ok_or_else(|| missing("salt"))?;
        let stored_key = stored_key.ok_or_else(|| missing("stored_key"))?;
        let server_key = server_key.ok_or_else(|| missing("server_key"))?;
        let iterations = iterations.ok_or_else(|| missing("iterations"))?;
        check(
            mechanism,
            &salt,
            iterations,
            &[
                ("stored_key", &stored_key[..]),
                ("server_key", &server_key[..]),
            ],
        )?;
        Ok(Self {
            mechanism,
            salt,
            iterations,
            stored_key,
            server_key,
        })
    }

    /// The mechanism the credential is for.
    pub fn mechanism(&self) -> Mechanism {
        self.mechanism
    }

    /// The salt, sent to the client in server-first.
    pub fn salt(&self) -> &[u8] {
        &self.salt
    }

    /// The PBKDF2 iteration count, sent to the client in server-first.
    pub fn iterations(&self) -> u32 {
        self.iterations
    }

    /// Whether `password` is the one this credential was made from (one PBKDF2).
    pub fn verify_password(&self, password: &str) -> bool {
        let other = Self::with_salt(self.mechanism, password, self.salt.clone(), self.iterations);
        constant_time_eq(&other.stored_key, &self.stored_key)
    }

    /// Whether `proof` (ClientKey XOR ClientSignature) proves knowledge of the password for
    /// `auth_message` (RFC 5802 section 3).
    pub fn verify_proof(&self, auth_message: &[u8], proof: &[u8]) -> bool {
        let signature = self.mechanism.hmac(&self.stored_key, auth_message);
        if proof.len() != signature.len() {
            return false;
        }
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
        constant_time_eq(&self.mechanism.hash(&client_key), &self.stored_key)
    }

    /// ServerSignature = HMAC(ServerKey, AuthMessage), sent in server-final.
    pub fn server_signature(&self, auth_message: &[u8]) -> Vec<u8> {
        self.mechanism.hmac(&self.server_key, auth_message)
    }
}

impl std::fmt::Display for ScramCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "salt={},stored_key={},server_key={},iterations={}",
            BASE64.encode(&self.salt),
            BASE64.encode(&self.stored_key),
            BASE64.encode(&self.server_key),
            self.iterations
        )
    }
}

/// Why a credential of `mechanism` with `salt`, `iterations` and `keys` (each named, each
/// one hash long) cannot be used, if it cannot.
fn check(
    mechanism: Mechanism,
    salt: &[u8],
    iterations: u32,
    keys: &[(&str, &[u8])],
) -> Result<(), String> {
    if iterations < MIN_ITERATIONS {
        return Err(format!(
            "iterations {iterations} is below the minimum of {MIN_ITERATIONS}"
        ));
    }
    if salt.is_empty() {
        return Err("salt is empty".to_owned());
    }
    for (name, key) in keys {
        if key.len() != mechanism.len() {
            return Err(format!(
                "{name} is {} bytes, not the {} of {}",
                key.len(),
                mechanism.len(),
                mechanism.name()
            ));
        }
    }
    Ok(())
}

/// `len` bytes from the operating system's random source.
pub fn random_bytes(len: usize) -> Vec<u8> {
    let mut bytes = vec![0; len];
    getrandom::fill(&mut bytes).expect("the operating system provides random bytes");
    bytes
}

/// Whether `a == b`, in time that depends only on the lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A client's side of a SCRAM exchange, computed from the password as RFC 5802 section 3
/// says (not from a stored credential), for the tests of the server's side: this crate's
/// and the fronts' (which live in other crates, so it is compiled in, and hidden).
#[doc(hidden)]
pub mod test_client {
    use super::{BASE64, Mechanism};
    use base64::Engine as _;

    /// client-final proving `password` for `server_first`, after the client-first whose
    /// bare part (`n=user,r=nonce`) was `client_first_bare`; with the nonce server-first gave,
    /// or `nonce` instead.
    pub fn client_final(
        mechanism: Mechanism,
        password: &str,
        client_first_bare: &str,
        server_first: &str,
        nonce: Option<&str>,
    ) -> String {
        let fields: Vec<&str> = server_first.split(',').collect();
        let nonce = nonce.unwrap_or_else(|| fields[0].strip_prefix("r=").unwrap());
        let salt = BASE64
            .decode(fields[1].strip_prefix("s=").unwrap())
            .unwrap();
        let iterations = fields[2].strip_prefix("i=").unwrap().parse().unwrap();
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
        let salted = salted_password(mechanism, password, &salt, iterations);
        let client_key = mechanism.hmac(&salted, b"Client Key");
        let signature = mechanism.hmac(&mechanism.hash(&client_key), auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        format!("{without_proof},p={}", BASE64.encode(proof))
    }

    /// SaltedPassword = PBKDF2-HMAC(password, salt, iterations), as a client computes it.
    pub fn salted_password(
        mechanism: Mechanism,
        password: &str,
        salt: &[u8],
        iterations: u32,
    ) -> Vec<u8> {
        match mechanism {
            Mechanism::Sha256 => {
                pbkdf2::pbkdf2_hmac_array::<sha2::Sha256, 32>(password.as_bytes(), salt, iterations)
                    .to_vec()
            }
            Mechanism::Sha512 => {
                pbkdf2::pbkdf2_hmac_array::<sha2::Sha512, 64>(password.as_bytes(), salt, iterations)
                    .to_vec()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677 section 3's example: user `user`, password `pencil`, 4096 iterations.
    #[test]
    fn rfc_7677_example_proof_verifies_and_signs() {
        let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let credential = ScramCredential::with_salt(Mechanism::Sha256, "pencil", salt, 4096);
        let auth_message = "n=user,r=rOprNGfwEbeRWgbNEkqO,\
             r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,\
             c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        let proof = BASE64
            .decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
            .unwrap();
        assert!(credential.verify_proof(auth_message.as_bytes(), &proof));
        assert_eq!(
            BASE64.encode(credential.server_signature(auth_message.as_bytes())),
            "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
        let mut wrong = proof.clone();
        wrong[0] ^= 1;
        assert!(!credential.verify_proof(auth_message.as_bytes(), &wrong));
    }

    #[test]
    fn text_form_round_trips_and_verifies_the_password() {
        for mechanism in Mechanism::ALL {
            let credential = ScramCredential::new(mechanism, "s3cret", DEFAULT_ITERATIONS);
            let parsed = ScramCredential::parse(mechanism, &credential.to_string()).unwrap();
            assert_eq!(parsed, credential);
            assert!(parsed.verify_password("s3cret"));
            assert!(!parsed.verify_password("s3creT"));
        }
    }

    #[test]
    fn a_clients_salted_password_gives_the_passwords_credential() {
        for mechanism in Mechanism::ALL {
            let salt = b"salt".to_vec();
            let salted = test_client::salted_password(mechanism, "pencil", &salt, 8192);
            let credential =
                ScramCredential::from_salted_password(mechanism, salt.clone(), &salted, 8192)
                    .unwrap();
            assert_eq!(
                credential,
                ScramCredential::with_salt(mechanism, "pencil", salt, 8192)
            );
            assert!(credential.verify_password("pencil"));
        }
        let refused = |salt: &[u8], salted: &[u8], iterations| {
            ScramCredential::from_salted_password(
                Mechanism::Sha512,
                salt.to_vec(),
                salted,
                iterations,
            )
            .unwrap_err()
        };
        assert_eq!(
            refused(b"s", &[7; 64], 4095),
            "iterations 4095 is below the minimum of 4096"
        );
        assert_eq!(refused(b"", &[7; 64], 4096), "salt is empty");
        assert_eq!(
            refused(b"s", &[7; 32], 4096),
            "salted password is 32 bytes, not the 64 of SCRAM-SHA-512"
        );
    }

    #[test]
    fn kafka_numbers_the_mechanisms_1_and_2() {
        assert_eq!(Mechanism::from_kafka_number(1), Some(Mechanism::Sha256));
        assert_eq!(Mechanism::from_kafka_number(2), Some(Mechanism::Sha512));
        assert_eq!(Mechanism::from_kafka_number(0), None);
        assert_eq!(Mechanism::from_kafka_number(3), None);
        for mechanism in Mechanism::ALL {
            assert_eq!(
                Mechanism::from_kafka_number(mechanism.kafka_number()),
                Some(mechanism)
            );
        }
    }

    #[test]
    fn bad_credentials_say_why_without_echoing_values() {
        let good = ScramCredential::new(Mechanism::Sha256, "pw", 4096).to_string();
        assert!(
            ScramCredential::parse(Mechanism::Sha512, &good)
                .unwrap_err()
                .contains("not the 64 of SCRAM-SHA-512")
        );
        let few = good.replace("iterations=4096", "iterations=1000");
        assert_eq!(
            ScramCredential::parse(Mechanism::Sha256, &few).unwrap_err(),
            "iterations 1000 is below the minimum of 4096"
        );
        let error = ScramCredential::parse(Mechanism::Sha256, "hunter2").unwrap_err();
        assert_eq!(error, "a field is not name=value");
        assert!(
            ScramCredential::parse(Mechanism::Sha256, "salt=AAAA")
                .unwrap_err()
                .starts_with("has no stored_key")
        );
    }
}
