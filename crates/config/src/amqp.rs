//! `[amqp]`: the AMQP 0-9-1 front.
//!
//! Each key is documented here and in the shipped `config/ferry.toml`; [`AmqpConfig::validate`]
//! checks ranges without I/O and names the key at fault.

use super::ConfigError;
use super::limits::MAX_MESSAGE_SIZE_LIMIT;
use ferry_auth::{CertLoginFrom, SanType};
use serde::Deserialize;
use std::time::Duration;

/// The key path of [`AmqpConfig::listen`].
pub const LISTEN_KEY: &str = "amqp.listen";

/// The key path of [`AmqpConfig::tls_listen`].
pub const TLS_LISTEN_KEY: &str = "amqp.tls_listen";

/// Default for `amqp.listen`.
pub const DEFAULT_AMQP_LISTEN: &str = "0.0.0.0:5672";

/// Default for `amqp.max_connections`: high enough that the open-file limit (which
/// `ferry run` raises to its hard limit) is the bound in practice, as RabbitMQ has no
/// connection limit by default.
pub const DEFAULT_MAX_CONNECTIONS: usize = 65_536;

/// The smallest `frame_max` AMQP 0-9-1 allows (`frame-min-size`).
pub const MIN_FRAME_MAX: u32 = 4096;

/// `[amqp]` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AmqpConfig {
    /// `host:port` the AMQP 0-9-1 front listens on in plaintext; empty: no plaintext
    /// listener (then `tls_listen` must be set).
    pub listen: String,
    /// `host:port` of the front's TLS listener (amqps, conventionally port 5671), with the
    /// certificate of `[tls]`; empty: none.
    pub tls_listen: String,
    /// The largest frame (header and end byte included) Ferry proposes in `connection.tune`;
    /// a client may ask for less, never more. Bounds what one read may allocate.
    pub frame_max: u32,
    /// The most channels a connection may have open at once (`connection.tune`
    /// channel-max); as with RabbitMQ, their numbers may be anything from 1 to 65535.
    pub channel_max: u16,
    /// Heartbeat interval, seconds, proposed in `connection.tune` (0: none). A peer silent
    /// for two intervals is considered dead and its connection closed.
    pub heartbeat_s: u16,
    /// The most simultaneous AMQP connections; further clients wait in the listen backlog.
    /// Each takes a file descriptor, so the process's open-file limit bounds them too.
    pub max_connections: usize,
    /// The largest message body a publisher may send, in bytes (16 MiB, RabbitMQ 4's
    /// default; at most 128 MiB, RabbitMQ 3's); a larger one closes its channel with 406
    /// PRECONDITION_FAILED before the body is read.
    pub max_message_size: u32,
    /// The virtual hosts that always exist (more can be made through the management API);
    /// `connection.open` to any other fails with 530.
    pub vhosts: Vec<String>,
    /// Milliseconds a client has from connecting to `connection.open-ok` before it is
    /// disconnected, so half-open connections cannot hold slots.
    pub handshake_timeout_ms: u64,
    /// Milliseconds a write to a client's socket may make no progress (the client reads
    /// nothing: a hung consumer) before its connection is closed and its unacknowledged
    /// deliveries are requeued; 0: no limit.
    pub send_timeout_ms: u64,
    /// Milliseconds a delivery may stay unacknowledged before its channel is closed with
    /// 406 PRECONDITION_FAILED and its deliveries requeued (RabbitMQ's `consumer_timeout`;
    /// a queue's `x-consumer-timeout` argument overrides it); 0: no limit.
    pub consumer_timeout_ms: u64,
    /// Ready messages across all AMQP queues above which publishing connections are
    /// blocked (`connection.blocked`) until the backlog falls below it; 0: no limit.
    pub max_backlog_messages: u64,
    /// Milliseconds between two checks of the resource limits and queue-depth metrics.
    pub resource_check_ms: u64,
    /// Where SASL EXTERNAL takes the user name from in a verified client certificate:
    /// `common_name` (the subject's CN), `distinguished_name` (the whole subject, RFC 2253)
    /// or `subject_alternative_name` (the first SAN of `ssl_cert_login_san_type`), as
    /// RabbitMQ's `ssl_cert_login_from`.
    pub ssl_cert_login_from: CertLoginFrom,
    /// Which subject alternative names `ssl_cert_login_from = "subject_alternative_name"`
    /// uses: `dns` or `email`.
    pub ssl_cert_login_san_type: SanType,
}

impl Default for AmqpConfig {
    fn default() -> Self {
        Self {
            listen: DEFAULT_AMQP_LISTEN.to_owned(),
            tls_listen: String::new(),
            frame_max: 131_072,
            channel_max: 2047,
            heartbeat_s: 60,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_message_size: 16 * 1024 * 1024,
            vhosts: vec![ferry_auth::DEFAULT_VHOST.to_owned()],
            handshake_timeout_ms: 10_000,
            send_timeout_ms: 30_000,
            consumer_timeout_ms: DEFAULT_CONSUMER_TIMEOUT_MS,
            max_backlog_messages: 0,
            resource_check_ms: 1000,
            ssl_cert_login_from: CertLoginFrom::default(),
            ssl_cert_login_san_type: SanType::default(),
        }
    }
}

/// Default for `amqp.consumer_timeout_ms`: 30 minutes, RabbitMQ's.
pub const DEFAULT_CONSUMER_TIMEOUT_MS: u64 = 1_800_000;

impl AmqpConfig {
    /// How long a delivery from a queue with `x-consumer-timeout` = `queue_timeout_ms`
    /// (if set) may stay unacknowledged; `None`: as long as it likes.
    pub fn consumer_timeout(&self, queue_timeout_ms: Option<u64>) -> Option<Duration> {
        match queue_timeout_ms {
            Some(ms) => Some(Duration::from_millis(ms)),
            None if self.consumer_timeout_ms == 0 => None,
            None => Some(Duration::from_millis(self.consumer_timeout_ms)),
        }
    }

