//! `ferry routes`: the bridge's routes — listed, shown, paused and resumed on every
//! instance, and a destination's dead letters replayed (`/api/ferry/routes/…`).

use crate::client::{Client, ClientError, segment};
use crate::output::{Column, Output, Part};
use clap::Subcommand;
use serde_json::{Value, json};

/// What a route listing shows.
const COLUMNS: &[Column] = &[
    ("NAME", "name"),
    ("ORIGIN", "origin"),
    ("STATE", "state"),
    ("READY", "messages_ready"),
    ("UNACKED", "messages_unacknowledged"),
    ("DEAD_LETTERS", "dead_letters"),
];

/// What a route's destination table shows.
const DESTINATIONS: &[Column] = &[
    ("INDEX", "index"),
    ("ENDPOINT", "endpoint"),
    ("CONNECTION", "connection"),
    ("READY", "messages_ready"),
    ("UNACKED", "messages_unacknowledged"),
    ("DEAD_LETTERS", "dead_letters"),
];

/// The route commands.
#[derive(Debug, Clone, Subcommand)]
pub enum Routes {
    /// Every route with its state and the messages it holds.
    List,
    /// One route, destination by destination.
    Show {
        /// The route.
        name: String,
    },
    /// Stops a route on every instance (its source stops consuming; staged messages wait).
    Pause {
        /// The route.
        name: String,
    },
    /// Starts a paused route again.
    Resume {
        /// The route.
        name: String,
    },
    /// Moves a destination's dead letters back to its stage, to be delivered again.
    Replay {
        /// The route.
        name: String,
        /// The destination's place in the route's `to` list.
        #[arg(long, default_value_t = 0)]
        destination: usize,
    },
}

/// Runs one route command.
pub(crate) fn run(client: &Client, command: Routes) -> Result<Output, ClientError> {
    match command {
        Routes::List => Ok(Output::table(client.get("/api/ferry/routes")?, COLUMNS)),
        Routes::Show { name } => Ok(Output::new(
            client.get(&path(&name))?,
            vec![
                Part::Fields(&COLUMNS[..3]),
                Part::Table {
                    rows: "destinations",
                    columns: DESTINATIONS,
                },
            ],
        )),
        Routes::Pause { name } => action(client, &name, "pause", "paused"),
        Routes::Resume { name } => action(client, &name, "resume", "resumed"),
        Routes::Replay { name, destination } => {
            let moved = client.post(
                &format!(
                    "{}/destinations/{destination}/dead-letters/replay",
                    path(&name)
                ),
                &json!({}),
            )?;
            let count = moved.get("replayed").and_then(Value::as_u64).unwrap_or(0);
            Ok(Output::done(
                moved,
                format!(
                    "replayed {count} dead letter(s) of route '{name}' destination {destination}"
                ),
            ))
        }
    }
}

/// `POST /api/ferry/routes/{name}/{action}`, said as `done`.
fn action(client: &Client, name: &str, action: &str, done: &str) -> Result<Output, ClientError> {
    client.post(&format!("{}/{action}", path(name)), &json!({}))?;
    Ok(Output::done(
        json!({"route": name, done: true}),
        format!("{done} route '{name}'"),
    ))
}

/// The URL path of route `name`.
fn path(name: &str) -> String {
    format!("/api/ferry/routes/{}", segment(name))
}
