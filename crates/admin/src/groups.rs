//! `ferry groups`: the Kafka front's consumer groups — listed, described with each
//! partition's lag, and their offsets reset as `kafka-consumer-groups --reset-offsets`
//! resets them: a dry run unless `--execute`, refused while the group has members
//! (`/api/ferry/kafka/groups/…`).

use crate::client::{Client, ClientError, segment};
use crate::datetime;
use crate::output::{Column, Output, Part};
use clap::{Args, Subcommand};
use serde_json::json;

/// What a group listing shows.
const COLUMNS: &[Column] = &[
    ("GROUP", "group_id"),
    ("STATE", "state"),
    ("PROTOCOL", "protocol"),
    ("MEMBERS", "members#"),
    ("TOTAL_LAG", "total_lag"),
];

/// What a group's description shows per partition, in `kafka-consumer-groups`' words.
const OFFSETS: &[Column] = &[
    ("TOPIC", "topic"),
    ("PARTITION", "partition"),
    ("CURRENT-OFFSET", "committed_offset"),
    ("LOG-END-OFFSET", "high_watermark"),
    ("LAG", "lag"),
];

/// What a reset shows.
const RESET: &[Column] = &[
    ("GROUP", "group_id"),
    ("TOPIC", "topic"),
    ("PARTITION", "partition"),
    ("NEW-OFFSET", "offset"),
];

/// The consumer group commands.
#[derive(Debug, Clone, Subcommand)]
pub enum Groups {
    /// Every consumer group with its state, members and total lag.
    List,
    /// One group: its state and members, and per partition its committed offset, the
    /// log end and the lag.
    Describe {
        /// The group.
        group: String,
    },
    /// Moves a group's committed offsets (a dry run that only shows them unless
    /// --execute). The group must have no active members.
    ResetOffsets(Reset),
}

/// `ferry groups reset-offsets`.
#[derive(Debug, Clone, Args)]
pub struct Reset {
    /// The group.
    group: String,
    /// A topic whose partitions to reset (repeatable; default: every topic the group has
    /// committed offsets for).
    #[arg(long = "topic", value_name = "TOPIC")]
    topics: Vec<String>,
    /// Where to move the offsets.
    #[command(flatten)]
    to: Target,
    /// Commit the new offsets (without it, nothing changes).
    #[arg(long)]
    execute: bool,
}

/// Where `reset-offsets` moves the offsets: exactly one of these.
#[derive(Debug, Clone, Args)]
#[group(required = true, multiple = false)]
struct Target {
    /// Each partition's first offset still stored.
    #[arg(long)]
    to_earliest: bool,
    /// Each partition's log end (the group skips what is there now).
    #[arg(long)]
    to_latest: bool,
    /// This offset, kept within each partition's earliest and latest.
    #[arg(long, value_name = "OFFSET")]
    to_offset: Option<u64>,
    /// The first record at or after this time, as 2024-05-01T12:00:00.000 (UTC unless it
    /// ends in Z or +HH:MM); the log end where none is that new.
    #[arg(long, value_name = "DATETIME")]
    to_datetime: Option<String>,
}

impl Target {
    /// The `to`, `offset` and `timestamp` fields of the API's reset body.
    fn body(&self) -> Result<serde_json::Value, ClientError> {
        Ok(
            match (
                self.to_earliest,
                self.to_latest,
                self.to_offset,
                &self.to_datetime,
            ) {
                (true, ..) => json!({"to": "earliest"}),
                (_, true, ..) => json!({"to": "latest"}),
                (_, _, Some(offset), _) => json!({"to": "offset", "offset": offset}),
                (_, _, _, Some(at)) => {
                    let ms = datetime::parse_ms(at).map_err(ClientError::Usage)?;
                    json!({"to": "timestamp", "timestamp": ms})
                }
                _ => {
                    return Err(ClientError::Usage(
                        "give one of --to-earliest, --to-latest, --to-offset, --to-datetime".into(),
                    ));
                }
            },
        )
    }
}

/// Runs one group command.
pub(crate) fn run(client: &Client, command: Groups) -> Result<Output, ClientError> {
    match command {
        Groups::List => Ok(Output::table(
            client.get("/api/ferry/kafka/groups")?,
            COLUMNS,
        )),
        Groups::Describe { group } => Ok(Output::new(
            client.get(&format!("/api/ferry/kafka/groups/{}", segment(&group)))?,
            vec![
                Part::Fields(&[
                    ("GROUP", "group_id"),
                    ("STATE", "state"),
                    ("PROTOCOL", "protocol"),
                    ("MEMBERS", "members#"),
                    ("TOTAL_LAG", "total_lag"),
                ]),
                Part::Table {
                    rows: "offsets",
                    columns: OFFSETS,
                },
            ],
        )),
        Groups::ResetOffsets(reset) => {
            let mut body = reset.to.body()?;
            body["dry_run"] = (!reset.execute).into();
            if !reset.topics.is_empty() {
                body["topics"] = reset.topics.clone().into();
            }
            let path = format!(
                "/api/ferry/kafka/groups/{}/reset-offsets",
                segment(&reset.group)
            );
            let offsets = client.post(&path, &body)?;
            let mut view = vec![Part::Table {
                rows: "",
                columns: RESET,
            }];
            if !reset.execute {
                view.push(Part::Text(
                    "dry run: nothing changed (add --execute to commit these offsets)".into(),
                ));
            }
            Ok(Output::new(offsets, view))
        }
    }
}
