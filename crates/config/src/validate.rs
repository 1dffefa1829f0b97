//! Validation: every range and format rule on a loaded [`Config`], without any I/O.
//!
//! Each failure names the key path and the bad value (`store.max_batch: 0 must be between
//! 1 and 65535`). Checks that need the machine (a writable directory, a resolvable host)
//! live in [`super::preflight`].

use super::checks::{at_least, between, is_hostname};
use super::{Config, ConfigError, DaemonConfig, LogConfig, StageConfig, StoreConfig, UserConfig};
use ferry_store::EngineKind;
use ferry_tls::{CA_FILE_KEY, CERT_FILE_KEY, KEY_FILE_KEY, TlsConfig, VerifyPeer};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::LevelFilter;

/// Upper bound of `store.max_batch`.
pub const MAX_BATCH_LIMIT: u32 = 65_535;

impl Config {
    /// Checks every value's range and format. Pure: it reads no file and opens no socket.
    ///
    /// # Errors
    /// The first [`ConfigError::Invalid`] found, naming the key and the bad value.
    pub fn validate(&self) -> Result<(), ConfigError> {
        validate_store(&self.store)?;
        validate_stage(&self.stage)?;
        validate_users(&self.users)?;
        self.kafka.validate()?;
        self.amqp.validate()?;
        validate_tls(&self.tls)?;
        for listener in self.listen_addresses() {
            host_port(&listener.key, listener.addr)?;
            if listener.tls && !self.tls.has_certificate() {
                return Err(ConfigError::invalid(
                    listener.key,
                    format!(
                        "a TLS listener needs a certificate: set {} and {}",
                        CERT_FILE_KEY, KEY_FILE_KEY
                    ),
                ));
            }
        }
        validate_log(&self.log)?;
        validate_daemon(&self.daemon)?;
        super::bridge::validate(&self.sources, &self.sinks, &self.routes)
    }
}

/// Rules of `[store]`.
fn validate_store(store: &StoreConfig) -> Result<(), ConfigError> {
    if store.engine == EngineKind::Fdb && !ferry_store::FDB_BUILT_IN {
        return Err(ConfigError::invalid(
            "store.engine",
            "'fdb' needs a ferry built with --features fdb",
        ));
    }
    if store.engine == EngineKind::Embedded && store.path.as_os_str().is_empty() {
        return Err(ConfigError::invalid(
            "store.path",
            "must not be empty for the embedded engine",
        ));
    }
    if store.prefix.is_empty() {
        return Err(ConfigError::invalid("store.prefix", "must not be empty"));
    }
    at_least("store.cache_mb", store.cache_mb, 1)?;
    at_least("store.window_mb", store.window_mb, 1)?;
    between("store.max_batch", store.max_batch, 1, MAX_BATCH_LIMIT)?;
    probability("store.inject_conflict_rate", store.inject_conflict_rate)?;
    probability(
        "store.inject_unknown_result_rate",
        store.inject_unknown_result_rate,
    )
}

/// Rules of `[tls]`.
fn validate_tls(tls: &TlsConfig) -> Result<(), ConfigError> {
    let has_key = !tls.key_file.as_os_str().is_empty();
    if tls.has_certificate() && !has_key {
        return Err(ConfigError::invalid(
            KEY_FILE_KEY,
            format!("must be set when {CERT_FILE_KEY} is"),
        ));
    }
    if has_key && !tls.has_certificate() {
        return Err(ConfigError::invalid(
            CERT_FILE_KEY,
            format!("must be set when {KEY_FILE_KEY} is"),
        ));
    }
    if tls.verify_peer != VerifyPeer::None && tls.ca_file.as_os_str().is_empty() {
        return Err(ConfigError::invalid(
            CA_FILE_KEY,
            format!(
                "must name the CA that signs client certificates when tls.verify_peer is '{}'",
                tls.verify_peer.as_str()
            ),
        ));
    }
    at_least("tls.handshake_timeout_ms", tls.handshake_timeout_ms, 1)?;
    at_least("tls.reload_check_ms", tls.reload_check_ms, 100)
}

