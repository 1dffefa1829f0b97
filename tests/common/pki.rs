//! Certificates made when a test runs (rcgen), written as PEM files into a temporary
//! directory that goes when the [`Pki`] drops: a CA and certificates it signs, for servers
//! (by DNS name or IP) and clients (by common name). No key is ever committed.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use std::path::{Path, PathBuf};

/// A certificate authority and the directory its files are written to.
pub struct Pki {
    /// Holds `ca.pem` and every `NAME.pem` / `NAME.key`.
    dir: tempfile::TempDir,
    /// Signs what [`Pki::issue`] makes.
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    /// A new CA named `name`, its certificate in `ca.pem`.
    pub fn new(name: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("ferry-pki-")
            .tempdir()
            .unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        std::fs::write(dir.path().join("ca.pem"), cert.pem()).unwrap();
        Self {
            dir,
            issuer: Issuer::new(params, key),
        }
    }

    /// The directory of the files.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The CA's certificate file.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// Writes `FILE.pem` and `FILE.key`: a certificate with common name `cn` for the names
    /// (DNS names or IP addresses) `sans`, usable by servers and clients. Returns the two
    /// paths.
    pub fn issue(&self, file: &str, cn: &str, sans: &[&str]) -> (PathBuf, PathBuf) {
        let sans: Vec<String> = sans.iter().map(|s| (*s).to_owned()).collect();
        let mut params = CertificateParams::new(sans).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let (cert_file, key_file) = (
            self.dir.path().join(format!("{file}.pem")),
            self.dir.path().join(format!("{file}.key")),
        );
        std::fs::write(&cert_file, cert.pem()).unwrap();
        std::fs::write(&key_file, key.serialize_pem()).unwrap();
        (cert_file, key_file)
    }
}
