//! What moves the messages in a phase: Ferry's bridge ([`ferry_mover`]: one route from a
//! source to a sink, run in this process on a fresh embedded store, with none of Ferry's
//! fronts), or RabbitMQ's Shovel plugin ([`shovel_mover`], set up with `rabbitmqctl`).
//! Each returns a [`Stop`] that ends it and removes what it set up.

use super::{BridgeBench, DESTINATION, SOURCE};
use anyhow::Context;
use ferry_bridge::{Fronts, Setup, status::Status};
use ferry_config::bridge::{DEFAULT_MAX_ATTEMPTS, DEFAULT_RETRY_INITIAL_MS, DEFAULT_RETRY_MAX_MS};
use ferry_config::{Config, EndpointConfig, KeySource, RouteConfig, SinkConfig, SourceConfig};
use ferry_stage::Stages;
use ferry_store::Database;
use ferry_store::StoreConfig;
use std::process::Command;
use tokio_util::sync::CancellationToken;

/// A running mover; dropping it does not stop it, calling it does.
pub(super) type Stop =
    Box<dyn FnOnce() -> futures::future::BoxFuture<'static, anyhow::Result<()>> + Send>;

/// The dynamic shovel's name.
const SHOVEL: &str = "ferry-bench-bridge";

/// A dynamic shovel from the source queue to the destination queue, `ack-mode:
/// on-confirm`, with the bridge's prefetch.
///
/// # Errors
/// `rabbitmqctl` cannot run or refuses (e.g. the plugin is not enabled).
pub(super) async fn shovel_mover(bench: &BridgeBench) -> anyhow::Result<Stop> {
    let definition = format!(
        r#"{{"src-protocol":"amqp091","src-uri":"{uri}","src-queue":"{SOURCE}","src-prefetch-count":{prefetch},"dest-protocol":"amqp091","dest-uri":"{uri}","dest-queue":"{DESTINATION}","ack-mode":"on-confirm"}}"#,
        uri = bench.uri,
        prefetch = bench.prefetch,
    );
    let ctl = bench.rabbitmqctl.clone();
    rabbitmqctl(&ctl, &["set_parameter", "shovel", SHOVEL, &definition])?;
    Ok(Box::new(move || {
        Box::pin(async move { rabbitmqctl(&ctl, &["clear_parameter", "shovel", SHOVEL]) })
    }))
}

/// Runs `ctl` (a command line: `rabbitmqctl`, or a wrapper and its arguments) with `args`.
fn rabbitmqctl(ctl: &str, args: &[&str]) -> anyhow::Result<()> {
    let mut words = ctl.split_whitespace();
    let program = words.next().context("--rabbitmqctl is empty")?;
    let out = Command::new(program)
        .args(words)
        .args(args)
        .output()
        .with_context(|| format!("cannot run '{ctl}' (the Shovel phase runs on the broker's machine; --no-shovel skips it)"))?;
    anyhow::ensure!(
        out.status.success(),
        "rabbitmqctl {}: {}{} (is the plugin enabled? rabbitmq-plugins enable rabbitmq_shovel)",
        args.first().unwrap_or(&""),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// Ferry's bridge with `[sources.in]` = `source`, `[sinks.out]` = `sink` and one route
/// between them (batch `--batch`, records unkeyed so an AMQP → Kafka move spreads over
/// the topic's partitions), on an embedded store in a fresh directory under the system's
/// temporary directory; stopping it also removes the directory.
///
/// # Errors
/// The config does not validate, or the store cannot be opened.
pub(super) async fn ferry_mover(
    bench: &BridgeBench,
    source: SourceConfig,
    sink: SinkConfig,
) -> anyhow::Result<Stop> {
    let dir = std::env::temp_dir().join(format!("ferry-bench-bridge-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut config = Config {
        store: StoreConfig {
            path: dir.join("data"),
            ..StoreConfig::default()
        },
        ..Config::default()
    };
    config.sources.insert("in".into(), source);
    config.sinks.insert("out".into(), sink);
    config.routes.push(RouteConfig {
        name: "bench".into(),
        from: EndpointConfig {
            source: Some("in".into()),
            ..EndpointConfig::default()
        },
        to: vec![EndpointConfig {
            sink: Some("out".into()),
            ..EndpointConfig::default()
        }],
        key: KeySource::None,
        max_attempts: DEFAULT_MAX_ATTEMPTS,
        retry_initial_ms: DEFAULT_RETRY_INITIAL_MS,
        retry_max_ms: DEFAULT_RETRY_MAX_MS,
        batch: bench.batch,
    });
    config.validate()?;
    let db = Database::open(&config.store).await?;
    let stages = Stages::new(db.clone(), &config.store.prefix);
    stages.ensure_schema().await?;
    let shutdown = CancellationToken::new();
    let setup = Setup {
        config,
        stages,
        fronts: Fronts::default(),
        status: Status::default(),
        states: Default::default(),
    };
    let task = tokio::spawn(ferry_bridge::run(setup, shutdown.clone()));
    Ok(Box::new(move || {
        Box::pin(async move {
            shutdown.cancel();
            task.await??;
            db.close().await;
            let _ = std::fs::remove_dir_all(&dir);
            Ok(())
        })
    }))
}