/// Rules of `[stage]`.
fn validate_stage(stage: &StageConfig) -> Result<(), ConfigError> {
    at_least("stage.lease_ttl_ms", stage.lease_ttl_ms, 1)
}

/// Rules of `[[users]]`.
fn validate_users(users: &[UserConfig]) -> Result<(), ConfigError> {
    for (i, user) in users.iter().enumerate() {
        if user.name.is_empty() {
            return Err(ConfigError::invalid(
                format!("users[{i}].name"),
                "must not be empty",
            ));
        }
        if users[..i].iter().any(|u| u.name == user.name) {
            return Err(ConfigError::invalid(
                format!("users[{i}].name"),
                format!("'{}' is declared twice", user.name),
            ));
        }
        validate_credentials(i, user)?;
        validate_permissions(i, user)?;
    }
    Ok(())
}

/// A user's `vhosts`, `permissions` and `topic_permissions`: each vhost (and each vhost
/// and exchange) once, every pattern compiling.
fn validate_permissions(i: usize, user: &UserConfig) -> Result<(), ConfigError> {
    use ferry_auth::permissions::{Permissions, TopicPermission};
    let vhosts = user.vhosts.as_deref().unwrap_or_default();
    for (j, vhost) in vhosts.iter().enumerate() {
        if vhosts[..j].contains(vhost) {
            return Err(ConfigError::invalid(
                format!("users[{i}].vhosts[{j}]"),
                format!("'{vhost}' is listed twice"),
            ));
        }
    }
    for (j, p) in user.permissions.iter().enumerate() {
        let key = format!("users[{i}].permissions[{j}]");
        if vhosts.contains(&p.vhost) {
            return Err(ConfigError::invalid(
                format!("{key}.vhost"),
                format!(
                    "'{}' is also in users[{i}].vhosts (full permissions); keep one of them",
                    p.vhost
                ),
            ));
        }
        if user.permissions[..j].iter().any(|q| q.vhost == p.vhost) {
            return Err(ConfigError::invalid(
                format!("{key}.vhost"),
                format!("'{}' has permissions twice", p.vhost),
            ));
        }
        Permissions {
            configure: p.configure.clone(),
            write: p.write.clone(),
            read: p.read.clone(),
        }
        .validate()
        .map_err(|e| bad_pattern(&key, e))?;
    }
    for (j, t) in user.topic_permissions.iter().enumerate() {
        let key = format!("users[{i}].topic_permissions[{j}]");
        if user.topic_permissions[..j]
            .iter()
            .any(|u| u.vhost == t.vhost && u.exchange == t.exchange)
        {
            return Err(ConfigError::invalid(
                format!("{key}.exchange"),
                format!(
                    "'{}' in vhost '{}' has topic permissions twice",
                    t.exchange, t.vhost
                ),
            ));
        }
        TopicPermission {
            vhost: t.vhost.clone(),
            user: user.name.clone(),
            exchange: t.exchange.clone(),
            write: t.write.clone(),
            read: t.read.clone(),
        }
        .validate()
        .map_err(|e| bad_pattern(&key, e))?;
    }
    Ok(())
}

/// A pattern error as a config error under `key`.
fn bad_pattern(key: &str, error: ferry_auth::permissions::BadPattern) -> ConfigError {
    let error = error.under(key);
    ConfigError::invalid(error.field, error.reason)
}

