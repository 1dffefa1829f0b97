//! `ferry bench amqp`: a PerfTest-like load of any AMQP 0-9-1 broker (Ferry or RabbitMQ)
//! through lapin, so both are measured with the same client and settings.
//!
//! Phase 1: `producers` connections publish `messages` persistent messages of `size` bytes
//! to a durable queue with publisher confirms, at most `confirm_window` unconfirmed each.
//! Phase 2: `consumers` connections consume them with acknowledgements (one basic.ack per
//! message) and a prefetch of `prefetch`. Phase 3: one publisher with a single confirm
//! outstanding measures confirm latency. The queue is deleted and declared afresh first
//! (`--queue-type` classic or quorum), and deleted at the end.
//!
//! An `amqps://` URI connects over TLS with the bridge's client ([`rabbitmq_link`]):
//! `--ca-file` for a broker whose certificate comes from a private CA, `--cert-file` and
//! `--key-file` for one that asks for a client certificate.
//!
//! [`rabbitmq_link`]: ferry_bridge::rabbitmq_link

use super::Percentiles;
use super::cpu::CpuMeter;
use ferry_bridge::rabbitmq_link;
use ferry_config::{AmqpTlsConfig, AmqpUri};
use futures::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel, Connection};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// What to run.
#[derive(Debug, Clone, clap::Args)]
pub struct AmqpBench {
    /// The broker, e.g. `amqp://guest:guest@127.0.0.1:5672/%2f`, or `amqps://…` for TLS.
    #[arg(long)]
    pub uri: String,
    /// With an `amqps://` URI: PEM file of the CA the broker's certificate must chain to
    /// (absent: the system's trusted roots).
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// With an `amqps://` URI: PEM file of the client certificate to present, for a broker
    /// that verifies its clients.
    #[arg(long, value_name = "FILE", requires = "key_file")]
    pub cert_file: Option<PathBuf>,
    /// The private key of `--cert-file` (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE", requires = "cert_file")]
    pub key_file: Option<PathBuf>,
    /// Messages to publish (and then consume).
    #[arg(long, default_value_t = 200_000)]
    pub messages: u64,
    /// Message body size in bytes.
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// Unconfirmed publishes a producer may have outstanding.
    #[arg(long, default_value_t = 1000)]
    pub confirm_window: usize,
    /// basic.qos prefetch of each consumer.
    #[arg(long, default_value_t = 1000)]
    pub prefetch: u16,
    /// Publishing connections.
    #[arg(long, default_value_t = 1)]
    pub producers: u64,
    /// Consuming connections.
    #[arg(long, default_value_t = 1)]
    pub consumers: u64,
    /// `x-queue-type` of the queue: classic or quorum.
    #[arg(long, default_value = "classic")]
    pub queue_type: String,
    /// The queue's name.
    #[arg(long, default_value = "ferry-bench")]
    pub queue: String,
    /// Publishes of the latency phase (one confirm outstanding).
    #[arg(long, default_value_t = 5000)]
    pub latency_messages: u64,
    /// PID of the broker process (`ferry run`, or RabbitMQ's `beam.smp`) on this machine:
    /// each phase then also reports the broker's CPU time per message.
    #[arg(long)]
    pub broker_pid: Option<u32>,
}

impl AmqpBench {
    /// The TLS settings of the `--ca-file`, `--cert-file` and `--key-file` flags.
    ///
    /// # Errors
    /// A flag given with an `amqp://` URI, which would silently be ignored.
    fn tls(&self) -> anyhow::Result<AmqpTlsConfig> {
        let tls = AmqpTlsConfig {
            ca_file: self.ca_file.clone(),
            cert_file: self.cert_file.clone(),
            key_file: self.key_file.clone(),
            server_name: None,
        };
        let set = tls.ca_file.is_some() || tls.cert_file.is_some();
        anyhow::ensure!(
            !set || self.uri.starts_with("amqps://"),
            "--ca-file, --cert-file and --key-file are for TLS; --uri must then start with amqps://"
        );
        Ok(tls)
    }
}

