//! `[amqp]`: the AMQP 0-9-1 front.

use serde::Deserialize;

/// The key path of [`AmqpConfig::listen`].
pub const LISTEN_KEY: &str = "amqp.listen";

/// Default for `amqp.listen`.
pub const DEFAULT_AMQP_LISTEN: &str = "0.0.0.0:5672";

/// `[amqp]` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AmqpConfig {
    /// `host:port` the AMQP 0-9-1 front listens on.
    pub listen: String,
}

impl Default for AmqpConfig {
    fn default() -> Self {
        Self {
            listen: DEFAULT_AMQP_LISTEN.to_owned(),
        }
    }
}