/// A user's credentials: at least one, each well formed.
fn validate_credentials(i: usize, user: &UserConfig) -> Result<(), ConfigError> {
    use ferry_auth::scram::{Mechanism, ScramCredential};
    if let Some(hash) = &user.password_hash {
        ferry_auth::password::PasswordHash::parse(hash)
            .map_err(|e| ConfigError::invalid(format!("users[{i}].password_hash"), e))?;
    }
    for (key, mechanism, text) in [
        ("scram_sha_256", Mechanism::Sha256, &user.scram_sha_256),
        ("scram_sha_512", Mechanism::Sha512, &user.scram_sha_512),
    ] {
        if let Some(text) = text {
            ScramCredential::parse(mechanism, text)
                .map_err(|e| ConfigError::invalid(format!("users[{i}].{key}"), e))?;
        }
    }
    if user.password_hash.is_none() && user.scram_sha_256.is_none() && user.scram_sha_512.is_none()
    {
        return Err(ConfigError::invalid(
            format!("users[{i}]"),
            "needs password_hash, scram_sha_256 or scram_sha_512 (print them with `ferry hash-password`)",
        ));
    }
    Ok(())
}

/// Rules of `[log]`.
fn validate_log(log: &LogConfig) -> Result<(), ConfigError> {
    if is_log_filter(&log.level) {
        Ok(())
    } else {
        Err(ConfigError::invalid(
            "log.level",
            format!("'{}' is not a valid filter", log.level),
        ))
    }
}

/// Memory, MiB, the process needs besides the embedded store's page cache (its resident
/// size at rest is about 70 MiB; connections, in-flight messages and reads take more —
/// a draining consumer's reads lifted it 140 MiB above the cache in docs/benchmarks.md).
const MEMORY_BESIDES_CACHE_MB: u64 = 256;

impl Config {
    /// Why `daemon.max_memory_mb` is likely too low, if it is: a mark the embedded store's
    /// page cache could nearly fill on its own may hold publishers back for good. Logged
    /// at start, not refused (a small store, or a cache that never fills, may be fine).
    pub fn memory_mark_warning(&self) -> Option<String> {
        let floor = match self.store.engine {
            EngineKind::Embedded => self
                .store
                .cache_mb
                .saturating_add(self.store.window_mb)
                .saturating_add(MEMORY_BESIDES_CACHE_MB),
            EngineKind::Fdb => MEMORY_BESIDES_CACHE_MB,
        };
        let mark = self.daemon.max_memory_mb;
        (mark != 0 && mark < floor).then(|| {
            format!(
                "daemon.max_memory_mb: {mark} is below store.cache_mb ({}) plus store.window_mb \
                 ({}) plus {MEMORY_BESIDES_CACHE_MB} for the rest of the process ({floor}); the \
                 store alone may keep publishers held back",
                self.store.cache_mb, self.store.window_mb
            )
        })
    }
}

/// Rules of `[daemon]`.
fn validate_daemon(daemon: &DaemonConfig) -> Result<(), ConfigError> {
    at_least("daemon.shutdown_timeout_ms", daemon.shutdown_timeout_ms, 1)
}

/// A probability: 0 ≤ `value` ≤ 1 (NaN fails).
fn probability(key: &str, value: f64) -> Result<(), ConfigError> {
    between(key, value, 0.0, 1.0)
}

/// A `tracing` filter whose every directive ends in a level. `EnvFilter` alone would take a
/// bare word such as `verbose` as a target name and silently enable everything under it, so
/// each comma-separated directive must be `level` or `target=level`.
fn is_log_filter(filter: &str) -> bool {
    let directives_have_levels = filter.split(',').all(|directive| {
        let level = directive
            .rsplit_once('=')
            .map_or(directive, |(_, level)| level);
        LevelFilter::from_str(level.trim()).is_ok()
    });
    !filter.trim().is_empty()
        && directives_have_levels
        && EnvFilter::builder().parse(filter).is_ok()
}

