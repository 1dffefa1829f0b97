//! Building rustls' server configuration from `[tls]`: the certificate chain and key, the
//! client verifier (`tls.verify_peer` against `tls.ca_file`) and the protocol versions, with
//! the `ring` crypto provider. Every failure names the file and the key that set it.

use crate::TlsConfig;
use crate::config::{CA_FILE_KEY, CERT_FILE_KEY, KEY_FILE_KEY, TlsVersion, VerifyPeer};
use rustls::RootCertStore;
use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why `[tls]` cannot be turned into a server configuration. Never shows key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsSetupError {
    /// A file could not be read or holds no usable PEM item.
    #[error("{key}: cannot use '{}': {reason}", .path.display())]
    File {
        /// The config key naming the file.
        key: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The key does not belong to the certificate, or rustls refused the combination.
    #[error("{CERT_FILE_KEY} '{}' and {KEY_FILE_KEY} '{}' cannot be used together: {reason}", .cert.display(), .key.display())]
    Mismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// rustls' reason.
        reason: String,
    },
    /// The client verifier could not be built from `tls.ca_file`.
    #[error("{CA_FILE_KEY}: cannot verify clients with '{}': {reason}", .path.display())]
    Verifier {
        /// The CA file.
        path: PathBuf,
        /// rustls' reason.
        reason: String,
    },
}

