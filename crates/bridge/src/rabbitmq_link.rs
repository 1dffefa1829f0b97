//! Connecting to an external RabbitMQ (or any AMQP 0-9-1 broker), for the RabbitMQ source
//! and sink and for `ferry bench amqp`: `amqp://` over
//! TCP, `amqps://` over TLS 1.2 or 1.3 (rustls with the ring provider) with the source's
//! or sink's [`AmqpTlsConfig`]: the broker's certificate must chain to `ca_file` (absent:
//! the system's trusted roots) and carry `server_name` (absent: the URI's host); with
//! `cert_file` and `key_file` Ferry presents a client certificate.
//!
//! The files are read again on every connection, so renewed ones are used from the next
//! reconnect on. Every error names the broker by its URI without the password, and never
//! includes key material.

use ferry_config::{AmqpTlsConfig, AmqpUri};
use lapin::tcp::{AMQPUriTcpExt, RustlsConnector, TLSConfig};
use lapin::uri::{AMQPScheme, AMQPUri};
use lapin::{Connection, ConnectionProperties};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};
use std::path::Path;
use std::sync::Arc;

/// Connects to `uri` as `connection_name` (the name RabbitMQ's management tools show),
/// over TLS when `uri` is `amqps://`.
///
/// # Errors
/// A sentence naming the broker (without its password) and why the connection failed:
/// refused, a certificate file that cannot be used, a handshake the broker or Ferry
/// refused (an unknown CA, a wrong name, a missing client certificate), wrong
/// credentials, a missing vhost.
pub async fn connect(
    uri: &AmqpUri,
    tls: &AmqpTlsConfig,
    connection_name: &str,
) -> Result<Connection, String> {
    let failed = |why: String| format!("cannot connect to {}: {why}", uri.redacted());
    let parsed: AMQPUri = uri.expose().parse().map_err(failed)?;
    let properties = ConnectionProperties::default().with_connection_name(connection_name.into());
    if parsed.scheme == AMQPScheme::AMQP {
        return Connection::connect_uri(parsed, properties)
            .await
            .map_err(|e| failed(e.to_string()));
    }
    let connector = RustlsConnector::from(Arc::new(client_config(tls).map_err(failed)?));
    let server_name = tls
        .server_name
        .clone()
        .unwrap_or_else(|| parsed.authority.host.clone());
    let runtime = lapin::runtime::default_runtime().map_err(|e| failed(e.to_string()))?;
    Connection::connector(
        parsed,
        runtime,
        async move |uri: AMQPUri, runtime| {
            // TCP first (an `amqp` copy of the URI), then the handshake with our own
            // connector and server name, which lapin's `amqps` path cannot take.
            let mut tcp = uri.clone();
            tcp.scheme = AMQPScheme::AMQP;
            let stream = tcp
                .connect_with_config_async(TLSConfig::default(), &runtime)
                .await?;
            Ok(stream.into_rustls(&connector, &server_name).await?)
        },
        properties,
    )
    .await
    .map_err(|e| failed(e.to_string()))
}

/// The TLS client configuration of `tls`: TLS 1.2 and 1.3, its roots, its client
/// certificate if any.
fn client_config(tls: &AmqpTlsConfig) -> Result<ClientConfig, String> {
    let builder =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| format!("cannot set up TLS: {e}"))?
            .with_root_certificates(roots(tls.ca_file.as_deref())?);
    match (&tls.cert_file, &tls.key_file) {
        (Some(cert), Some(key)) => builder
            .with_client_auth_cert(certificates(cert)?, private_key(key)?)
            .map_err(|e| {
                format!(
                    "cannot use client certificate '{}' with key '{}': {e}",
                    cert.display(),
                    key.display()
                )
            }),
        _ => Ok(builder.with_no_client_auth()),
    }
}

/// The certificates of `ca_file`, or the system's trusted roots.
fn roots(ca_file: Option<&Path>) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    match ca_file {
        Some(path) => {
            for cert in certificates(path)? {
                roots.add(cert).map_err(|e| {
                    format!(
                        "ca_file '{}' holds an unusable certificate: {e}",
                        path.display()
                    )
                })?;
            }
        }
        None => {
            let native = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(native.certs);
            if roots.is_empty() {
                return Err("the system has no trusted root certificates; set ca_file".to_owned());
            }
        }
    }
    Ok(roots)
}

/// The PEM certificates in `path`, at least one.
fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read certificates from '{}': {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("'{}' holds no PEM certificate", path.display()));
    }
    Ok(certs)
}

/// The PEM private key in `path`. The error names the file, never its content.
fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_file(path)
        .map_err(|e| format!("cannot read a private key from '{}': {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_without_certificates_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("ca.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let tls = AmqpTlsConfig {
            ca_file: Some(empty.clone()),
            ..AmqpTlsConfig::default()
        };
        let err = client_config(&tls).unwrap_err();
        assert_eq!(
            err,
            format!("'{}' holds no PEM certificate", empty.display())
        );
    }

    #[test]
    fn a_key_file_without_a_key_is_named_without_its_content() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("client.key");
        std::fs::write(&key, "secret-looking garbage\n").unwrap();
        let err = private_key(&key).unwrap_err();
        assert!(
            err.starts_with(&format!(
                "cannot read a private key from '{}'",
                key.display()
            )),
            "{err}"
        );
        assert!(!err.contains("garbage"), "{err}");
    }
}
