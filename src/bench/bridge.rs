//! `ferry bench bridge`: moving persistent messages from one RabbitMQ queue to another,
//! through Ferry's bridge (a `rabbitmq` source and a `rabbitmq` sink, run in this process
//! on an embedded store in a directory under the system's temporary directory, removed
//! afterwards) and through RabbitMQ's own Shovel plugin
//! (a dynamic shovel with `ack-mode: on-confirm`), in the same run on the same broker.
//!
//! Each phase fills the source queue with `messages` persistent messages of `size` bytes
//! (publisher confirms), empties the destination queue, starts the mover and times until
//! the destination queue holds every message. The Shovel phase needs the plugin
//! (`rabbitmq-plugins enable rabbitmq_shovel`) and runs `rabbitmqctl`, so it is measured on
//! the machine running the broker.

use super::amqp::{AmqpBench, connect, publish_phase};
use crate::bridge::{Fronts, Setup, status::Status};
use crate::config::{Config, EndpointConfig, RouteConfig, SinkConfig, SourceConfig, StoreConfig};
use crate::stage::Stages;
use crate::store::Database;
use anyhow::Context;
use lapin::options::{QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::{AMQPValue, FieldTable};
use std::process::Command;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// What to run.
#[derive(Debug, Clone, clap::Args)]
pub struct BridgeBench {
    /// The RabbitMQ both queues live on.
    #[arg(long, default_value = "amqp://guest:guest@127.0.0.1:5672/%2f")]
    pub uri: String,
    /// Messages to move.
    #[arg(long, default_value_t = 100_000)]
    pub messages: u64,
    /// Body size in bytes.
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// The bridge source's prefetch (the shovel's `src-prefetch-count` is the same).
    #[arg(long, default_value_t = 1000)]
    pub prefetch: u16,
    /// The route's batch.
    #[arg(long, default_value_t = 256)]
    pub batch: usize,
    /// `x-queue-type` of both queues: classic or quorum.
    #[arg(long, default_value = "classic")]
    pub queue_type: String,
    /// Skip the Shovel phase (e.g. on a machine without the plugin).
    #[arg(long)]
    pub no_shovel: bool,
}

/// The figures of one run, in messages per second.
#[derive(Debug, Clone, Copy)]
pub struct BridgeReport {
    /// Through Ferry's bridge.
    pub ferry: f64,
    /// Through a Shovel with `ack-mode: on-confirm`, if measured.
    pub shovel: Option<f64>,
}

const SOURCE: &str = "ferry-bench-bridge-src";
const DESTINATION: &str = "ferry-bench-bridge-dst";
const SHOVEL: &str = "ferry-bench-bridge";

/// Runs the benchmark and prints its figures.
///
/// # Errors
/// A broker, store or `rabbitmqctl` error.
pub async fn run(bench: &BridgeBench) -> anyhow::Result<BridgeReport> {
    println!(
        "bridge bench: {} persistent messages of {} B from {} queue '{SOURCE}' to {} queue '{DESTINATION}' on {}",
        bench.messages, bench.size, bench.queue_type, bench.queue_type, bench.uri
    );
    let shovel = if bench.no_shovel {
        None
    } else {
        let rate = phase(bench, "shovel (ack-mode on-confirm)", shovel_mover).await?;
        Some(rate)
    };
    let ferry = phase(bench, "ferry bridge", ferry_mover).await?;
    if let Some(shovel) = shovel {
        println!("ferry / shovel: {:.2}x", ferry / shovel);
    }
    let admin = connect(&bench.uri).await?;
    let ch = admin.create_channel().await?;
    for q in [SOURCE, DESTINATION] {
        ch.queue_delete(q.into(), QueueDeleteOptions::default())
            .await?;
    }
    Ok(BridgeReport { ferry, shovel })
}

/// A running mover; dropping it does not stop it, `stop` does.
type Stop = Box<dyn FnOnce() -> futures::future::BoxFuture<'static, anyhow::Result<()>> + Send>;

async fn phase<F, Fut>(bench: &BridgeBench, name: &str, start: F) -> anyhow::Result<f64>
where
    F: FnOnce(BridgeBench) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Stop>>,
{
    let admin = connect(&bench.uri).await?;
    let ch = admin.create_channel().await?;
    let mut args = FieldTable::default();
    args.insert(
        "x-queue-type".into(),
        AMQPValue::LongString(bench.queue_type.as_str().into()),
    );
    for q in [SOURCE, DESTINATION] {
        // A queue of another type from an earlier run cannot be redeclared.
        ch.queue_delete(q.into(), QueueDeleteOptions::default())
            .await?;
        ch.queue_declare(
            q.into(),
            QueueDeclareOptions {
                durable: true,
                ..QueueDeclareOptions::default()
            },
            args.clone(),
        )
        .await?;
    }
    let fill = AmqpBench {
        uri: bench.uri.clone(),
        messages: bench.messages,
        size: bench.size,
        confirm_window: 1000,
        prefetch: bench.prefetch,
        producers: 1,
        consumers: 1,
        queue_type: bench.queue_type.clone(),
        queue: SOURCE.into(),
        latency_messages: 0,
    };
    publish_phase(&fill).await?;
    let started = Instant::now();
    let stop = start(bench.clone()).await?;
    let deadline = started + Duration::from_secs(600);
    loop {
        let q = ch
            .queue_declare(
                DESTINATION.into(),
                QueueDeclareOptions {
                    passive: true,
                    ..QueueDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await?;
        if u64::from(q.message_count()) >= bench.messages {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{name}: only {} of {} messages moved in 10 minutes",
            q.message_count(),
            bench.messages
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let rate = bench.messages as f64 / started.elapsed().as_secs_f64();
    stop().await?;
    println!("{name:<30} {rate:>9.0} msg/s");
    Ok(rate)
}

async fn shovel_mover(bench: BridgeBench) -> anyhow::Result<Stop> {
    let definition = format!(
        r#"{{"src-protocol":"amqp091","src-uri":"{uri}","src-queue":"{SOURCE}","src-prefetch-count":{prefetch},"dest-protocol":"amqp091","dest-uri":"{uri}","dest-queue":"{DESTINATION}","ack-mode":"on-confirm"}}"#,
        uri = bench.uri,
        prefetch = bench.prefetch,
    );
    rabbitmqctl(&["set_parameter", "shovel", SHOVEL, &definition])?;
    Ok(Box::new(|| {
        Box::pin(async { rabbitmqctl(&["clear_parameter", "shovel", SHOVEL]) })
    }))
}

fn rabbitmqctl(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("rabbitmqctl")
        .args(args)
        .output()
        .context("cannot run rabbitmqctl (the Shovel phase runs on the broker's machine; --no-shovel skips it)")?;
    anyhow::ensure!(
        out.status.success(),
        "rabbitmqctl {}: {}{} (is the plugin enabled? rabbitmq-plugins enable rabbitmq_shovel)",
        args.first().unwrap_or(&""),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

async fn ferry_mover(bench: BridgeBench) -> anyhow::Result<Stop> {
    let dir = std::env::temp_dir().join(format!("ferry-bench-bridge-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut config = Config {
        store: StoreConfig {
            path: dir.join("data"),
            ..StoreConfig::default()
        },
        ..Config::default()
    };
    config.sources.insert(
        "in".into(),
        SourceConfig::Rabbitmq {
            uri: bench.uri.clone(),
            queue: SOURCE.into(),
            prefetch: bench.prefetch,
            dedup_window_ms: crate::config::bridge::DEFAULT_DEDUP_WINDOW_MS,
        },
    );
    config.sinks.insert(
        "out".into(),
        SinkConfig::Rabbitmq {
            uri: bench.uri.clone(),
            exchange: String::new(),
            routing_key: Some(DESTINATION.into()),
        },
    );
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
        key: Default::default(),
        max_attempts: crate::config::bridge::DEFAULT_MAX_ATTEMPTS,
        retry_initial_ms: crate::config::bridge::DEFAULT_RETRY_INITIAL_MS,
        retry_max_ms: crate::config::bridge::DEFAULT_RETRY_MAX_MS,
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
    };
    let task = tokio::spawn(crate::bridge::run(setup, shutdown.clone()));
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
