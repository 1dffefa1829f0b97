//! `ferry connections`: list AMQP connections and close one (`/api/connections/…`).

use crate::client::{Client, ClientError, segment};
use crate::output::{Column, Output};
use clap::Subcommand;
use serde_json::json;

/// What a connection listing shows.
const COLUMNS: &[Column] = &[
    ("NAME", "name"),
    ("USER", "user"),
    ("VHOST", "vhost"),
    ("PROTOCOL", "protocol"),
    ("CHANNELS", "channels"),
    ("STATE", "state"),
];

/// The connection commands.
#[derive(Debug, Clone, Subcommand)]
pub enum Connections {
    /// Every client connection.
    List,
    /// Closes a connection (its client sees CONNECTION_FORCED).
    Close {
        /// The connection's name, as `list` shows it.
        name: String,
    },
}

/// Runs one connection command.
pub(crate) fn run(client: &Client, command: Connections) -> Result<Output, ClientError> {
    match command {
        Connections::List => Ok(Output::table(client.get("/api/connections")?, COLUMNS)),
        Connections::Close { name } => {
            client.delete(&format!("/api/connections/{}", segment(&name)))?;
            Ok(Output::done(
                json!({"connection": name, "closed": true}),
                format!("closed connection '{name}'"),
            ))
        }
    }
}