/// Connects to `uri` as `ferry bench`, over TLS with `tls` when `uri` is `amqps://`.
pub(super) async fn connect(uri: &str, tls: &AmqpTlsConfig) -> anyhow::Result<Connection> {
    rabbitmq_link::connect(&AmqpUri::from(uri), tls, "ferry bench")
        .await
        .map_err(anyhow::Error::msg)
}

fn persistent() -> BasicProperties {
    BasicProperties::default().with_delivery_mode(2)
}

/// Runs the benchmark and prints its figures.
///
/// # Errors
/// A connection or protocol error.
pub async fn run(bench: &AmqpBench) -> anyhow::Result<()> {
    let tls = bench.tls()?;
    let admin = connect(&bench.uri, &tls).await?;
    let ch = admin.create_channel().await?;
    ch.queue_delete(bench.queue.as_str().into(), QueueDeleteOptions::default())
        .await?;
    let mut args = FieldTable::default();
    args.insert(
        "x-queue-type".into(),
        AMQPValue::LongString(bench.queue_type.as_str().into()),
    );
    ch.queue_declare(
        bench.queue.as_str().into(),
        QueueDeclareOptions {
            durable: true,
            ..QueueDeclareOptions::default()
        },
        args,
    )
    .await?;
    println!(
        "amqp bench: {} persistent messages of {} B to durable {} queue '{}', {} producer(s) with confirm window {}, {} consumer(s) with prefetch {}",
        bench.messages,
        bench.size,
        bench.queue_type,
        bench.queue,
        bench.producers,
        bench.confirm_window,
        bench.consumers,
        bench.prefetch
    );

    let phases = phases(bench, &tls).await;
    // Deleted whatever happened, so a run that fails midway leaves no queue behind.
    let deleted = ch
        .queue_delete(bench.queue.as_str().into(), QueueDeleteOptions::default())
        .await;
    phases?;
    deleted?;
    admin.close(200, "bench done".into()).await?;
    Ok(())
}

/// Publishing, consuming, then the latency phase.
async fn phases(bench: &AmqpBench, tls: &AmqpTlsConfig) -> anyhow::Result<()> {
    let meter = CpuMeter::start(bench.broker_pid);
    let publish_rate = publish_phase(bench, tls).await?;
    let publish_cpu = meter.per_message(bench.messages);
    println!("publish+confirm: {publish_rate:>9.0} msg/s ({publish_cpu})");
    let meter = CpuMeter::start(bench.broker_pid);
    let consume_rate = consume_phase(bench, tls).await?;
    let consume_cpu = meter.per_message(bench.messages);
    println!("consume+ack:     {consume_rate:>9.0} msg/s ({consume_cpu})");
    let confirm_latency = latency_phase(bench, tls).await?;
    println!(
        "confirm latency, 1 outstanding ({} messages): {confirm_latency}",
        bench.latency_messages
    );
    Ok(())
}

