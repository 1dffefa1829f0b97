//! `ferry topics`: list, show, create, alter the settings of, and delete the Kafka front's
//! topics (`/api/ferry/kafka/topics/…`).

use crate::client::{Client, ClientError, segment};
use crate::output::{Column, Output, Part};
use clap::Subcommand;
use serde_json::{Map, Value, json};

/// What a topic listing shows.
const COLUMNS: &[Column] = &[
    ("NAME", "name"),
    ("PARTITIONS", "partitions#"),
    ("RETENTION_MS", "config.retention.ms"),
];

/// What a topic's partition table shows.
const PARTITIONS: &[Column] = &[
    ("PARTITION", "partition"),
    ("LOG_START_OFFSET", "log_start_offset"),
    ("HIGH_WATERMARK", "high_watermark"),
    ("LAST_STABLE_OFFSET", "last_stable_offset"),
];

/// The topic commands.
#[derive(Debug, Clone, Subcommand)]
pub enum Topics {
    /// Every topic with its partition count.
    List,
    /// One topic: every setting's effective value and each partition's offsets.
    Show {
        /// The topic.
        name: String,
    },
    /// Creates a topic.
    Create {
        /// The topic.
        name: String,
        /// Its partition count (default: the daemon's `kafka.default_partitions`).
        #[arg(long)]
        partitions: Option<u32>,
        /// A setting, as `retention.ms=60000` (repeatable).
        #[arg(long = "config", value_name = "KEY=VALUE", value_parser = key_value)]
        configs: Vec<(String, String)>,
    },
    /// Changes a topic's settings: --set some, --delete others back to their default.
    Alter {
        /// The topic.
        name: String,
        /// A setting to set, as `retention.ms=60000` (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE", value_parser = key_value)]
        set: Vec<(String, String)>,
        /// A setting to take back to its default (repeatable).
        #[arg(long = "delete", value_name = "KEY")]
        delete: Vec<String>,
    },
    /// Deletes a topic and its records.
    Delete {
        /// The topic.
        name: String,
    },
}

/// `KEY=VALUE` split at its first `=`.
fn key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("'{text}' is not KEY=VALUE")),
    }
}

/// Runs one topic command.
pub(crate) fn run(client: &Client, command: Topics) -> Result<Output, ClientError> {
    match command {
        Topics::List => Ok(Output::table(
            client.get("/api/ferry/kafka/topics")?,
            COLUMNS,
        )),
        Topics::Show { name } => Ok(Output::new(
            client.get(&path(&name))?,
            vec![
                Part::Fields(&[("NAME", "name")]),
                Part::Map("configs"),
                Part::Table {
                    rows: "partitions",
                    columns: PARTITIONS,
                },
            ],
        )),
        Topics::Create {
            name,
            partitions,
            configs,
        } => {
            let configs: Map<String, Value> =
                configs.into_iter().map(|(k, v)| (k, v.into())).collect();
            let mut body = json!({"configs": configs});
            if let Some(n) = partitions {
                body["partitions"] = n.into();
            }
            client.put(&path(&name), &body)?;
            Ok(Output::done(
                json!({"topic": name, "created": true}),
                format!("created topic '{name}'"),
            ))
        }
        Topics::Alter { name, set, delete } => {
            if set.is_empty() && delete.is_empty() {
                return Err(ClientError::Usage(
                    "nothing to change: give --set KEY=VALUE or --delete KEY".into(),
                ));
            }
            let mut changes: Map<String, Value> =
                set.into_iter().map(|(k, v)| (k, v.into())).collect();
            changes.extend(delete.into_iter().map(|k| (k, Value::Null)));
            client.put(
                &format!("{}/config", path(&name)),
                &Value::Object(changes.clone()),
            )?;
            Ok(Output::done(
                json!({"topic": name, "changed": changes}),
                format!("changed the settings of topic '{name}'"),
            ))
        }
        Topics::Delete { name } => {
            client.delete(&path(&name))?;
            Ok(Output::done(
                json!({"topic": name, "deleted": true}),
                format!("deleted topic '{name}'"),
            ))
        }
    }
}

/// The URL path of topic `name`.
fn path(name: &str) -> String {
    format!("/api/ferry/kafka/topics/{}", segment(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_key_value_pairs() {
        assert_eq!(
            key_value("retention.ms=6=0").unwrap(),
            ("retention.ms".to_owned(), "6=0".to_owned())
        );
        assert!(key_value("retention.ms").is_err());
        assert!(key_value("=5").is_err());
    }
}
