//! Loading: one TOML file, then `FERRY__SECTION__KEY` environment overrides on top.
//!
//! The `config` crate merges the two sources and deserializes the result; its errors are
//! translated here into [`ConfigError`]s that name the full key path (`metrics.listn`, not
//! just the section) and where the value came from (the file, or the variable that set it).

use super::{Config, ConfigError};
use config::{Environment, File, FileFormat};
use std::path::Path;

/// First part of every environment override's name.
pub const ENV_PREFIX: &str = "FERRY";
/// Separates prefix, section and key in an override's name (`FERRY__STORE__PATH`); a double
/// underscore because keys themselves contain single ones (`max_batch`).
pub const ENV_SEPARATOR: &str = "__";

/// Separates the entries of a list-valued override
/// (`FERRY__KAFKA__LISTENERS=SSL://0.0.0.0:9093,SASL_SSL://0.0.0.0:9094`).
pub const ENV_LIST_SEPARATOR: &str = ",";
/// The keys whose overrides are lists, split at [`ENV_LIST_SEPARATOR`]; every other
/// override is one value.
pub const ENV_LIST_KEYS: &[&str] = &["kafka.listeners", "kafka.advertised_listeners"];

/// Environment overrides by variable name, as the `config` crate takes them.
type Overrides = config::Map<String, String>;

/// The environment variable that overrides `key` (`store.path` → `FERRY__STORE__PATH`).
pub fn env_var(key: &str) -> String {
    format!(
        "{ENV_PREFIX}{ENV_SEPARATOR}{}",
        key.replace('.', ENV_SEPARATOR).to_uppercase()
    )
}

impl Config {
    /// Loads `path` and applies the `FERRY__SECTION__KEY` variables of this process over it.
    ///
    /// Keys absent from both take their defaults. Loading checks types and key names only;
    /// call [`Config::validate`] for ranges and formats.
    ///
    /// # Errors
    /// [`ConfigError::Read`] or [`ConfigError::Syntax`] naming the file when it is missing or
    /// not TOML; [`ConfigError::Invalid`] naming the key for an unknown key or a value of the
    /// wrong type, in the file or in the environment.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        Self::load_with(path.as_ref(), process_overrides()?)
    }

    /// [`Config::load`] with the overrides given instead of read from the process.
    pub(super) fn load_with(path: &Path, overrides: Overrides) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        Self::from_toml(&text, path, &overrides)
    }

    /// Parses `text`, the TOML of the file at `path` (which errors name), with `overrides`
    /// applied over it: [`Config::load_with`] without reading the file.
    pub(crate) fn from_toml(
        text: &str,
        path: &Path,
        overrides: &Overrides,
    ) -> Result<Self, ConfigError> {
        let sources = Sources {
            file: path,
            overrides,
        };
        let environment = ENV_LIST_KEYS.iter().fold(
            Environment::with_prefix(ENV_PREFIX)
                .prefix_separator(ENV_SEPARATOR)
                .separator(ENV_SEPARATOR)
                .try_parsing(true)
                .list_separator(ENV_LIST_SEPARATOR),
            |env, key| env.with_list_parse_key(key),
        );
        config::Config::builder()
            .add_source(File::from_str(text, FileFormat::Toml))
            .add_source(environment.source(Some(overrides.clone())))
            .build()
            .and_then(config::Config::try_deserialize)
            .map_err(|e| sources.explain(e))
    }
}

/// The `FERRY__*` variables of this process.
fn process_overrides() -> Result<Overrides, ConfigError> {
    let prefix = format!("{ENV_PREFIX}{ENV_SEPARATOR}");
    let mut overrides = Overrides::new();
    for (name, value) in std::env::vars_os() {
        // A variable whose name is not UTF-8 cannot spell a Ferry key, so it is not ours.
        let Some(name) = name.to_str() else { continue };
        if !name.to_ascii_uppercase().starts_with(&prefix) {
            continue;
        }
        let value = value.into_string().map_err(|_| ConfigError::NotUnicode {
            var: name.to_owned(),
        })?;
        overrides.insert(name.to_owned(), value);
    }
    Ok(overrides)
}