/// `addr` is `host:port`: an IPv4 address, a bracketed IPv6 address or a hostname, and a
/// port from 0 to 65535 (0 asks the kernel for a free port). The host is only checked for
/// syntax here; [`super::preflight`] resolves it.
fn host_port(key: &str, addr: &str) -> Result<(), ConfigError> {
    let well_formed = addr.rsplit_once(':').is_some_and(|(host, port)| {
        let port_ok = !port.is_empty()
            && port.bytes().all(|b| b.is_ascii_digit())
            && port.parse::<u16>().is_ok();
        let host_ok = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            Some(v6) => v6.parse::<Ipv6Addr>().is_ok(),
            None => host.parse::<Ipv4Addr>().is_ok() || is_hostname(host),
        };
        port_ok && host_ok
    });
    if well_formed {
        Ok(())
    } else {
        Err(ConfigError::invalid(
            key,
            format!("'{addr}' is not a host:port address"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The message of validating the default config changed by `edit`.
    fn error_after(edit: impl FnOnce(&mut Config)) -> String {
        let mut config = Config::default();
        edit(&mut config);
        config.validate().unwrap_err().to_string()
    }

    #[test]
    fn a_certificate_needs_its_key_and_the_other_way_round() {
        assert_eq!(
            error_after(|c| c.tls.cert_file = "cert.pem".into()),
            "tls.key_file: must be set when tls.cert_file is"
        );
        assert_eq!(
            error_after(|c| c.tls.key_file = "key.pem".into()),
            "tls.cert_file: must be set when tls.key_file is"
        );
    }

    #[test]
    fn verifying_clients_needs_a_ca() {
        assert_eq!(
            error_after(|c| c.tls.verify_peer = VerifyPeer::Required),
            "tls.ca_file: must name the CA that signs client certificates when \
             tls.verify_peer is 'required'"
        );
    }

    #[test]
    fn zero_tls_timeouts_are_rejected() {
        assert_eq!(
            error_after(|c| c.tls.handshake_timeout_ms = 0),
            "tls.handshake_timeout_ms: 0 must be at least 1"
        );
        assert_eq!(
            error_after(|c| c.tls.reload_check_ms = 10),
            "tls.reload_check_ms: 10 must be at least 100"
        );
    }

    #[test]
    fn default_config_is_valid() {
        Config::default().validate().unwrap();
    }

    #[test]
    fn listen_port_out_of_range_is_named() {
        assert_eq!(
            error_after(|c| c.metrics.listen = "0.0.0.0:99999".into()),
            "metrics.listen: '0.0.0.0:99999' is not a host:port address"
        );
    }

    #[test]
    fn listen_without_port_is_rejected() {
        assert_eq!(
            error_after(|c| c.metrics.listen = "nonsense".into()),
            "metrics.listen: 'nonsense' is not a host:port address"
        );
    }

    #[test]
    fn listen_accepts_ipv4_ipv6_and_hostnames() {
        for addr in [
            "0.0.0.0:9464",
            "[::1]:9464",
            "localhost:9464",
            "ferry-0.ferry.svc:1",
            "127.0.0.1:0",
        ] {
            host_port("metrics.listen", addr).unwrap();
        }
        for addr in [
            ":9464",
            "[::1:9464",
            "::1:9464",
            "host:",
            "host:-1",
            "-bad:1",
            "a b:1",
            "host:+1",
        ] {
            assert!(host_port("metrics.listen", addr).is_err(), "{addr}");
        }
    }

    #[test]
    fn a_tls_listener_without_a_certificate_names_both_keys() {
        assert_eq!(
            error_after(|c| c.amqp.tls_listen = "0.0.0.0:5671".into()),
            "amqp.tls_listen: a TLS listener needs a certificate: set tls.cert_file and \
             tls.key_file"
        );
        assert_eq!(
            error_after(|c| c.kafka.listeners = vec!["SASL_SSL://0.0.0.0:9094".into()]),
            "kafka.listeners[0]: a TLS listener needs a certificate: set tls.cert_file and \
             tls.key_file"
        );
        assert_eq!(
            error_after(|c| c.metrics.tls = true),
            "metrics.listen: a TLS listener needs a certificate: set tls.cert_file and \
             tls.key_file"
        );
    }

    #[test]
    fn kafka_listener_addresses_are_checked_like_every_listen_address() {
        assert_eq!(
            error_after(|c| c.kafka.listeners = vec!["SASL_PLAINTEXT://nowhere".into()]),
            "kafka.listeners[0]: 'nowhere' is not a host:port address"
        );
    }

    #[test]
    fn max_batch_zero_is_out_of_range() {
        assert_eq!(
            error_after(|c| c.store.max_batch = 0),
            "store.max_batch: 0 must be between 1 and 65535"
        );
    }

    #[test]
    fn max_batch_above_limit_is_out_of_range() {
        assert_eq!(
            error_after(|c| c.store.max_batch = 65_536),
            "store.max_batch: 65536 must be between 1 and 65535"
        );
    }

    #[test]
    fn conflict_rate_above_one_is_rejected() {
        assert_eq!(
            error_after(|c| c.store.inject_conflict_rate = 1.5),
            "store.inject_conflict_rate: 1.5 must be between 0 and 1"
        );
    }

    #[test]
    fn unknown_result_rate_nan_is_rejected() {
        assert_eq!(
            error_after(|c| c.store.inject_unknown_result_rate = f64::NAN),
            "store.inject_unknown_result_rate: NaN must be between 0 and 1"
        );
    }

    #[test]
    fn lease_ttl_zero_is_rejected() {
        assert_eq!(
            error_after(|c| c.stage.lease_ttl_ms = 0),
            "stage.lease_ttl_ms: 0 must be at least 1"
        );
    }

    #[test]
    fn cache_mb_zero_is_rejected() {
        assert_eq!(
            error_after(|c| c.store.cache_mb = 0),
            "store.cache_mb: 0 must be at least 1"
        );
    }

    #[test]
    fn empty_prefix_is_rejected() {
        assert_eq!(
            error_after(|c| c.store.prefix.clear()),
            "store.prefix: must not be empty"
        );
    }

    #[test]
    fn empty_store_path_is_rejected_for_the_embedded_engine() {
        assert_eq!(
            error_after(|c| c.store.path = Default::default()),
            "store.path: must not be empty for the embedded engine"
        );
    }

    #[test]
    fn a_memory_mark_the_page_cache_could_fill_is_warned_of() {
        let with_mark = |mb| Config {
            daemon: DaemonConfig {
                max_memory_mb: mb,
                ..DaemonConfig::default()
            },
            ..Config::default()
        };
        assert_eq!(
            with_mark(1000).memory_mark_warning().as_deref(),
            Some(
                "daemon.max_memory_mb: 1000 is below store.cache_mb (256) plus store.window_mb \
                 (512) plus 256 for the rest of the process (1024); the store alone may keep \
                 publishers held back"
            )
        );
        assert_eq!(with_mark(1024).memory_mark_warning(), None);
        assert_eq!(with_mark(0).memory_mark_warning(), None);
    }

    #[test]
    fn shutdown_timeout_zero_is_rejected() {
        assert_eq!(
            error_after(|c| c.daemon.shutdown_timeout_ms = 0),
            "daemon.shutdown_timeout_ms: 0 must be at least 1"
        );
    }

    #[test]
    fn bare_word_log_level_is_not_a_filter() {
        assert_eq!(
            error_after(|c| c.log.level = "verbose".into()),
            "log.level: 'verbose' is not a valid filter"
        );
    }

    #[test]
    fn log_filters_with_levels_are_accepted() {
        for filter in [
            "info",
            "WARN",
            "off",
            "warn,ferry=debug",
            "ferry::stage=trace",
        ] {
            assert!(is_log_filter(filter), "{filter}");
        }
        for filter in ["", " ", "verbose", "ferry=loud", "ferry::stage"] {
            assert!(!is_log_filter(filter), "{filter}");
        }
    }

    #[test]
    fn a_user_needs_a_credential_and_each_must_parse() {
        let no_credential = |c: &mut Config| {
            c.users[0].password_hash = None;
            c.users[0].scram_sha_256 = None;
            c.users[0].scram_sha_512 = None;
        };
        assert_eq!(
            error_after(no_credential),
            "users[0]: needs password_hash, scram_sha_256 or scram_sha_512 (print them with `ferry hash-password`)"
        );
        let scram = ferry_auth::scram::ScramCredential::new(
            ferry_auth::scram::Mechanism::Sha256,
            "pw",
            4096,
        );
        let mut config = Config::default();
        no_credential(&mut config);
        config.users[0].scram_sha_256 = Some(scram.to_string());
        config.validate().unwrap();
        assert_eq!(
            error_after(|c| c.users[0].scram_sha_512 = Some(scram.to_string())),
            "users[0].scram_sha_512: stored_key is 32 bytes, not the 64 of SCRAM-SHA-512"
        );
    }

    #[test]
    fn permissions_are_validated_and_named_by_their_key() {
        use ferry_auth::{PermissionConfig, TopicPermissionConfig};
        let permission = |vhost: &str, write: &str| PermissionConfig {
            vhost: vhost.into(),
            configure: ".*".into(),
            write: write.into(),
            read: ".*".into(),
        };
        let second_user = |c: &mut Config| {
            let mut user = c.users[0].clone();
            user.name = "app".into();
            user.permissions = vec![permission("/", "^app-")];
            c.users.push(user);
        };
        let mut config = Config::default();
        second_user(&mut config);
        config.validate().unwrap();

        let error = error_after(|c| {
            second_user(c);
            c.users[1].permissions.push(permission("other", "(app"));
        });
        assert!(
            error.starts_with(
                "users[1].permissions[1].write: '(app' is not a valid regular expression"
            ),
            "{error}"
        );
        assert_eq!(
            error_after(|c| {
                second_user(c);
                c.users[1].vhosts = Some(vec!["/".into()]);
            }),
            "users[1].permissions[0].vhost: '/' is also in users[1].vhosts (full permissions); keep one of them"
        );
        assert_eq!(
            error_after(|c| {
                second_user(c);
                c.users[1].permissions.push(permission("/", ".*"));
            }),
            "users[1].permissions[1].vhost: '/' has permissions twice"
        );
        assert_eq!(
            error_after(|c| c.users[0].vhosts = Some(vec!["a".into(), "a".into()])),
            "users[0].vhosts[1]: 'a' is listed twice"
        );
        let topic = |exchange: &str, read: &str| TopicPermissionConfig {
            vhost: "/".into(),
            exchange: exchange.into(),
            write: "^{username}\\.".into(),
            read: read.into(),
        };
        let mut config = Config::default();
        config.users[0].topic_permissions = vec![topic("amq.topic", ".*")];
        config.validate().unwrap();
        let error = error_after(|c| {
            c.users[0].topic_permissions = vec![topic("amq.topic", ".*"), topic("t", "[")];
        });
        assert!(
            error.starts_with("users[0].topic_permissions[1].read: '[' is not"),
            "{error}"
        );
        assert_eq!(
            error_after(|c| {
                c.users[0].topic_permissions = vec![topic("t", ".*"), topic("t", ".*")];
            }),
            "users[0].topic_permissions[1].exchange: 't' in vhost '/' has topic permissions twice"
        );
    }

    #[test]
    fn the_vhosts_shorthand_defaults_to_the_default_vhost_without_permissions() {
        let mut user = Config::default().users[0].clone();
        user.vhosts = None;
        assert_eq!(
            user.full_access_vhosts(),
            Vec::<String>::new(),
            "guest has permissions"
        );
        user.permissions.clear();
        assert_eq!(user.full_access_vhosts(), ["/"]);
        user.vhosts = Some(vec![]);
        assert_eq!(user.full_access_vhosts(), Vec::<String>::new());
    }

    #[test]
    fn fdb_engine_needs_the_fdb_feature() {
        let mut config = Config::default();
        config.store.engine = EngineKind::Fdb;
        let result = config.validate();
        if ferry_store::FDB_BUILT_IN {
            result.unwrap();
        } else {
            assert_eq!(
                result.unwrap_err().to_string(),
                "store.engine: 'fdb' needs a ferry built with --features fdb"
            );
        }
    }
}
