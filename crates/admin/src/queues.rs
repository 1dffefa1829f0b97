//! `ferry queues`: list, show, purge and delete AMQP queues (`/api/queues/…`).

use crate::client::{Client, ClientError, segment};
use crate::output::{Column, Output};
use clap::Subcommand;
use serde_json::json;

/// What a queue listing shows.
const COLUMNS: &[Column] = &[
    ("VHOST", "vhost"),
    ("NAME", "name"),
    ("TYPE", "type"),
    ("READY", "messages_ready"),
    ("UNACKED", "messages_unacknowledged"),
    ("CONSUMERS", "consumers"),
];

/// What one queue's page shows.
const FIELDS: &[Column] = &[
    ("NAME", "name"),
    ("VHOST", "vhost"),
    ("TYPE", "type"),
    ("DURABLE", "durable"),
    ("AUTO_DELETE", "auto_delete"),
    ("ARGUMENTS", "arguments"),
    ("READY", "messages_ready"),
    ("UNACKED", "messages_unacknowledged"),
    ("CONSUMERS", "consumers"),
    ("PUBLISHED", "message_stats.publish"),
    ("DELIVERED", "message_stats.deliver_get"),
];

/// The queue commands.
#[derive(Debug, Clone, Subcommand)]
pub enum Queues {
    /// Every queue (of one vhost with --vhost), with its message counts and consumers.
    List {
        /// Only this vhost's queues.
        #[arg(long)]
        vhost: Option<String>,
    },
    /// One queue's settings and counts.
    Show {
        /// The queue.
        name: String,
        /// Its vhost.
        #[arg(long, default_value = "/")]
        vhost: String,
    },
    /// Removes every ready message of a queue.
    Purge {
        /// The queue.
        name: String,
        /// Its vhost.
        #[arg(long, default_value = "/")]
        vhost: String,
    },
    /// Deletes a queue and its messages.
    Delete {
        /// The queue.
        name: String,
        /// Its vhost.
        #[arg(long, default_value = "/")]
        vhost: String,
        /// Refuse if it holds messages.
        #[arg(long)]
        if_empty: bool,
        /// Refuse if it has consumers.
        #[arg(long)]
        if_unused: bool,
    },
}

/// Runs one queue command.
pub(crate) fn run(client: &Client, command: Queues) -> Result<Output, ClientError> {
    match command {
        Queues::List { vhost } => {
            let path = match vhost {
                Some(v) => format!("/api/queues/{}", segment(&v)),
                None => "/api/queues".to_owned(),
            };
            Ok(Output::table(client.get(&path)?, COLUMNS))
        }
        Queues::Show { name, vhost } => {
            Ok(Output::fields(client.get(&path(&vhost, &name))?, FIELDS))
        }
        Queues::Purge { name, vhost } => {
            client.delete(&format!("{}/contents", path(&vhost, &name)))?;
            Ok(Output::done(
                json!({"vhost": vhost, "queue": name, "purged": true}),
                format!("purged queue '{name}' in vhost '{vhost}'"),
            ))
        }
        Queues::Delete {
            name,
            vhost,
            if_empty,
            if_unused,
        } => {
            let query = format!("?if-empty={if_empty}&if-unused={if_unused}");
            client.delete(&format!("{}{query}", path(&vhost, &name)))?;
            Ok(Output::done(
                json!({"vhost": vhost, "queue": name, "deleted": true}),
                format!("deleted queue '{name}' in vhost '{vhost}'"),
            ))
        }
    }
}

/// The URL path of queue `name` in `vhost`.
fn path(vhost: &str, name: &str) -> String {
    format!("/api/queues/{}/{}", segment(vhost), segment(name))
}