    /// How long a write may make no progress, if it is bounded.
    pub fn send_timeout(&self) -> Option<Duration> {
        (self.send_timeout_ms > 0).then(|| Duration::from_millis(self.send_timeout_ms))
    }

    /// The handshake deadline.
    pub fn handshake_timeout(&self) -> Duration {
        Duration::from_millis(self.handshake_timeout_ms)
    }

    /// The period of the resource and depth checks.
    pub fn resource_check(&self) -> Duration {
        Duration::from_millis(self.resource_check_ms)
    }

    /// Checks every value's range. Pure.
    ///
    /// # Errors
    /// The first [`ConfigError::Invalid`] found, naming the key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.listen.is_empty() && self.tls_listen.is_empty() {
            return Err(ConfigError::invalid(
                LISTEN_KEY,
                format!("is empty and so is {TLS_LISTEN_KEY}: the AMQP front needs a listener"),
            ));
        }
        if self.frame_max < MIN_FRAME_MAX {
            return Err(ConfigError::invalid(
                "amqp.frame_max",
                format!(
                    "{} must be at least {MIN_FRAME_MAX} (AMQP's frame-min-size)",
                    self.frame_max
                ),
            ));
        }
        if self.channel_max == 0 {
            return Err(ConfigError::invalid(
                "amqp.channel_max",
                "0 must be at least 1",
            ));
        }
        if self.max_connections == 0 {
            return Err(ConfigError::invalid(
                "amqp.max_connections",
                "0 must be at least 1",
            ));
        }
        if !(1..=MAX_MESSAGE_SIZE_LIMIT).contains(&self.max_message_size) {
            return Err(ConfigError::invalid(
                "amqp.max_message_size",
                format!(
                    "{} must be between 1 and {MAX_MESSAGE_SIZE_LIMIT} (128 MiB, RabbitMQ 3's default)",
                    self.max_message_size
                ),
            ));
        }
        if self.vhosts.is_empty() {
            return Err(ConfigError::invalid(
                "amqp.vhosts",
                "must name at least one virtual host",
            ));
        }
        for (i, vhost) in self.vhosts.iter().enumerate() {
            if vhost.is_empty() || vhost.len() > 255 {
                return Err(ConfigError::invalid(
                    format!("amqp.vhosts[{i}]"),
                    format!("'{vhost}' must be 1 to 255 bytes long"),
                ));
            }
            if self.vhosts[..i].contains(vhost) {
                return Err(ConfigError::invalid(
                    format!("amqp.vhosts[{i}]"),
                    format!("'{vhost}' is listed twice"),
                ));
            }
        }
        for (key, value) in [
            ("amqp.handshake_timeout_ms", self.handshake_timeout_ms),
            ("amqp.resource_check_ms", self.resource_check_ms),
        ] {
            if value == 0 {
                return Err(ConfigError::invalid(key, "0 must be at least 1"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_after(edit: impl FnOnce(&mut AmqpConfig)) -> String {
        let mut config = AmqpConfig::default();
        edit(&mut config);
        config.validate().unwrap_err().to_string()
    }

    #[test]
    fn defaults_are_valid() {
        AmqpConfig::default().validate().unwrap();
    }

    #[test]
    fn frame_max_below_the_protocol_minimum_is_named() {
        assert_eq!(
            error_after(|c| c.frame_max = 1024),
            "amqp.frame_max: 1024 must be at least 4096 (AMQP's frame-min-size)"
        );
    }

    #[test]
    fn message_size_above_the_limit_is_named() {
        let message = error_after(|c| c.max_message_size = 129 * 1024 * 1024);
        assert_eq!(
            message,
            "amqp.max_message_size: 135266304 must be between 1 and 134217728 (128 MiB, RabbitMQ 3's default)"
        );
        let largest = AmqpConfig {
            max_message_size: 128 * 1024 * 1024,
            ..AmqpConfig::default()
        };
        largest.validate().unwrap();
    }

    #[test]
    fn duplicate_and_empty_vhosts_are_named_by_index() {
        assert_eq!(
            error_after(|c| c.vhosts = vec!["/".into(), "/".into()]),
            "amqp.vhosts[1]: '/' is listed twice"
        );
        assert_eq!(
            error_after(|c| c.vhosts = vec![String::new()]),
            "amqp.vhosts[0]: '' must be 1 to 255 bytes long"
        );
        assert_eq!(
            error_after(|c| c.vhosts.clear()),
            "amqp.vhosts: must name at least one virtual host"
        );
    }

    #[test]
    fn either_listener_may_be_off_but_not_both() {
        let mut config = AmqpConfig {
            listen: String::new(),
            tls_listen: "0.0.0.0:5671".into(),
            ..AmqpConfig::default()
        };
        config.validate().unwrap();
        config.tls_listen.clear();
        assert_eq!(
            config.validate().unwrap_err().to_string(),
            "amqp.listen: is empty and so is amqp.tls_listen: the AMQP front needs a listener"
        );
    }

    #[test]
    fn zero_limits_are_rejected() {
        assert_eq!(
            error_after(|c| c.channel_max = 0),
            "amqp.channel_max: 0 must be at least 1"
        );
        assert_eq!(
            error_after(|c| c.max_connections = 0),
            "amqp.max_connections: 0 must be at least 1"
        );
        assert_eq!(
            error_after(|c| c.resource_check_ms = 0),
            "amqp.resource_check_ms: 0 must be at least 1"
        );
    }
}
