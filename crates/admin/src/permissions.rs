//! `ferry permissions`: list, set and clear users' permissions in vhosts (configure,
//! write and read patterns; `/api/permissions/…`, administrators only).

use crate::client::{Client, ClientError, segment};
use crate::output::{Column, Output};
use clap::Subcommand;
use serde_json::json;

/// What a permission listing shows.
const COLUMNS: &[Column] = &[
    ("USER", "user"),
    ("VHOST", "vhost"),
    ("CONFIGURE", "configure"),
    ("WRITE", "write"),
    ("READ", "read"),
];

/// The permission commands.
#[derive(Debug, Clone, Subcommand)]
pub enum Permissions {
    /// Every permission (of one vhost with --vhost, or one user with --user-name).
    List {
        /// Only this vhost's.
        #[arg(long, conflicts_with = "user_name")]
        vhost: Option<String>,
        /// Only this user's.
        #[arg(long)]
        user_name: Option<String>,
    },
    /// Sets a user's permissions in a vhost (regular expressions over resource names).
    Set {
        /// The user.
        name: String,
        /// The vhost.
        #[arg(long, default_value = "/")]
        vhost: String,
        /// Which resources the user may declare and delete.
        #[arg(long, default_value = ".*")]
        configure: String,
        /// Which resources the user may publish to (or bind from).
        #[arg(long, default_value = ".*")]
        write: String,
        /// Which resources the user may consume from (or bind to).
        #[arg(long, default_value = ".*")]
        read: String,
    },
    /// Takes a user's permissions in a vhost away.
    Clear {
        /// The user.
        name: String,
        /// The vhost.
        #[arg(long, default_value = "/")]
        vhost: String,
    },
}

/// Runs one permission command.
pub(crate) fn run(client: &Client, command: Permissions) -> Result<Output, ClientError> {
    match command {
        Permissions::List { vhost, user_name } => {
            let path = match (vhost, user_name) {
                (Some(v), _) => format!("/api/vhosts/{}/permissions", segment(&v)),
                (None, Some(u)) => format!("/api/users/{}/permissions", segment(&u)),
                (None, None) => "/api/permissions".to_owned(),
            };
            Ok(Output::table(client.get(&path)?, COLUMNS))
        }
        Permissions::Set {
            name,
            vhost,
            configure,
            write,
            read,
        } => {
            let body = json!({"configure": configure, "write": write, "read": read});
            client.put(&path(&vhost, &name), &body)?;
            Ok(Output::done(
                json!({"user": name, "vhost": vhost, "configure": configure, "write": write, "read": read}),
                format!("set the permissions of user '{name}' in vhost '{vhost}'"),
            ))
        }
        Permissions::Clear { name, vhost } => {
            client.delete(&path(&vhost, &name))?;
            Ok(Output::done(
                json!({"user": name, "vhost": vhost, "cleared": true}),
                format!("cleared the permissions of user '{name}' in vhost '{vhost}'"),
            ))
        }
    }
}

/// The URL path of `user`'s permissions in `vhost`.
fn path(vhost: &str, user: &str) -> String {
    format!("/api/permissions/{}/{}", segment(vhost), segment(user))
}
