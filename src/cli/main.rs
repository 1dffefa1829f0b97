//! The `ferry` binary: parses the command line, loads and checks the configuration, and
//! runs the daemon or reports on the configuration; `ferry bench` runs the load tools of
//! the `ferry-bench` crate, which this binary links and the daemon's library does not.
//! The admin commands (`ferry status`, `ferry queues …`, `ferry groups reset-offsets …`)
//! are the `ferry-admin` crate's, a client of a running daemon's management API.
//!
//! This is the edge where errors become one line on standard error and an exit code:
//! 0 on success (and after a SIGTERM drain), 2 for a configuration that does not load,
//! validate or pass preflight, 1 for anything else.

mod allocator_metrics;
mod backup;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use ferry_config::{Config, ConfigError};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// jemalloc instead of glibc's allocator: the message path allocates and frees many
/// short-lived buffers from several threads, where glibc's bins fragment and its
/// `malloc` searches them (measured in docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read before `main` (the C library's weak `malloc_conf`, under
/// tikv-jemalloc's `_rjem_` prefix): a background thread returns freed pages to the system
/// even while no thread allocates, so the resident memory — what the memory high-water
/// mark (`daemon.max_memory_mb`) and the kernel's OOM killer see — falls once a load has
/// passed instead of staying at its peak; and it returns them after 1 s instead of
/// jemalloc's 10 s, because the store's cache frees pages in bursts (a retention pass
/// drops tens of MB at once) that otherwise sat resident for 10 s each: 60–95 MiB of a
/// soak's resident size, against ~14 MiB with 1 s, at no measurable CPU cost
/// (docs/benchmarks.md, "Soak"). `_RJEM_MALLOC_CONF` in the environment adds to these.
#[allow(
    unsafe_code,
    reason = "jemalloc reads its options from this exported symbol, which nothing else defines"
)]
#[unsafe(export_name = "_rjem_malloc_conf")]
static JEMALLOC_OPTIONS: &[u8; 43] = b"background_thread:true,dirty_decay_ms:1000\0";

/// The config file used when `--config` is not given.
const DEFAULT_CONFIG: &str = "config/ferry.toml";

/// Exit code for a configuration that cannot be used.
const EXIT_CONFIG: u8 = 2;
/// Exit code for every other failure.
const EXIT_FAILURE: u8 = 1;

/// How long the runtime may wait, after the daemon returned, for blocking work to end.
const RUNTIME_SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// Ferry: AMQP 0-9-1 and Kafka fronts over durable queues in a transactional store.
#[derive(Parser)]
#[command(name = "ferry", version)]
struct Cli {
    /// What to do.
    #[command(subcommand)]
    command: Command,
}

