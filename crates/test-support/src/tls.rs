//! Certificates made when the tests run (rcgen), never committed: certificate authorities,
//! a server certificate for `localhost` and `127.0.0.1`, client certificates (good, from
//! another CA, expired), written as PEM files into a test's directory; the `[tls]`
//! overrides that point a daemon at them; [`Pki`], a CA with a temporary directory of its
//! own for external brokers' certificates; and a rustls client for the raw TLS tests.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A certificate authority.
pub struct Authority {
    /// Its parameters (its subject names the certificates it issues).
    params: CertificateParams,
    /// Its signing key.
    key: KeyPair,
    /// Its certificate, PEM.
    pub pem: String,
}

/// A certificate and its key, PEM.
pub struct Issued {
    /// The certificate.
    pub cert_pem: String,
    /// The private key (PKCS#8).
    pub key_pem: String,
}

impl Authority {
    /// A new CA named `name`.
    pub fn new(name: &str) -> Self {
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().unwrap();
        let pem = params.self_signed(&key).unwrap().pem();
        Self { params, key, pem }
    }

    /// A server certificate for `localhost` and `127.0.0.1`.
    pub fn server(&self) -> Issued {
        self.issue("ferry-test-server", |p| {
            p.subject_alt_names = vec![san("localhost"), san("127.0.0.1")];
            p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        })
    }

    /// A client certificate with common name `cn` (organisation `Ferry Tests`).
    pub fn client(&self, cn: &str) -> Issued {
        self.issue(cn, |p| {
            p.distinguished_name
                .push(DnType::OrganizationName, "Ferry Tests");
            p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        })
    }

    /// A client certificate with common name `cn` that expired in 2001.
    pub fn expired_client(&self, cn: &str) -> Issued {
        self.issue(cn, |p| {
            p.not_before = rcgen::date_time_ymd(2000, 1, 1);
            p.not_after = rcgen::date_time_ymd(2001, 1, 1);
            p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        })
    }

    /// A certificate changed by `edit`, then given common name `cn` as the subject's last
    /// (most specific) RDN, signed by this CA.
    pub fn issue(&self, cn: &str, edit: impl FnOnce(&mut CertificateParams)) -> Issued {
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        edit(&mut params);
        params.distinguished_name.push(DnType::CommonName, cn);
        let key = KeyPair::generate().unwrap();
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).unwrap();
        Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

/// The `[tls]` files of a daemon: a CA (also the one client certificates must chain to)
/// and a server certificate it signed, in `dir`.
pub struct TlsFiles {
    /// The CA that signed the server certificate and verifies clients.
    pub ca: Authority,
    /// `dir/ca.pem`.
    pub ca_file: PathBuf,
    /// `dir/server.pem`.
    pub cert_file: PathBuf,
    /// `dir/server.key`.
    pub key_file: PathBuf,
}

impl TlsFiles {
    /// A fresh CA and server certificate, written into `dir`.
    pub fn new(dir: &Path) -> Self {
        let files = Self {
            ca: Authority::new("Ferry Test CA"),
            ca_file: dir.join("ca.pem"),
            cert_file: dir.join("server.pem"),
            key_file: dir.join("server.key"),
        };
        files.install(&files.ca);
        files
    }

    /// Replaces the three files with a server certificate of `ca` (and `ca` as the client
    /// CA), key first so that a reload in between sees a mismatch at worst, never a key
    /// older than its certificate.
    pub fn install(&self, ca: &Authority) {
        let server = ca.server();
        write_atomically(&self.ca_file, &ca.pem);
        write_atomically(&self.key_file, &server.key_pem);
        write_atomically(&self.cert_file, &server.cert_pem);
    }

    /// The environment overrides pointing `[tls]` at these files.
    pub fn env(&self) -> Vec<(String, String)> {
        [
            ("FERRY__TLS__CERT_FILE", &self.cert_file),
            ("FERRY__TLS__KEY_FILE", &self.key_file),
            ("FERRY__TLS__CA_FILE", &self.ca_file),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_str().unwrap().to_owned()))
        .collect()
    }
}

/// A CA whose files live in a temporary directory that goes when the [`Pki`] drops:
/// `ca.pem` and every `NAME.pem` / `NAME.key` it issues (the layout
/// `scripts/rabbitmq-node.sh --tls` reads).
pub struct Pki {
    /// Holds the files.
    dir: tempfile::TempDir,
    /// Signs what [`Pki::issue`] makes.
    pub ca: Authority,
}

impl Pki {
    /// A new CA named `name`, its certificate in `ca.pem`.
    pub fn new(name: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("ferry-pki-")
            .tempdir()
            .unwrap();
        let ca = Authority::new(name);
        std::fs::write(dir.path().join("ca.pem"), &ca.pem).unwrap();
        Self { dir, ca }
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
        let issued = self.ca.issue(cn, |p| {
            p.subject_alt_names = sans.iter().map(|s| san(s)).collect();
            p.extended_key_usages = vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ];
        });
        write_pair(self.dir(), file, &issued)
    }
}

/// `name` as a subject alternative name: an IP address, else a DNS name.
fn san(name: &str) -> SanType {
    match name.parse::<IpAddr>() {
        Ok(ip) => SanType::IpAddress(ip),
        Err(_) => SanType::DnsName(name.try_into().unwrap()),
    }
}

/// Writes `text` to `path` through a temporary file and a rename, as certificate tooling
/// does, so a reader sees the old file or the new one.
pub fn write_atomically(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Writes `issued` as `dir/NAME.pem` and `dir/NAME.key`; returns both paths.
pub fn write_pair(dir: &Path, name: &str, issued: &Issued) -> (PathBuf, PathBuf) {
    let (cert, key) = (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}.key")),
    );
    std::fs::write(&cert, &issued.cert_pem).unwrap();
    std::fs::write(&key, &issued.key_pem).unwrap();
    (cert, key)
}

/// A rustls client configuration trusting `ca_pem`, presenting `identity` when given.
pub fn client_config(ca_pem: &str, identity: Option<&Issued>) -> Arc<rustls::ClientConfig> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(ca.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match identity {
        None => builder.with_no_client_auth(),
        Some(id) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_slice(id.cert_pem.as_bytes()).unwrap()],
                PrivateKeyDer::from_pem_slice(id.key_pem.as_bytes()).unwrap(),
            )
            .unwrap(),
    };
    Arc::new(config)
}

/// Connects to 127.0.0.1:`port` and runs a TLS handshake with `config`. Under TLS 1.3 a
/// refused client certificate shows only on the first read after this.
pub async fn handshake(
    port: u16,
    config: Arc<rustls::ClientConfig>,
) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
    tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
}
