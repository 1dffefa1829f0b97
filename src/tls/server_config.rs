//! Building rustls' server configuration from `[tls]`: the certificate chain and key, the
//! client verifier (`tls.verify_peer` against `tls.ca_file`) and the protocol versions, with
//! the `ring` crypto provider. Every failure names the file and the key that set it.

use crate::config::TlsConfig;
use crate::config::tls::{CA_FILE_KEY, CERT_FILE_KEY, KEY_FILE_KEY, TlsVersion, VerifyPeer};
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
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Reads the files `tls` names and builds a server configuration from them.
///
/// # Errors
/// [`TlsSetupError`] naming the file (and key) at fault.
pub fn build(tls: &TlsConfig) -> Result<Arc<ServerConfig>, TlsSetupError> {
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
