//! `ferry`'s admin commands: a client of Ferry's management HTTP API, and nothing of the
//! server — it names no crate of the daemon, so it works against any instance it can
//! reach, and shows only what the API answers (`docs/operations.md`, "The ferry admin
//! command").
//!
//! [`Command`] is the command line (clap), one module per resource family, each with its
//! subcommands and what they ask the API: [`status`] (overview and health checks),
//! [`queues`], [`exchanges`], [`bindings`], [`connections`], [`topics`], [`groups`]
//! (consumer groups and offset resets, with [`datetime`] for `--to-datetime`),
//! [`routes`], [`users`], [`permissions`], [`definitions`]. Around them: [`client`] (HTTP,
//! credentials, TLS, errors) and [`output`] (tables or `--json`).

mod bindings;
mod client;
mod connections;
mod datetime;
mod definitions;
mod exchanges;
mod groups;
mod output;
mod permissions;
mod queues;
mod routes;
mod status;
mod topics;
mod users;

pub use bindings::Bindings;
pub use client::ClientError;
pub use connections::Connections;
pub use definitions::Definitions;
pub use exchanges::Exchanges;
pub use groups::{Groups, Reset};
pub use permissions::Permissions;
pub use queues::Queues;
pub use routes::Routes;
pub use topics::Topics;
pub use users::Users;

use clap::{Args, Subcommand};
use std::path::PathBuf;

/// The management API's address when `--url` and `FERRY_URL` are not given: the daemon's
/// default `management.listen`.
pub const DEFAULT_URL: &str = "http://127.0.0.1:15672";

/// Where the management API is, who asks, and how to print: the flags of every admin
/// command.
#[derive(Clone, Args)]
#[command(next_help_heading = "Connection and output")]
pub struct Connection {
    /// The management API's base URL.
    #[arg(long, global = true, env = "FERRY_URL", default_value = DEFAULT_URL)]
    pub url: String,
    /// The user to log in as.
    #[arg(long, global = true, env = "FERRY_USER", default_value = "guest")]
    pub user: String,
    /// That user's password.
    #[arg(
        long,
        global = true,
        env = "FERRY_PASSWORD",
        default_value = "guest",
        hide_env_values = true,
        hide_default_value = true
    )]
    pub password: String,
    /// PEM file of the certificates to trust for an https URL (default: the usual public
    /// roots).
    #[arg(long, global = true, env = "FERRY_CA_FILE", value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// Print the API's JSON answer instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
}

/// The admin commands; each takes the [`Connection`] flags, after its name or its
/// subcommand's (`ferry queues list --json`).
#[derive(Clone, Subcommand)]
pub enum Command {
    /// The instance's overview: version, listeners, object and message totals.
    Status(Connection),
    /// The health checks (resource alarms, virtual hosts); exit code 1 when one fails.
    Health(Connection),
    /// AMQP queues: list, show, purge, delete.
    Queues {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: Queues,
    },
    /// AMQP exchanges: list, delete.
    Exchanges {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: Exchanges,
    },
    /// AMQP bindings: list.
    Bindings {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: Bindings,
    },
    /// AMQP client connections: list, close.
    Connections {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: Connections,
    },
    /// Kafka topics: list, show, create, alter settings, delete.
    Topics {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: Topics,
    },
    /// Kafka consumer groups: list, describe with lag, reset offsets.
    Groups {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: Groups,
    },
    /// The bridge's routes: list, show, pause, resume, replay dead letters.
    Routes {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: Routes,
    },
    /// Users: list, add, delete.
    Users {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: Users,
    },
    /// Users' permissions in vhosts: list, set, clear.
    Permissions {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: Permissions,
    },
    /// Definitions: export to a file, import from one.
    Definitions {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: Definitions,
    },
}

impl Command {
    /// The connection flags given with the command.
    fn connection(&self) -> &Connection {
        match self {
            Self::Status(connection)
            | Self::Health(connection)
            | Self::Queues { connection, .. }
            | Self::Exchanges { connection, .. }
            | Self::Bindings { connection, .. }
            | Self::Connections { connection, .. }
            | Self::Topics { connection, .. }
            | Self::Groups { connection, .. }
            | Self::Routes { connection, .. }
            | Self::Users { connection, .. }
            | Self::Permissions { connection, .. }
            | Self::Definitions { connection, .. } => connection,
        }
    }
}

/// The client `connection` names.
fn client(connection: &Connection) -> Result<client::Client, ClientError> {
    client::Client::new(&client::Connection {
        url: &connection.url,
        user: &connection.user,
        password: &connection.password,
        ca_file: connection.ca_file.as_deref(),
    })
}

/// Copies a running daemon's backup (`GET /api/ferry/backup`, the whole store at one
/// read version) to `out` as it streams; returns that read version.
///
/// # Errors
/// [`ClientError`]: the API refused (not an administrator; FoundationDB), could not be
/// reached, or broke off.
pub fn backup(
    connection: &Connection,
    out: &mut impl std::io::Write,
) -> Result<String, ClientError> {
    let version = client(connection)?.download("/api/ferry/backup", "x-ferry-read-version", out)?;
    Ok(version.unwrap_or_default())
}

/// Runs `command` against the API its flags name; the text to print (a table, or JSON
/// with `--json`).
///
/// # Errors
/// [`ClientError`]: the API refused (its status and reason), could not be reached, or the
/// command line asks for something impossible.
pub fn run(command: Command) -> Result<String, ClientError> {
    let connection = command.connection().clone();
    let client = client(&connection)?;
    let output = match command {
        Command::Status(_) => status::status(&client),
        Command::Health(_) => status::health(&client),
        Command::Queues { command, .. } => queues::run(&client, command),
        Command::Exchanges { command, .. } => exchanges::run(&client, command),
        Command::Bindings { command, .. } => bindings::run(&client, command),
        Command::Connections { command, .. } => connections::run(&client, command),
        Command::Topics { command, .. } => topics::run(&client, command),
        Command::Groups { command, .. } => groups::run(&client, command),
        Command::Routes { command, .. } => routes::run(&client, command),
        Command::Users { command, .. } => users::run(&client, command),
        Command::Permissions { command, .. } => permissions::run(&client, command),
        Command::Definitions { command, .. } => definitions::run(&client, command),
    }?;
    Ok(output.render(connection.json))
}