/// Where the values being loaded came from, to say which one is at fault.
struct Sources<'a> {
    /// The config file.
    file: &'a Path,
    /// The environment overrides applied over it.
    overrides: &'a Overrides,
}

impl Sources<'_> {
    /// Translates an error of the `config` crate into one that names the key and its source.
    fn explain(&self, err: config::ConfigError) -> ConfigError {
        use config::ConfigError as E;
        match err {
            E::FileParse { cause, .. } => ConfigError::Syntax {
                path: self.file.to_owned(),
                reason: one_line(&cause.to_string()),
            },
            E::Type {
                unexpected,
                expected,
                key,
                ..
            } => {
                let key = key.unwrap_or_default();
                let message = format!(
                    "expected {expected}, found {} {}",
                    found(&unexpected),
                    self.origin(&key)
                );
                ConfigError::invalid(key, message)
            }
            E::At { error, key, .. } => {
                self.explain_message(key.as_deref(), &without_strings(&error.to_string()))
            }
            E::Message(message) => self.explain_message(None, &without_strings(&message)),
            other => ConfigError::Other {
                reason: other.to_string(),
            },
        }
    }

    /// Explains a serde message raised while deserializing the table at `parent` (the root
    /// when `None`). An unknown key is reported by serde against its table, so its own name
    /// is taken from the message to give the full path.
    fn explain_message(&self, parent: Option<&str>, message: &str) -> ConfigError {
        let join = |child: &str| match parent {
            Some(parent) => format!("{parent}.{child}"),
            None => child.to_owned(),
        };
        match unknown_field(message) {
            Some(field) => {
                let key = join(field);
                let message = format!("unknown key {}", self.origin(&key));
                ConfigError::invalid(key, message)
            }
            None => match parent {
                Some(key) => ConfigError::invalid(key, format!("{message} {}", self.origin(key))),
                None => ConfigError::Other {
                    reason: message.to_owned(),
                },
            },
        }
    }

    /// `(set by FERRY__A__B)` when an override set `key` or a key below it, otherwise
    /// `(in config file 'path')`.
    fn origin(&self, key: &str) -> String {
        let var = env_var(key);
        let below = format!("{var}{ENV_SEPARATOR}");
        let mut setters: Vec<&String> = self
            .overrides
            .keys()
            .filter(|name| {
                let name = name.to_ascii_uppercase();
                name == var || name.starts_with(&below)
            })
            .collect();
        setters.sort();
        match setters.first() {
            Some(name) => format!("(set by {name})"),
            None => format!("(in config file '{}')", self.file.display()),
        }
    }
}

/// What a value of the wrong type was, without a string's text: a secret written into the
/// wrong key must not reach the error (and so the log).
/// (The `config` crate does not export its `Unexpected` type; its text form is all there is.)
fn found(unexpected: &impl std::fmt::Display) -> String {
    let text = unexpected.to_string();
    if text.starts_with("string ") {
        "a string".to_owned()
    } else {
        text
    }
}

/// serde's `invalid type: string "…", expected …` and `invalid value: string "…"` with
/// the string's text left out, for the reason [`found`] gives.
fn without_strings(message: &str) -> String {
    for lead in ["invalid type: string ", "invalid value: string "] {
        if let Some(rest) = message.strip_prefix(lead) {
            let after = rest
                .rfind("\", expected")
                .map_or("", |end| &rest[end + 1..]);
            return format!("{}a string{after}", &lead[..lead.len() - "string ".len()]);
        }
    }
    message.to_owned()
}

/// The field name in serde's `unknown field `x`, expected ...` message.
fn unknown_field(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown field `")?;
    rest.split_once('`').map(|(field, _)| field)
}

