//! Preflight: the checks of a [`Config`] that need the machine, run by `ferry validate` and
//! before `ferry run` starts anything.
//!
//! Unlike [`Config::validate`] these do I/O: they resolve listen hosts, prove the store
//! directory writable by creating and removing a file in it, and read the certificate,
//! key and password files (and password variables) the bridge's sources and sinks name.
//! They create nothing that stays.

use super::{Config, ConfigError, SinkConfig, SourceConfig};
use crate::remote::KafkaSecurityConfig;
use ferry_store::EngineKind;
use std::fs::{self, OpenOptions};
use std::io;
use std::net::ToSocketAddrs;
use std::path::Path;

impl Config {
    /// Checks what [`Config::validate`] cannot without I/O: every listen address resolves,
    /// and for the embedded engine `store.path` is a directory Ferry can write, or can be
    /// created in the nearest existing ancestor. Assumes [`Config::validate`] passed.
    ///
    /// # Errors
    /// The first [`ConfigError::Invalid`] found, e.g. `store.path: directory '/x' is not
    /// writable: ...`.
    pub fn preflight(&self) -> Result<(), ConfigError> {
        for listener in self.listen_addresses() {
            resolves(&listener.key, listener.addr)?;
        }
        if self.listen_addresses().iter().any(|l| l.tls) {
            for (key, path) in self.tls.files() {
                readable_file(key, path)?;
            }
        }
        if self.store.engine == EngineKind::Embedded {
            writable_dir("store.path", &self.store.path)?;
        }
        for (name, source) in &self.sources {
            let at = |key: &str| format!("sources.{name}.{key}");
            match source {
                SourceConfig::Rabbitmq { tls, .. } => readable(&at, &tls.files())?,
                SourceConfig::Kafka { security, .. } => kafka_secrets(&at, security)?,
            }
        }
        for (name, sink) in &self.sinks {
            let at = |key: &str| format!("sinks.{name}.{key}");
            match sink {
                SinkConfig::Rabbitmq { tls, .. } => readable(&at, &tls.files())?,
                SinkConfig::Kafka { security, .. } => kafka_secrets(&at, security)?,
            }
        }
        Ok(())
    }
}

/// A listen address another process holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenConflict {
    /// The key that sets it (`amqp.listen`, `kafka.listeners[1]`).
    pub key: String,
    /// The address, as configured.
    pub addr: String,
}

impl ListenConflict {
    /// What to change, in words: the key, and its `FERRY__` variable when it has one.
    fn remedy(&self) -> String {
        if self.key.contains('[') {
            format!("change {}", self.key)
        } else {
            format!("set {} (or {})", self.key, crate::env_var(&self.key))
        }
    }
}

impl std::fmt::Display for ListenConflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} is in use by another process; {} to a free address",
            self.key,
            self.addr,
            self.remedy()
        )
    }
}

impl Config {
    /// The listen addresses another process holds now: `ferry run` would stop at the
    /// first. Found by binding each address for a moment, as the daemon binds it; an
    /// address that does not resolve is [`Config::preflight`]'s to report. Warnings, not
    /// errors: the other process may be gone by the time Ferry starts (a restart, or the
    /// old Ferry itself).
    pub fn listen_conflicts(&self) -> Vec<ListenConflict> {
        self.listen_addresses()
            .iter()
            .filter(|l| {
                l.addr
                    .to_socket_addrs()
                    .ok()
                    .and_then(|mut found| found.next())
                    .is_some_and(in_use)
            })
            .map(|l| ListenConflict {
                key: l.key.clone(),
                addr: l.addr.to_owned(),
            })
            .collect()
    }

    /// Moves every listener another process holds to the next free port above its own
    /// (the quick start's `ferry run --move-taken-ports`); returns what moved, each with a
    /// sentence saying where to. A `kafka.listeners` entry is not moved (its protocol and
    /// advertised address go with it): it is left for the daemon to report.
    pub fn move_taken_listeners(&mut self) -> Vec<String> {
        let mut moved = Vec::new();
        for conflict in self.listen_conflicts() {
            let Some((host, port)) = conflict.addr.rsplit_once(':') else {
                continue;
            };
            let Ok(port) = port.parse::<u16>() else {
                continue;
            };
            let free = (port.saturating_add(1)..=port.saturating_add(100)).find_map(|p| {
                let candidate = format!("{host}:{p}");
                let addr = candidate.to_socket_addrs().ok()?.next()?;
                std::net::TcpListener::bind(addr)
                    .is_ok()
                    .then_some(candidate)
            });
            let (Some(free), Some(listen)) = (free, self.listen_mut(&conflict.key)) else {
                continue;
            };
            *listen = free.clone();
            moved.push(format!(
                "{}: {} is in use by another process; listening on {free} instead ({} to choose)",
                conflict.key,
                conflict.addr,
                conflict.remedy()
            ));
        }
        moved
    }
}

/// Whether binding `addr` fails because another socket holds it.
fn in_use(addr: std::net::SocketAddr) -> bool {
    matches!(
        std::net::TcpListener::bind(addr),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse
    )
}

/// Every file of `files` (key, path) can be read; `at` makes a key's path.
fn readable(at: &dyn Fn(&str) -> String, files: &[(&str, &Path)]) -> Result<(), ConfigError> {
    for (key, path) in files {
        fs::File::open(path).map_err(|e| {
            ConfigError::invalid(at(key), format!("cannot read '{}': {e}", path.display()))
        })?;
    }
    Ok(())
}

/// A Kafka source's or sink's files can be read and its password is there (it is read
/// and dropped, never shown).
fn kafka_secrets(
    at: &dyn Fn(&str) -> String,
    security: &KafkaSecurityConfig,
) -> Result<(), ConfigError> {
    readable(at, &security.files())?;
    security.password(at).map(drop)
}

