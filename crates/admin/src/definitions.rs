//! `ferry definitions`: export every definition (vhosts, users, permissions, exchanges,
//! queues, bindings, routes) as RabbitMQ's JSON, to a file or standard output, and import
//! such a file in one transaction (`/api/definitions`, administrators only).

use crate::client::{Client, ClientError};
use crate::output::Output;
use clap::Subcommand;
use serde_json::{Value, json};
use std::path::PathBuf;

/// The definition commands.
#[derive(Debug, Clone, Subcommand)]
pub enum Definitions {
    /// Writes every definition to FILE (default: standard output).
    Export {
        /// Where to write them.
        file: Option<PathBuf>,
    },
    /// Reads definitions from FILE and creates (or updates) what they describe.
    Import {
        /// The definitions, as `export` writes them.
        file: PathBuf,
    },
}

/// Runs one definition command.
pub(crate) fn run(client: &Client, command: Definitions) -> Result<Output, ClientError> {
    match command {
        Definitions::Export { file: None } => {
            let definitions = client.get("/api/definitions")?;
            let text = serde_json::to_string_pretty(&definitions).unwrap_or_default();
            Ok(Output::done(definitions, text))
        }
        Definitions::Export { file: Some(file) } => {
            let definitions = client.get("/api/definitions")?;
            let text = serde_json::to_string_pretty(&definitions).unwrap_or_default();
            std::fs::write(&file, text + "\n")
                .map_err(|e| ClientError::Usage(format!("cannot write {}: {e}", file.display())))?;
            Ok(Output::done(
                json!({"exported": file}),
                format!("exported the definitions to {}", file.display()),
            ))
        }
        Definitions::Import { file } => {
            let unreadable =
                |e: String| ClientError::Usage(format!("cannot read {}: {e}", file.display()));
            let text = std::fs::read_to_string(&file).map_err(|e| unreadable(e.to_string()))?;
            let definitions: Value =
                serde_json::from_str(&text).map_err(|e| unreadable(e.to_string()))?;
            client.post("/api/definitions", &definitions)?;
            Ok(Output::done(
                json!({"imported": file}),
                format!("imported the definitions of {}", file.display()),
            ))
        }
    }
}