/// The subcommands; each is one variant with its own arguments.
#[derive(Subcommand)]
enum Command {
    /// Run the daemon until SIGTERM or SIGINT.
    Run(RunArgs),
    /// Check a configuration (file, FERRY__SECTION__KEY overrides, store path, addresses)
    /// without starting; warn about listen addresses another process holds.
    Validate(ConfigArgs),
    /// Print every credential a `[[users]]` entry can hold for a password, as TOML lines
    /// to paste into the entry: `password_hash` (RabbitMQ's format, for PLAIN and
    /// AMQPLAIN), `scram_sha_256` and `scram_sha_512` (Kafka's SCRAM form). Reads the
    /// password from standard input when it is not given.
    HashPassword {
        /// The password.
        password: Option<String>,
    },
    /// Move a route destination's dead-lettered messages (stage `bridge.ROUTE.INDEX.dead`)
    /// back to its stage, to be delivered again. With the embedded engine, stop the daemon
    /// first: its store belongs to one process.
    Replay {
        /// The configuration whose store holds the route.
        #[command(flatten)]
        config: ConfigArgs,
        /// The route's name.
        #[arg(long)]
        route: String,
        /// The destination's place in the route's `to` list.
        #[arg(long, default_value_t = 0)]
        destination: usize,
    },
    /// Write the whole store at one read version to FILE (a consistent backup, with
    /// checksums): from a running daemon through its management API (an administrator's
    /// login), or with `--config` from that configuration's store directly (the embedded
    /// engine's store belongs to one process: only while no daemon runs on it).
    /// FoundationDB: use fdbbackup.
    Backup {
        /// Read this configuration's store directly instead of asking a daemon.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// The daemon to ask, and who asks.
        #[command(flatten)]
        connection: ferry_admin::Connection,
        /// The backup file (written as FILE.partial, renamed when complete).
        #[arg(value_name = "FILE")]
        out: PathBuf,
    },
    /// Load a backup FILE into the store of `--config`, which must be empty (a new
    /// `store.path`); then `ferry run` on it recovers as after a kill -9 at the backup's
    /// read version.
    Restore {
        /// The configuration whose (empty) store to load.
        #[command(flatten)]
        config: ConfigArgs,
        /// The backup file.
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
    /// Run a load benchmark and print its figures.
    #[command(subcommand)]
    Bench(Bench),
    /// The admin commands, over a running daemon's management API.
    #[command(flatten)]
    Admin(ferry_admin::Command),
}

/// The benchmarks.
#[derive(Subcommand)]
enum Bench {
    /// Durable appends and pops on one stage of the embedded engine.
    Stage(ferry_bench::stage::StageBench),
    /// Produce (acks=all), group fetch and end-to-end latency against a Kafka broker.
    Kafka(ferry_bench::kafka::KafkaBench),
    /// Publish-with-confirms, consume-with-acks and confirm latency against any AMQP 0-9-1
    /// broker (Ferry or RabbitMQ), through lapin.
    Amqp(ferry_bench::amqp::AmqpBench),
    /// Moving persistent messages through Ferry's bridge: between two RabbitMQ queues
    /// (against RabbitMQ's Shovel plugin), or between a Kafka topic on librdkafka's mock
    /// cluster and a RabbitMQ queue (`--path`).
    Bridge(ferry_bench::bridge::BridgeBench),
    /// Overload of a running broker (issue 17): a publisher flood without consumers and its
    /// drain, thousands of idle connections, consumers that never read, connections that
    /// never finish the handshake; the broker's memory, descriptors and CPU from /proc, and
    /// a probe client's latency beside the load.
    Overload(ferry_bench::overload::OverloadBench),
    /// Soak (issue 17): AMQP, Kafka and a bridge route at once against a running `ferry
    /// run`, each at a fixed rate for 30 minutes; per minute the rates, end-to-end latency
    /// and the broker's memory, descriptors and CPU; then memory growth, p99 drift and
    /// losses. Exit code 1 when a message was lost or a workload stalled.
    #[command(after_long_help = ferry_bench::soak::HELP)]
    Soak(ferry_bench::soak::SoakBench),
}

/// Arguments of `ferry run`.
#[derive(Args)]
struct RunArgs {
    /// The configuration.
    #[command(flatten)]
    config: ConfigArgs,
    /// Move a listener whose address another process holds to the next free port above
    /// it, and say so on standard error, instead of stopping (the quick start,
    /// scripts/run.sh, on a machine that runs RabbitMQ). A deployment sets its ports.
    #[arg(long)]
    move_taken_ports: bool,
}

/// Arguments of the subcommands that read a configuration.
#[derive(Args)]
struct ConfigArgs {
    /// The TOML configuration file; FERRY__SECTION__KEY variables override its keys.
    #[arg(long, value_name = "FILE", default_value = DEFAULT_CONFIG)]
    config: PathBuf,
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Validate(args) => match checked_config(&args.config) {
            Ok(config) => {
                for conflict in config.listen_conflicts() {
                    eprintln!("warning: {conflict}");
                }
                println!("config OK: {}", args.config.display());
                ExitCode::SUCCESS
            }
            Err(e) => fail(e, EXIT_CONFIG),
        },
        Command::Run(args) => match checked_config(&args.config.config) {
            Ok(mut config) => {
                if args.move_taken_ports {
                    for moved in config.move_taken_listeners() {
                        eprintln!("ferry: {moved}");
                    }
                }
                match run(config) {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(e) => fail(e, EXIT_FAILURE),
                }
            }
            Err(e) => fail(e, EXIT_CONFIG),
        },
        Command::HashPassword { password } => match password.map_or_else(read_password, Ok) {
            Ok(password) if password.is_empty() => fail(
                anyhow::anyhow!(
                    "the password is empty: give it as the argument or on standard input"
                ),
                EXIT_FAILURE,
            ),
            Ok(password) => {
                print!("{}", credential_lines(&password));
                ExitCode::SUCCESS
            }
            Err(e) => fail(e, EXIT_FAILURE),
        },
        Command::Replay {
            config,
            route,
            destination,
        } => match checked_config(&config.config) {
            Ok(config) => match replay(&config, &route, destination) {
                Ok(moved) => {
                    println!(
                        "replayed {moved} message(s) of route '{route}' destination {destination}"
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e, EXIT_FAILURE),
            },
            Err(e) => fail(e, EXIT_CONFIG),
        },
        Command::Backup {
            config: Some(config),
            out,
            ..
        } => match checked_config(&config) {
            Ok(config) => report(backup::backup(&config, &out)),
            Err(e) => fail(e, EXIT_CONFIG),
        },
        Command::Backup {
            config: None,
            connection,
            out,
        } => report(backup::download(&connection, &out)),
        Command::Restore { config, file } => match checked_config(&config.config) {
            Ok(config) => report(backup::restore(&config, &file)),
            Err(e) => fail(e, EXIT_CONFIG),
        },
        Command::Bench(bench) => match run_bench(bench) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(e, EXIT_FAILURE),
        },
        Command::Admin(command) => match ferry_admin::run(command) {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => fail(e, EXIT_FAILURE),
        },
    }
}

