//! `ferry bench stage`: durable appends and pops of fixed-size messages on one stage.
//!
//! Phase 1: `producers` tasks append `messages` in total, each transaction carrying
//! `append_batch` messages, so concurrent commits share group commits (fsyncs); the
//! commit latency of every append transaction is recorded. Phase 2: `consumers` tasks pop
//! the backlog `pop_batch` at a time (the seeds' `pop_k`), each pop one transaction.

use super::Percentiles;
use ferry_stage::{NewMessage, StageOptions, Stages};
use ferry_store::Database;
use ferry_store::StoreConfig;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// What to run.
#[derive(Debug, Clone, clap::Args)]
pub struct StageBench {
    /// Messages to append (and then pop).
    #[arg(long, default_value_t = 200_000)]
    pub messages: u64,
    /// Message body size in bytes.
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// Concurrent appending tasks.
    #[arg(long, default_value_t = 1024)]
    pub producers: u64,
    /// Messages per append transaction.
    #[arg(long, default_value_t = 1)]
    pub append_batch: u64,
    /// Concurrent popping tasks.
    #[arg(long, default_value_t = 1)]
    pub consumers: u64,
    /// Messages per pop transaction (`pop_k`'s k).
    #[arg(long, default_value_t = 256)]
    pub pop_batch: usize,
    /// The embedded engine's page cache, MiB (`store.cache_mb`).
    #[arg(long, default_value_t = ferry_store::DEFAULT_CACHE_MB)]
    pub cache_mb: u64,
    /// Data directory for the embedded store (created; removed afterwards unless it existed).
    #[arg(long, default_value = "bench-data")]
    pub path: PathBuf,
}

/// Runs the benchmark and prints its figures.
///
/// # Errors
/// A store or stage error.
pub async fn run(bench: &StageBench) -> anyhow::Result<()> {
    let existed = bench.path.exists();
    let config = StoreConfig {
        path: bench.path.clone(),
        cache_mb: bench.cache_mb,
        ..StoreConfig::default()
    };
    let db = Database::open(&config).await?;
    let stages = Stages::new(db.clone(), "bench");
    stages.ensure_schema().await?;
    let name = format!("bench-{}", fastrand::u32(..));
    let stage = stages.create(&name, &StageOptions::default()).await?;
    println!(
        "stage bench: {} messages of {} B, {} producers x {} per append, {} consumers x pop {} (embedded engine, durable commits)",
        bench.messages,
        bench.size,
        bench.producers,
        bench.append_batch,
        bench.consumers,
        bench.pop_batch
    );

    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..bench.producers {
        let (stage, next) = (stage.clone(), next.clone());
        let (total, per_tx, size) = (bench.messages, bench.append_batch, bench.size);
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let first = next.fetch_add(per_tx, Ordering::Relaxed);
                if first >= total {
                    return Ok::<_, anyhow::Error>(latencies);
                }
                let msgs: Vec<NewMessage> = (first..(first + per_tx).min(total))
                    .map(|i| {
                        let mut body = vec![0u8; size];
                        body[..8.min(size)].copy_from_slice(&i.to_be_bytes()[..8.min(size)]);
                        NewMessage::new(body)
                    })
                    .collect();
                let t = Instant::now();
                stage.append(&msgs).await?;
                latencies.push(t.elapsed());
            }
        }));
    }
    let mut latencies = Vec::new();
    for t in tasks {
        latencies.extend(t.await??);
    }
    let append_secs = started.elapsed().as_secs_f64();
    let append_rate = bench.messages as f64 / append_secs;
    let append_latency = Percentiles::of(&mut latencies);
    println!(
        "append: {append_rate:>10.0} msg/s  {:>7.1} MB/s  commit {append_latency}",
        append_rate * bench.size as f64 / 1e6
    );

    let popped = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..bench.consumers {
        let (stage, popped) = (stage.clone(), popped.clone());
        let (total, k) = (bench.messages, bench.pop_batch);
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while popped.load(Ordering::Relaxed) < total {
                let t = Instant::now();
                let got = stage.pop(k).await?;
                latencies.push(t.elapsed());
                popped.fetch_add(got.len() as u64, Ordering::Relaxed);
                if got.is_empty() {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
            Ok::<_, anyhow::Error>(latencies)
        }));
    }
    let mut latencies = Vec::new();
    for t in tasks {
        latencies.extend(t.await??);
    }
    let pop_rate = bench.messages as f64 / started.elapsed().as_secs_f64();
    let pop_latency = Percentiles::of(&mut latencies);
    println!(
        "pop:    {pop_rate:>10.0} msg/s  {:>7.1} MB/s  transaction {pop_latency}",
        pop_rate * bench.size as f64 / 1e6
    );

    stages.delete(&name).await?;
    db.close().await;
    if !existed {
        std::fs::remove_dir_all(&bench.path)?;
    }
    Ok(())
}
