//! `ferry users`: list, add (or change) and delete users (`/api/users/…`, administrators
//! only). A new user's password comes from `--new-password` or one line of standard
//! input, and is sent only in the request body.

use crate::client::{Client, ClientError, segment};
use crate::output::{Column, Output};
use clap::Subcommand;
use serde_json::json;

/// What a user listing shows (never the password hash).
const COLUMNS: &[Column] = &[("NAME", "name"), ("TAGS", "tags")];

/// The user commands.
#[derive(Debug, Clone, Subcommand)]
pub enum Users {
    /// Every user with their tags.
    List,
    /// Adds a user, or sets an existing user's password and tags.
    Add {
        /// The user's name.
        name: String,
        /// The user's password (default: one line read from standard input).
        #[arg(long)]
        new_password: Option<String>,
        /// Comma-separated tags: administrator, monitoring, management, ...
        #[arg(long, default_value = "")]
        tags: String,
    },
    /// Deletes a user with their permissions.
    Delete {
        /// The user's name.
        name: String,
    },
}

/// Runs one user command.
pub(crate) fn run(client: &Client, command: Users) -> Result<Output, ClientError> {
    match command {
        Users::List => Ok(Output::table(client.get("/api/users")?, COLUMNS)),
        Users::Add {
            name,
            new_password,
            tags,
        } => {
            let password = match new_password {
                Some(p) => p,
                None => read_line()?,
            };
            if password.is_empty() {
                return Err(ClientError::Usage(format!(
                    "the password of user '{name}' is empty"
                )));
            }
            client.put(
                &format!("/api/users/{}", segment(&name)),
                &json!({"password": password, "tags": tags}),
            )?;
            Ok(Output::done(
                json!({"user": name, "tags": tags}),
                format!("set user '{name}'"),
            ))
        }
        Users::Delete { name } => {
            client.delete(&format!("/api/users/{}", segment(&name)))?;
            Ok(Output::done(
                json!({"user": name, "deleted": true}),
                format!("deleted user '{name}'"),
            ))
        }
    }
}

/// One line of standard input, without its line ending.
fn read_line() -> Result<String, ClientError> {
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).map_err(|e| {
        ClientError::Usage(format!("cannot read the password from standard input: {e}"))
    })?;
    Ok(line.trim_end_matches(['\r', '\n']).to_owned())
}