/// The crypto provider of every TLS connection Ferry serves: `ring`.
pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Reads the files `tls` names and builds a server configuration from them.
///
/// # Errors
/// [`TlsSetupError`] naming the file (and key) at fault.
pub(crate) fn build(tls: &TlsConfig) -> Result<Arc<ServerConfig>, TlsSetupError> {
    let chain = certificates(CERT_FILE_KEY, &tls.cert_file)?;
    let key = PrivateKeyDer::from_pem_file(&tls.key_file).map_err(|e| TlsSetupError::File {
        key: KEY_FILE_KEY,
        path: tls.key_file.clone(),
        reason: pem_reason(&e, "private key"),
    })?;
    let versions: &[&rustls::SupportedProtocolVersion] = match tls.min_version {
        TlsVersion::V1_2 => &[&rustls::version::TLS13, &rustls::version::TLS12],
        TlsVersion::V1_3 => &[&rustls::version::TLS13],
    };
    let provider = provider();
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .expect("the ring provider supports TLS 1.2 and 1.3");
    let builder = match tls.verify_peer {
        VerifyPeer::None => builder.with_no_client_auth(),
        VerifyPeer::Optional | VerifyPeer::Required => {
            let mut roots = RootCertStore::empty();
            for ca in certificates(CA_FILE_KEY, &tls.ca_file)? {
                roots.add(ca).map_err(|e| TlsSetupError::Verifier {
                    path: tls.ca_file.clone(),
                    reason: e.to_string(),
                })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if tls.verify_peer == VerifyPeer::Optional {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier.build().map_err(|e| TlsSetupError::Verifier {
                path: tls.ca_file.clone(),
                reason: e.to_string(),
            })?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder
        .with_single_cert(chain, key)
        .map_err(|e| TlsSetupError::Mismatch {
            cert: tls.cert_file.clone(),
            key: tls.key_file.clone(),
            reason: e.to_string(),
        })?;
    Ok(Arc::new(config))
}

/// Every certificate in the PEM file at `path` (config key `key`); at least one.
fn certificates(
    key: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsSetupError> {
    let error = |reason: String| TlsSetupError::File {
        key,
        path: path.to_owned(),
        reason,
    };
    let chain = CertificateDer::pem_file_iter(path)
        .map_err(|e| error(pem_reason(&e, "certificate")))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| error(pem_reason(&e, "certificate")))?;
    if chain.is_empty() {
        return Err(error("it holds no PEM certificate".to_owned()));
    }
    Ok(chain)
}

/// A PEM error as a sentence fragment; never the file's contents.
fn pem_reason(e: &rustls_pki_types::pem::Error, what: &str) -> String {
    use rustls_pki_types::pem::Error;
    match e {
        Error::NoItemsFound => format!("it holds no PEM {what}"),
        Error::Io(e) => e.to_string(),
        // The PEM errors' own messages may quote a line of the file: a key's, maybe.
        Error::MissingSectionEnd { .. } => "a PEM section has no END line".to_owned(),
        Error::IllegalSectionStart { .. } => "a PEM BEGIN line is malformed".to_owned(),
        Error::Base64Decode(_) => "a PEM section is not valid base64".to_owned(),
        _ => "it is not valid PEM".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, KeyPair};

    /// `[tls]` over a fresh self-signed certificate for `localhost` written into `dir`.
    fn files(dir: &Path) -> TlsConfig {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let config = TlsConfig {
            cert_file: dir.join("cert.pem"),
            key_file: dir.join("key.pem"),
            ca_file: dir.join("cert.pem"),
            ..TlsConfig::default()
        };
        std::fs::write(&config.cert_file, cert.pem()).unwrap();
        std::fs::write(&config.key_file, key.serialize_pem()).unwrap();
        config
    }

    #[test]
    fn a_certificate_and_its_key_build_with_every_verify_setting() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = files(dir.path());
        for verify in [VerifyPeer::None, VerifyPeer::Optional, VerifyPeer::Required] {
            config.verify_peer = verify;
            build(&config).unwrap();
        }
    }

    #[test]
    fn a_missing_file_is_named_with_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = files(dir.path());
        config.key_file = dir.path().join("missing.pem");
        let err = build(&config).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!(
                "tls.key_file: cannot use '{}': ",
                config.key_file.display()
            )),
            "{err}"
        );
    }

    #[test]
    fn a_damaged_key_is_named_without_quoting_it() {
        let dir = tempfile::tempdir().unwrap();
        let config = files(dir.path());
        let damaged = "-----BEGIN PRIVATE KEY-----\nc2VjcmV0!!\n-----END PRIVATE KEY-----\n";
        std::fs::write(&config.key_file, damaged).unwrap();
        let err = build(&config).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "tls.key_file: cannot use '{}': a PEM section is not valid base64",
                config.key_file.display()
            )
        );
        let empty = "no PEM here\n";
        std::fs::write(&config.cert_file, empty).unwrap();
        let err = build(&config).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "tls.cert_file: cannot use '{}': it holds no PEM certificate",
                config.cert_file.display()
            )
        );
    }

    #[test]
    fn a_key_of_another_certificate_is_refused_naming_both_files() {
        let dir = tempfile::tempdir().unwrap();
        let config = files(dir.path());
        std::fs::write(
            &config.key_file,
            KeyPair::generate().unwrap().serialize_pem(),
        )
        .unwrap();
        let err = build(&config).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!(
                "tls.cert_file '{}' and tls.key_file '{}' cannot be used together: ",
                config.cert_file.display(),
                config.key_file.display()
            )),
            "{err}"
        );
    }

    /// Whether a client offering only `version` completes a handshake with `config`.
    async fn handshake_with(
        config: &TlsConfig,
        version: &'static rustls::SupportedProtocolVersion,
    ) -> bool {
        use rustls_pki_types::ServerName;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(build(config).unwrap());
        let server = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            acceptor.accept(tcp).await.is_ok()
        });
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_file(&config.cert_file).unwrap())
            .unwrap();
        let client = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[version])
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let name = ServerName::try_from("localhost").unwrap();
        let client_ok = tokio_rustls::TlsConnector::from(Arc::new(client))
            .connect(name, tcp)
            .await
            .is_ok();
        let server_ok = server.await.unwrap();
        client_ok && server_ok
    }

    #[tokio::test]
    async fn min_version_1_3_refuses_a_tls_1_2_client() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = files(dir.path());
        assert!(handshake_with(&config, &rustls::version::TLS12).await);
        assert!(handshake_with(&config, &rustls::version::TLS13).await);
        config.min_version = TlsVersion::V1_3;
        assert!(!handshake_with(&config, &rustls::version::TLS12).await);
        assert!(handshake_with(&config, &rustls::version::TLS13).await);
    }
}
