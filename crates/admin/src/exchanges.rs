//! `ferry exchanges`: list and delete AMQP exchanges (`/api/exchanges/…`).

use crate::client::{Client, ClientError, segment};
use crate::output::{Column, Output};
use clap::Subcommand;
use serde_json::json;

/// What an exchange listing shows.
const COLUMNS: &[Column] = &[
    ("VHOST", "vhost"),
    ("NAME", "name"),
    ("TYPE", "type"),
    ("DURABLE", "durable"),
    ("AUTO_DELETE", "auto_delete"),
    ("INTERNAL", "internal"),
];

/// The exchange commands.
#[derive(Debug, Clone, Subcommand)]
pub enum Exchanges {
    /// Every exchange (of one vhost with --vhost).
    List {
        /// Only this vhost's exchanges.
        #[arg(long)]
        vhost: Option<String>,
    },
    /// Deletes an exchange and its bindings.
    Delete {
        /// The exchange.
        name: String,
        /// Its vhost.
        #[arg(long, default_value = "/")]
        vhost: String,
        /// Refuse if it is the source of a binding.
        #[arg(long)]
        if_unused: bool,
    },
}

/// Runs one exchange command.
pub(crate) fn run(client: &Client, command: Exchanges) -> Result<Output, ClientError> {
    match command {
        Exchanges::List { vhost } => {
            let path = match vhost {
                Some(v) => format!("/api/exchanges/{}", segment(&v)),
                None => "/api/exchanges".to_owned(),
            };
            Ok(Output::table(client.get(&path)?, COLUMNS))
        }
        Exchanges::Delete {
            name,
            vhost,
            if_unused,
        } => {
            client.delete(&format!(
                "/api/exchanges/{}/{}?if-unused={if_unused}",
                segment(&vhost),
                segment(&name)
            ))?;
            Ok(Output::done(
                json!({"vhost": vhost, "exchange": name, "deleted": true}),
                format!("deleted exchange '{name}' in vhost '{vhost}'"),
            ))
        }
    }
}
