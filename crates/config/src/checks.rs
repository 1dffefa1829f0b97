//! Value checks every section's validation shares: ranges and host names, each failing
//! with a [`ConfigError`] that names the key.

use super::ConfigError;
use std::fmt::Display;
use std::net::{Ipv4Addr, Ipv6Addr};

/// `value` ≥ `min`.
pub fn at_least<T: PartialOrd + Display>(key: &str, value: T, min: T) -> Result<(), ConfigError> {
    if value >= min {
        Ok(())
    } else {
        Err(ConfigError::invalid(
            key,
            format!("{value} must be at least {min}"),
        ))
    }
}

/// `min` ≤ `value` ≤ `max`.
pub fn between<T: PartialOrd + Display>(
    key: &str,
    value: T,
    min: T,
    max: T,
) -> Result<(), ConfigError> {
    if min <= value && value <= max {
        Ok(())
    } else {
        Err(ConfigError::invalid(
            key,
            format!("{value} must be between {min} and {max}"),
        ))
    }
}

/// A bare host, as clients are told to connect to: an IPv4 address, an IPv6 address
/// (without brackets) or a hostname.
pub fn is_host(host: &str) -> bool {
    host.parse::<Ipv4Addr>().is_ok() || host.parse::<Ipv6Addr>().is_ok() || is_hostname(host)
}

/// RFC 1123 hostname syntax: dot-separated labels of letters, digits and inner hyphens.
pub fn is_hostname(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}
