//! Logging: a `tracing` subscriber writing text or JSON lines to standard error.
//!
//! The filter comes from `log.level`, unless `RUST_LOG` is set: then `RUST_LOG` wins, so a
//! running unit can be made verbose without editing its config file.

use ferry_config::{LogConfig, LogFormat};
use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

/// The environment variable that replaces `log.level`.
pub const RUST_LOG: &str = "RUST_LOG";

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    /// The filter does not parse.
    #[error("{origin}: '{filter}' is not a valid filter: {reason}")]
    Filter {
        /// Where the filter came from: `log.level` or `RUST_LOG`.
        origin: &'static str,
        /// The filter text.
        filter: String,
        /// The parser's explanation.
        reason: String,
    },
    /// Something in this process already installed a global subscriber.
    #[error("a global tracing subscriber is already installed")]
    AlreadyInstalled,
}

/// Installs the process-wide subscriber.
///
/// # Errors
/// [`LoggingError::Filter`] for a filter that does not parse, [`LoggingError::AlreadyInstalled`]
/// when called twice.
pub fn init(config: &LogConfig) -> Result<(), LoggingError> {
    let (origin, filter) = match std::env::var(RUST_LOG) {
        Ok(value) if !value.trim().is_empty() => (RUST_LOG, value),
        _ => ("log.level", config.level.clone()),
    };
    let env_filter = EnvFilter::try_new(&filter).map_err(|e| LoggingError::Filter {
        origin,
        filter,
        reason: e.to_string(),
    })?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(env_filter)
        .with_writer(std::io::stderr)
        // Colour codes only help a person at a terminal; the journal and log files get plain text.
        .with_ansi(std::io::stderr().is_terminal());
    match config.format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    }
    .map_err(|_| LoggingError::AlreadyInstalled)
}
