//! The server configuration every TLS handshake starts from, reloadable without a restart.
//!
//! [`Certificates`] holds the current rustls configuration; each handshake takes the one
//! current when it starts, so open connections keep the certificate they began with while
//! new handshakes get a reloaded one. [`Certificates::watch`] reloads on SIGHUP and when a
//! file's modification time or size changes (checked every `tls.reload_check_ms`). A reload
//! that fails — unreadable file, bad PEM, a key that does not match — keeps the previous
//! configuration and logs an error naming the file.

use super::server_config::{self, TlsSetupError};
use crate::TlsConfig;
use ferry_telemetry::tls as metric;
use parking_lot::{Mutex, RwLock};
use rustls::ServerConfig;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};
use x509_parser::prelude::{FromDer, X509Certificate};

/// What a file looked like when it was last loaded: its modification time and size.
type Stamp = Option<(SystemTime, u64)>;

/// The current TLS server configuration, shared by every TLS listener.
#[derive(Clone)]
pub struct Certificates {
    inner: Arc<Inner>,
}

struct Inner {
    /// `[tls]`, to read the files again.
    config: TlsConfig,
    /// What new handshakes use.
    current: RwLock<Arc<ServerConfig>>,
    /// The files' stamps at the last load (or failed load), in `TlsConfig::files` order.
    stamps: Mutex<Vec<Stamp>>,
}

impl Certificates {
    /// Loads the files `config` names.
    ///
    /// # Errors
    /// [`TlsSetupError`] naming the file at fault.
    pub fn load(config: &TlsConfig) -> Result<Self, TlsSetupError> {
        let stamps = stamps(config);
        let server = server_config::build(config)?;
        record_expiry(config);
        for outcome in ["ok", "failed"] {
            metrics::counter!(metric::RELOADS_TOTAL, metric::LABEL_OUTCOME => outcome).increment(0);
        }
        Ok(Self {
            inner: Arc::new(Inner {
                config: config.clone(),
                current: RwLock::new(server),
                stamps: Mutex::new(stamps),
            }),
        })
    }

    /// The configuration a handshake starting now uses.
    pub fn current(&self) -> Arc<ServerConfig> {
        self.inner.current.read().clone()
    }

    /// Reads the files again; on success new handshakes use them, on failure the previous
    /// configuration stays. Logged and counted either way.
    ///
    /// # Errors
    /// [`TlsSetupError`] naming the file at fault.
    pub fn reload(&self, cause: &'static str) -> Result<(), TlsSetupError> {
        let config = &self.inner.config;
        *self.inner.stamps.lock() = stamps(config);
        match server_config::build(config) {
            Ok(server) => {
                *self.inner.current.write() = server;
                record_expiry(config);
                metrics::counter!(metric::RELOADS_TOTAL, metric::LABEL_OUTCOME => "ok")
                    .increment(1);
                info!(cause, cert_file = %config.cert_file.display(), "TLS certificates reloaded; new handshakes use them");
                Ok(())
            }
            Err(e) => {
                metrics::counter!(metric::RELOADS_TOTAL, metric::LABEL_OUTCOME => "failed")
                    .increment(1);
                error!(cause, error = %e, "TLS certificates not reloaded; the previous ones stay in use");
                Err(e)
            }
        }
    }

    /// Whether a file changed since the last load.
    fn changed(&self) -> bool {
        *self.inner.stamps.lock() != stamps(&self.inner.config)
    }

    /// Reloads on SIGHUP and when the files change, until `shutdown`.
    pub async fn watch(self, shutdown: CancellationToken) {
        let mut hangup = match signal(SignalKind::hangup()) {
            Ok(s) => Some(s),
            Err(e) => {
                warn!(error = %e, "cannot install the SIGHUP handler; TLS files reload only when they change");
                None
            }
        };
        let mut tick = tokio::time::interval(self.inner.config.reload_check());
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let cause = tokio::select! {
                () = shutdown.cancelled() => return,
                Some(()) = async { hangup.as_mut()?.recv().await } => "SIGHUP",
                _ = tick.tick() => {
                    if !self.changed() {
                        continue;
                    }
                    "file changed"
                }
            };
            let _ = self.reload(cause);
        }
    }
}

/// The stamps of the files `config` names.
fn stamps(config: &TlsConfig) -> Vec<Stamp> {
    config
        .files()
        .into_iter()
        .map(|(_, path)| {
            let meta = std::fs::metadata(path).ok()?;
            Some((meta.modified().ok()?, meta.len()))
        })
        .collect()
}

/// Sets the expiry gauge from the leaf certificate of `tls.cert_file`.
fn record_expiry(config: &TlsConfig) {
    if let Some(not_after) = leaf_not_after(&config.cert_file) {
        metrics::gauge!(metric::CERTIFICATE_NOT_AFTER).set(not_after as f64);
    }
}

/// The leaf certificate's expiry, in seconds since the Unix epoch.
fn leaf_not_after(cert_file: &PathBuf) -> Option<i64> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let leaf = CertificateDer::from_pem_file(cert_file).ok()?;
    let (_, cert) = X509Certificate::from_der(&leaf).ok()?;
    Some(cert.validity().not_after.timestamp())
}