/// The TOML parser's multi-line report (position, source excerpt with a caret, reason)
/// folded into one line: `line 2, column 7: invalid string`.
fn one_line(report: &str) -> String {
    let is_excerpt = |line: &str| {
        let line = line.trim_start();
        line.starts_with('|')
            || line
                .split_once(" |")
                .is_some_and(|(number, _)| number.bytes().all(|b| b.is_ascii_digit()))
    };
    report
        .lines()
        .filter(|line| !line.trim().is_empty() && !is_excerpt(line))
        .map(|line| line.trim().trim_start_matches("TOML parse error at "))
        .collect::<Vec<_>>()
        .join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A config file with `text`, kept alive as long as the returned handle.
    fn file(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f
    }

    fn overrides(vars: &[(&str, &str)]) -> Overrides {
        vars.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn load(text: &str, vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let f = file(text);
        Config::load_with(f.path(), overrides(vars))
    }

    fn load_err(text: &str, vars: &[(&str, &str)]) -> String {
        load(text, vars).unwrap_err().to_string()
    }

    #[test]
    fn env_var_names_the_override_of_a_key() {
        assert_eq!(env_var("metrics.listen"), "FERRY__METRICS__LISTEN");
        assert_eq!(env_var("store.max_batch"), "FERRY__STORE__MAX_BATCH");
    }

    #[test]
    fn empty_file_gives_defaults() {
        assert_eq!(load("", &[]).unwrap(), Config::default());
    }

    #[test]
    fn file_values_replace_defaults() {
        let c = load("[store]\nmax_batch = 7\n[log]\nformat = \"json\"\n", &[]).unwrap();
        assert_eq!(c.store.max_batch, 7);
        assert_eq!(c.log.format, crate::LogFormat::Json);
    }

    #[test]
    fn env_overrides_parse_strings_integers_and_floats() {
        let c = load(
            "[metrics]\nlisten = \"0.0.0.0:1\"\n",
            &[
                ("FERRY__METRICS__LISTEN", "127.0.0.1:9100"),
                ("FERRY__STORE__PATH", "/x"),
                ("FERRY__STORE__MAX_BATCH", "12"),
                ("FERRY__STORE__INJECT_CONFLICT_RATE", "0.1"),
                ("FERRY__STORE__INJECT_UNKNOWN_RESULT_RATE", "1"),
                ("FERRY__STORE__PREFIX", "42"),
                ("FERRY__LOG__LEVEL", "warn,ferry=debug"),
            ],
        )
        .unwrap();
        assert_eq!(c.metrics.listen, "127.0.0.1:9100");
        assert_eq!(c.store.path, std::path::PathBuf::from("/x"));
        assert_eq!(c.store.max_batch, 12);
        assert_eq!(c.store.inject_conflict_rate, 0.1);
        assert_eq!(c.store.inject_unknown_result_rate, 1.0);
        assert_eq!(c.store.prefix, "42");
        assert_eq!(c.log.level, "warn,ferry=debug");
    }

    #[test]
    fn list_overrides_split_at_commas_and_others_stay_whole() {
        let c = load(
            "",
            &[
                (
                    "FERRY__KAFKA__LISTENERS",
                    "SSL://127.0.0.1:9093,SASL_SSL://127.0.0.1:9094",
                ),
                (
                    "FERRY__KAFKA__ADVERTISED_LISTENERS",
                    "SSL://kafka.example.com:9093",
                ),
                ("FERRY__LOG__LEVEL", "warn,ferry=debug"),
            ],
        )
        .unwrap();
        assert_eq!(
            c.kafka.listeners,
            ["SSL://127.0.0.1:9093", "SASL_SSL://127.0.0.1:9094"]
        );
        assert_eq!(
            c.kafka.advertised_listeners,
            ["SSL://kafka.example.com:9093"]
        );
        assert_eq!(c.log.level, "warn,ferry=debug");
    }

    #[test]
    fn variables_without_the_double_underscore_prefix_are_ignored() {
        let c = load("", &[("FERRY_METRICS__LISTEN", "x"), ("FERRYX__A", "1")]).unwrap();
        assert_eq!(c, Config::default());
    }

    #[test]
    fn missing_file_is_named() {
        let err = Config::load_with(Path::new("/nonexistent/ferry.toml"), Overrides::new())
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("cannot read config file '/nonexistent/ferry.toml': "),
            "{err}"
        );
    }

    #[test]
    fn unparsable_file_is_named_on_one_line() {
        let f = file("[store\npath = 1\n");
        let err = Config::load_with(f.path(), Overrides::new())
            .unwrap_err()
            .to_string();
        let expected = format!(
            "config file '{}' is not valid TOML: line 1",
            f.path().display()
        );
        assert!(err.starts_with(&expected), "{err}");
        assert!(!err.contains('\n'), "{err}");
    }

    #[test]
    fn unknown_key_in_file_is_named_with_its_section() {
        let f = file("[metrics]\nlisn = \"x\"\n");
        let err = Config::load_with(f.path(), Overrides::new())
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            format!(
                "metrics.lisn: unknown key (in config file '{}')",
                f.path().display()
            )
        );
    }

    #[test]
    fn unknown_section_in_file_is_named() {
        let err = load_err("[bogus]\nx = 1\n", &[]);
        assert!(
            err.starts_with("bogus: unknown key (in config file '"),
            "{err}"
        );
    }

    #[test]
    fn unknown_key_in_env_names_the_variable() {
        let err = load_err("", &[("FERRY__METRICS__LISN", "1")]);
        assert_eq!(
            err,
            "metrics.lisn: unknown key (set by FERRY__METRICS__LISN)"
        );
    }

    #[test]
    fn unknown_section_in_env_names_the_variable() {
        let err = load_err("", &[("FERRY__BOGUS__X", "1")]);
        assert_eq!(err, "bogus: unknown key (set by FERRY__BOGUS__X)");
    }

    #[test]
    fn wrong_type_in_env_names_key_and_variable() {
        let err = load_err("", &[("FERRY__STORE__MAX_BATCH", "many")]);
        assert!(err.starts_with("store.max_batch: expected "), "{err}");
        assert!(err.ends_with("(set by FERRY__STORE__MAX_BATCH)"), "{err}");
    }

    #[test]
    fn wrong_type_in_file_names_key_and_file() {
        let err = load_err("[daemon]\nshutdown_timeout_ms = \"soon\"\n", &[]);
        assert!(
            err.starts_with("daemon.shutdown_timeout_ms: expected "),
            "{err}"
        );
        assert!(err.contains("(in config file '"), "{err}");
    }

    #[test]
    fn a_string_of_the_wrong_type_is_not_echoed() {
        let err = load_err("[daemon]\nshutdown_timeout_ms = \"hunter2\"\n", &[]);
        assert!(!err.contains("hunter2"), "{err}");
        assert!(err.contains("found a string"), "{err}");
        let err = load_err("[[users]]\nname = \"u\"\nrequire_tls = \"s3cret\"\n", &[]);
        assert!(err.starts_with("users"), "{err}");
        assert!(!err.contains("s3cret"), "{err}");
        assert_eq!(
            without_strings("invalid type: string \"s3cret\", expected a boolean"),
            "invalid type: a string, expected a boolean"
        );
    }

    #[test]
    fn unknown_enum_value_names_the_key() {
        let err = load_err("[log]\nformat = \"xml\"\n", &[]);
        assert!(err.starts_with("log.format: "), "{err}");
        assert!(err.contains("xml"), "{err}");
    }

    #[test]
    fn serde_unknown_field_message_is_understood() {
        assert_eq!(
            unknown_field("unknown field `lisn`, expected `listen`"),
            Some("lisn")
        );
        assert_eq!(unknown_field("invalid type"), None);
    }
}