pub(super) async fn publish_phase(bench: &AmqpBench, tls: &AmqpTlsConfig) -> anyhow::Result<f64> {
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..bench.producers {
        let (bench, tls, next) = (bench.clone(), tls.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let conn = connect(&bench.uri, &tls).await?;
            let ch = conn.create_channel().await?;
            ch.confirm_select(ConfirmSelectOptions::default()).await?;
            let body = vec![b'x'; bench.size];
            let mut outstanding = VecDeque::with_capacity(bench.confirm_window);
            while next.fetch_add(1, Ordering::Relaxed) < bench.messages {
                if outstanding.len() >= bench.confirm_window.max(1) {
                    let confirm: lapin::PublisherConfirm =
                        outstanding.pop_front().expect("the window is full");
                    anyhow::ensure!(confirm.await?.is_ack(), "a publish was nacked");
                }
                let confirm = ch
                    .basic_publish(
                        "".into(),
                        bench.queue.as_str().into(),
                        BasicPublishOptions::default(),
                        &body,
                        persistent(),
                    )
                    .await?;
                outstanding.push_back(confirm);
            }
            for confirm in outstanding {
                anyhow::ensure!(confirm.await?.is_ack(), "a publish was nacked");
            }
            conn.close(200, "published".into()).await?;
            Ok::<_, anyhow::Error>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(bench.messages as f64 / started.elapsed().as_secs_f64())
}

async fn consume_phase(bench: &AmqpBench, tls: &AmqpTlsConfig) -> anyhow::Result<f64> {
    let received = Arc::new(AtomicU64::new(0));
    // Cancelled when every message arrived, so consumers left without messages stop.
    let done = CancellationToken::new();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..bench.consumers {
        let (bench, tls, received, done) =
            (bench.clone(), tls.clone(), received.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let conn = connect(&bench.uri, &tls).await?;
            let ch = conn.create_channel().await?;
            ch.basic_qos(bench.prefetch, BasicQosOptions::default())
                .await?;
            let mut consumer = ch
                .basic_consume(
                    bench.queue.as_str().into(),
                    format!("bench-{i}").into(),
                    BasicConsumeOptions::default(),
                    FieldTable::default(),
                )
                .await?;
            loop {
                let next = tokio::select! {
                    () = done.cancelled() => break,
                    next = tokio::time::timeout(Duration::from_secs(30), consumer.next()) => next,
                };
                let Ok(Some(delivery)) = next else {
                    anyhow::bail!("no delivery for 30 s");
                };
                delivery?.acker.ack(BasicAckOptions::default()).await?;
                if received.fetch_add(1, Ordering::Relaxed) + 1 >= bench.messages {
                    done.cancel();
                }
            }
            conn.close(200, "consumed".into()).await?;
            Ok::<_, anyhow::Error>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(bench.messages as f64 / started.elapsed().as_secs_f64())
}

async fn latency_phase(bench: &AmqpBench, tls: &AmqpTlsConfig) -> anyhow::Result<Percentiles> {
    let conn = connect(&bench.uri, tls).await?;
    let ch: Channel = conn.create_channel().await?;
    ch.confirm_select(ConfirmSelectOptions::default()).await?;
    let body = vec![b'x'; bench.size];
    let mut samples = Vec::with_capacity(bench.latency_messages as usize);
    for _ in 0..bench.latency_messages {
        let t = Instant::now();
        let confirm = ch
            .basic_publish(
                "".into(),
                bench.queue.as_str().into(),
                BasicPublishOptions::default(),
                &body,
                persistent(),
            )
            .await?;
        anyhow::ensure!(confirm.await?.is_ack(), "a publish was nacked");
        samples.push(t.elapsed());
    }
    conn.close(200, "measured".into()).await?;
    Ok(Percentiles::of(&mut samples))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: AmqpBench,
    }

    fn parse(args: &[&str]) -> Result<AmqpBench, clap::Error> {
        Cli::try_parse_from(std::iter::once("bench").chain(args.iter().copied())).map(|c| c.bench)
    }

    #[test]
    fn tls_flags_become_the_client_settings_of_an_amqps_uri() {
        let bench = parse(&[
            "--uri",
            "amqps://guest:guest@127.0.0.1:5671/%2f",
            "--ca-file",
            "ca.pem",
            "--cert-file",
            "client.pem",
            "--key-file",
            "client.key",
        ])
        .unwrap();
        let tls = bench.tls().unwrap();
        assert_eq!(tls.ca_file, Some(PathBuf::from("ca.pem")));
        assert_eq!(tls.cert_file, Some(PathBuf::from("client.pem")));
        assert_eq!(tls.key_file, Some(PathBuf::from("client.key")));
    }

    #[test]
    fn tls_flags_with_a_plaintext_uri_are_refused() {
        let bench = parse(&["--uri", "amqp://127.0.0.1:5672", "--ca-file", "ca.pem"]).unwrap();
        let err = bench.tls().unwrap_err().to_string();
        assert!(err.contains("--uri must then start with amqps://"), "{err}");
    }

    #[test]
    fn a_client_certificate_needs_its_key() {
        let err = parse(&["--uri", "amqps://h", "--cert-file", "client.pem"])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("--key-file"), "{err}");
    }
}
