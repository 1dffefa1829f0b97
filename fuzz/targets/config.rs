//! Configuration: `ferry.toml` text as an operator writes it.
//!
//! Feeds: `Config::from_toml` (the loading `ferry run` and `ferry validate` do, with an
//! empty environment: the `config` crate's TOML parser, serde with `deny_unknown_fields`,
//! and the translation of its errors into ones that name the key), then
//! `Config::validate` (every range, format, user, permission pattern, route and listener
//! check) and the listen addresses of a valid configuration.
//!
//! Bound: loading and validating allocate within a small multiple of the text, and a
//! bad file gives a `ConfigError`, never a panic; an error names the key without
//! echoing a string value (a secret in the wrong key must not reach the log).

use ferry::fuzzing::config_from_toml;

/// Feeds `data` to what this target drives; panics on what the target finds.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match config_from_toml(text) {
        Ok(config) => {
            if config.validate().is_ok() {
                let _ = config.listen_addresses();
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
}