/// Prints `line` and exits 0, or the error and exits 1.
fn report(line: anyhow::Result<String>) -> ExitCode {
    match line {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(e, EXIT_FAILURE),
    }
}

/// Reads one line (without its line ending) from standard input.
fn read_password() -> anyhow::Result<String> {
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .context("cannot read the password from standard input")?;
    Ok(line.trim_end_matches(['\r', '\n']).to_owned())
}

/// Replays route `route`'s dead-letters of destination `destination` in `config`'s store.
fn replay(config: &Config, route: &str, destination: usize) -> anyhow::Result<u64> {
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(async {
        let db = ferry_store::Database::open(&config.store)
            .await
            .context("cannot open the store")?;
        let stages = ferry_stage::Stages::new(db.clone(), &config.store.prefix);
        let moved = ferry_bridge::replay::replay(&stages, route, destination).await;
        db.close().await;
        moved.with_context(|| format!("cannot replay route '{route}' destination {destination}"))
    })
}

/// Runs one benchmark on a multi-threaded runtime, logging warnings and errors (of the
/// bridge a bench runs, say) to standard error; `RUST_LOG` changes the level.
fn run_bench(which: Bench) -> anyhow::Result<()> {
    ferry::daemon::logging::init(&ferry_config::LogConfig {
        level: "warn".into(),
        format: ferry_config::LogFormat::Text,
    })?;
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(async {
        match which {
            Bench::Stage(b) => ferry_bench::stage::run(&b).await,
            Bench::Kafka(b) => Ok(ferry_bench::kafka::run(&b).await?),
            Bench::Amqp(b) => ferry_bench::amqp::run(&b).await,
            Bench::Bridge(b) => ferry_bench::bridge::run(&b).await,
            Bench::Overload(b) => ferry_bench::overload::run(&b).await,
            Bench::Soak(b) => ferry_bench::soak::run(&b).await,
        }
    })
}

/// Loads `path` with its environment overrides, validates it and runs the preflight checks.
fn checked_config(path: &Path) -> Result<Config, ConfigError> {
    let config = Config::load(path)?;
    config.validate()?;
    config.preflight()?;
    Ok(config)
}

/// Runs the daemon on a multi-threaded runtime until it returns.
fn run(config: Config) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let result = runtime.block_on(async {
        tokio::spawn(allocator_metrics::run());
        ferry::daemon::run(config).await
    });
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN_GRACE);
    Ok(result?)
}

/// Prints `error: <message>` on one line to standard error and returns `code`.
fn fail(error: impl Into<anyhow::Error>, code: u8) -> ExitCode {
    eprintln!("error: {:#}", error.into());
    ExitCode::from(code)
}

/// The `[[users]]` lines holding every credential of `password`.
fn credential_lines(password: &str) -> String {
    use ferry_auth::scram::{DEFAULT_ITERATIONS, Mechanism, ScramCredential};
    let scram = |m| ScramCredential::new(m, password, DEFAULT_ITERATIONS);
    format!(
        "password_hash = \"{}\"\nscram_sha_256 = \"{}\"\nscram_sha_512 = \"{}\"\n",
        ferry_auth::password::PasswordHash::new(password),
        scram(Mechanism::Sha256),
        scram(Mechanism::Sha512),
    )
}