/// `addr` resolves to at least one socket address.
fn resolves(key: &str, addr: &str) -> Result<(), ConfigError> {
    match addr.to_socket_addrs().map(|mut found| found.next()) {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(ConfigError::invalid(
            key,
            format!("'{addr}' resolves to no address"),
        )),
        Err(e) => Err(ConfigError::invalid(
            key,
            format!("'{addr}' does not resolve: {e}"),
        )),
    }
}

/// `path` is a file this process can read (its contents are checked when the daemon loads
/// it, with errors that name the file).
fn readable_file(key: &str, path: &Path) -> Result<(), ConfigError> {
    fs::File::open(path)
        .map(drop)
        .map_err(|e| ConfigError::invalid(key, format!("cannot read '{}': {e}", path.display())))
}

/// `dir` is a writable directory, or does not exist and its nearest existing ancestor is a
/// writable directory it can be created in.
fn writable_dir(key: &str, dir: &Path) -> Result<(), ConfigError> {
    let not_writable = |reason: String| {
        ConfigError::invalid(
            key,
            format!("directory '{}' is not writable: {reason}", dir.display()),
        )
    };
    // A relative path's last ancestor is "", which means the working directory.
    let existing = dir
        .ancestors()
        .map(|p| {
            if p.as_os_str().is_empty() {
                Path::new(".")
            } else {
                p
            }
        })
        .find(|p| p.exists())
        .ok_or_else(|| not_writable("none of its ancestors exists".to_owned()))?;
    if !existing.is_dir() {
        return Err(not_writable(format!(
            "'{}' is not a directory",
            existing.display()
        )));
    }
    probe(existing).map_err(|e| {
        not_writable(format!(
            "cannot create a file in '{}': {e}",
            existing.display()
        ))
    })
}

/// Creates and removes a file in `dir`. Permission bits alone do not answer the question:
/// root ignores them, while read-only mounts and pseudo file systems refuse even root.
fn probe(dir: &Path) -> io::Result<()> {
    let file = dir.join(format!(".ferry-preflight-{}", std::process::id()));
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&file)?;
    fs::remove_file(&file)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The preflight message for a default config with `store.path` set to `path`.
    fn store_path_error(path: &Path) -> String {
        let mut config = Config::default();
        config.store.path = path.to_owned();
        config.metrics.listen = "127.0.0.1:0".into();
        config.preflight().unwrap_err().to_string()
    }

    #[test]
    fn existing_writable_directory_passes_and_is_left_clean() {
        let dir = tempfile::tempdir().unwrap();
        writable_dir("store.path", dir.path()).unwrap();
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn missing_directory_in_a_writable_parent_passes_and_is_not_created() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("a/b/data");
        writable_dir("store.path", &data).unwrap();
        assert!(!dir.path().join("a").exists());
    }

    #[test]
    fn relative_path_is_checked_in_the_working_directory() {
        writable_dir("store.path", Path::new("target/preflight-test/data")).unwrap();
    }

    #[test]
    fn path_below_a_regular_file_is_not_writable() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        fs::write(&file, b"").unwrap();
        let data = file.join("data");
        assert_eq!(
            store_path_error(&data),
            format!(
                "store.path: directory '{}' is not writable: '{}' is not a directory",
                data.display(),
                file.display()
            )
        );
    }

    #[test]
    fn path_in_proc_is_not_writable_even_for_root() {
        let err = store_path_error(Path::new("/proc/ferry-preflight-test/data"));
        assert!(
            err.starts_with(
                "store.path: directory '/proc/ferry-preflight-test/data' is not writable: \
                 cannot create a file in '/proc': "
            ),
            "{err}"
        );
    }

    #[test]
    fn a_listen_address_another_process_holds_is_named_with_its_key() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap().to_string();
        let mut config = Config::default();
        for listen in [
            &mut config.amqp.listen,
            &mut config.kafka.listen,
            &mut config.metrics.listen,
            &mut config.management.listen,
        ] {
            *listen = "127.0.0.1:0".into();
        }
        assert_eq!(config.listen_conflicts(), []);
        config.amqp.listen = addr.clone();
        let conflicts: Vec<String> = config
            .listen_conflicts()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            conflicts,
            [format!(
                "amqp.listen: {addr} is in use by another process; set amqp.listen (or \
                 FERRY__AMQP__LISTEN) to a free address"
            )]
        );
        let moved = config.move_taken_listeners();
        assert_eq!(moved.len(), 1, "{moved:?}");
        assert_ne!(config.amqp.listen, addr);
        assert!(moved[0].contains(&config.amqp.listen), "{moved:?}");
        assert_eq!(config.listen_conflicts(), []);
    }

    #[test]
    fn an_unreadable_tls_file_is_named_with_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::default();
        config.store.path = dir.path().join("data");
        config.metrics.listen = "127.0.0.1:0".into();
        config.amqp.tls_listen = "127.0.0.1:0".into();
        config.tls.cert_file = dir.path().join("cert.pem");
        config.tls.key_file = dir.path().join("key.pem");
        fs::write(&config.tls.cert_file, b"").unwrap();
        let err = config.preflight().unwrap_err().to_string();
        assert!(
            err.starts_with(&format!(
                "tls.key_file: cannot read '{}': ",
                config.tls.key_file.display()
            )),
            "{err}"
        );
    }

    #[test]
    fn localhost_resolves() {
        resolves("metrics.listen", "localhost:9464").unwrap();
    }

    #[test]
    fn unresolvable_host_is_named() {
        let err = resolves("metrics.listen", "ferry-no-such-host.invalid:9464")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("metrics.listen: 'ferry-no-such-host.invalid:9464' does not resolve: "),
            "{err}"
        );
    }
}
