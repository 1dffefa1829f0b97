//! The one error type of configuration loading, validation and preflight checks.

use std::path::PathBuf;

/// Why a configuration cannot be used; every message names the file or the key at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The config file could not be read (missing, unreadable, not UTF-8).
    #[error("cannot read config file '{}': {reason}", .path.display())]
    Read {
        /// The file Ferry was told to load.
        path: PathBuf,
        /// What the operating system said.
        reason: String,
    },
    /// The config file is not TOML.
    #[error("config file '{}' is not valid TOML: {reason}", .path.display())]
    Syntax {
        /// The file Ferry was told to load.
        path: PathBuf,
        /// Where the parser stopped and why, on one line.
        reason: String,
    },
    /// An environment override's value is not UTF-8, so it cannot be a setting.
    #[error("environment variable {var} is not valid UTF-8")]
    NotUnicode {
        /// The variable's name.
        var: String,
    },
    /// A key is unknown, or its value has the wrong type or is out of range.
    #[error("{key}: {message}")]
    Invalid {
        /// The dotted key path (`store.max_batch`).
        key: String,
        /// What is wrong with it, naming the bad value.
        message: String,
    },
    /// The `config` crate failed in a way not tied to one key.
    #[error("cannot load the configuration: {reason}")]
    Other {
        /// The `config` crate's message.
        reason: String,
    },
}

impl ConfigError {
    /// A [`ConfigError::Invalid`] for `key`.
    pub fn invalid(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            key: key.into(),
            message: message.into(),
        }
    }
}
