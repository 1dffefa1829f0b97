//! `ferry bindings`: list AMQP bindings (`/api/bindings/…`).

use crate::client::{Client, ClientError, segment};
use crate::output::{Column, Output};
use clap::Subcommand;

/// What a binding listing shows.
const COLUMNS: &[Column] = &[
    ("VHOST", "vhost"),
    ("SOURCE", "source"),
    ("DESTINATION", "destination"),
    ("DESTINATION_TYPE", "destination_type"),
    ("ROUTING_KEY", "routing_key"),
    ("ARGUMENTS", "arguments"),
];

/// The binding commands.
#[derive(Debug, Clone, Subcommand)]
pub enum Bindings {
    /// Every binding (of one vhost with --vhost).
    List {
        /// Only this vhost's bindings.
        #[arg(long)]
        vhost: Option<String>,
    },
}

/// Runs one binding command.
pub(crate) fn run(client: &Client, command: Bindings) -> Result<Output, ClientError> {
    match command {
        Bindings::List { vhost } => {
            let path = match vhost {
                Some(v) => format!("/api/bindings/{}", segment(&v)),
                None => "/api/bindings".to_owned(),
            };
            Ok(Output::table(client.get(&path)?, COLUMNS))
        }
    }
}
