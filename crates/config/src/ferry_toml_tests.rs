//! Keeps the shipped `config/ferry.toml` honest: it loads to exactly [`Config::default`],
//! and it lists every key of every section, each under a `#` comment, so the file cannot
//! fall behind the structs.

use super::{
    AmqpConfig, Config, DaemonConfig, KafkaConfig, LogConfig, ManagementConfig, MetricsConfig,
    StageConfig, StoreConfig, TlsConfig, UserConfig,
};
use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn shipped_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/ferry.toml")
}

#[test]
fn shipped_file_loads_to_the_defaults() {
    let loaded = Config::load_with(&shipped_file(), Default::default()).unwrap();
    let defaults = Config::default();
    assert_eq!(loaded.store, defaults.store);
    assert_eq!(loaded.stage, defaults.stage);
    assert_eq!(loaded.metrics, defaults.metrics);
    assert_eq!(loaded.management, defaults.management);
    assert_eq!(loaded.tls, defaults.tls);
    assert_eq!(loaded.log, defaults.log);
    assert_eq!(loaded.daemon, defaults.daemon);
    assert_eq!(loaded.amqp, defaults.amqp);
    assert_eq!(loaded.kafka, defaults.kafka);
    assert_eq!(loaded.users, defaults.users);
    assert_eq!(loaded, defaults);
}

#[test]
fn shipped_file_is_valid() {
    let loaded = Config::load_with(&shipped_file(), Default::default()).unwrap();
    loaded.validate().unwrap();
}

#[test]
fn shipped_file_lists_every_key_under_a_comment() {
    let sections = [
        ("store", fields_of::<StoreConfig>()),
        ("stage", fields_of::<StageConfig>()),
        ("amqp", fields_of::<AmqpConfig>()),
        ("kafka", fields_of::<KafkaConfig>()),
        ("users", fields_of::<UserConfig>()),
        ("metrics", fields_of::<MetricsConfig>()),
        ("management", fields_of::<ManagementConfig>()),
        ("tls", fields_of::<TlsConfig>()),
        ("log", fields_of::<LogConfig>()),
        ("daemon", fields_of::<DaemonConfig>()),
    ];
    // A new section must be added to the list above (and to the file). The bridge's
    // tables are user-named and empty by default; the file shows them in a commented
    // example instead.
    let mut listed: BTreeSet<&str> = sections.iter().map(|(name, _)| *name).collect();
    listed.extend(["sources", "sinks", "routes"]);
    assert_eq!(listed, fields_of::<Config>().into_iter().collect());

    let expected: BTreeSet<String> = sections
        .iter()
        .flat_map(|(section, fields)| fields.iter().map(move |f| format!("{section}.{f}")))
        .collect();
    let text = std::fs::read_to_string(shipped_file()).unwrap();
    assert_eq!(keys_with_comments(&text), expected);
}

/// Every `section.key` set in a TOML text; panics on a key whose previous non-empty line
/// is not a `#` comment.
fn keys_with_comments(text: &str) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    let mut section = String::new();
    let mut previous = "";
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        // `[section]`, or `[[section]]` for an array of tables such as `[[users]]`.
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.trim_matches(|c| c == '[' || c == ']').to_owned();
        } else if let Some((key, _)) = line.split_once('=').filter(|_| !line.starts_with('#')) {
            let key = format!("{section}.{}", key.trim());
            assert!(previous.starts_with('#'), "{key} has no comment above it");
            keys.insert(key);
        }
        previous = line;
    }
    keys
}

/// The field names `T`'s derived `Deserialize` expects, read from the list serde passes to
/// `deserialize_struct`.
fn fields_of<T: for<'de> Deserialize<'de>>() -> Vec<&'static str> {
    let mut fields = Vec::new();
    // The capturing deserializer always fails after recording the names.
    let _ = T::deserialize(FieldNames(&mut fields));
    assert!(
        !fields.is_empty(),
        "{} is not a struct",
        std::any::type_name::<T>()
    );
    fields
}

/// A deserializer that records the field list of the struct asked of it.
struct FieldNames<'a>(&'a mut Vec<&'static str>);

impl<'de> Deserializer<'de> for FieldNames<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("only structs have field names"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.extend_from_slice(fields);
        Err(de::Error::custom("field names recorded"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}
