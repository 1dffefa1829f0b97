//! `[sources.NAME] kind = "kafka"`: topics on an external Kafka cluster, consumed with
//! rdkafka in a consumer group, staged exactly once.
//!
//! Kafka's committed offsets are not trusted: the next offset to read of every
//! (topic, partition) lives in Ferry's store and is written in the *same* transaction that
//! stages the records, after a non-snapshot read of it, so a record below it (a replay
//! after a crash or a rebalance) is dropped and counted in
//! `ferry_bridge_source_duplicates_total`, and two consumers racing on one partition
//! conflict instead of staging twice. On assignment every partition starts at its stored
//! offset; only after the store commit are the offsets also committed to Kafka (async, best
//! effort), so standard tooling shows the group's progress.
//!
//! A record whose body the route's stages cannot copy in one transaction (a large record,
//! [`spill::spills`]) is written to a spill held by the route's lease holder first
//! ([`RouteStages::prepare`](crate::route::RouteStages::prepare)); a batch is then
//! staged in runs of one transaction each ([`spill::runs`]), each checking and advancing
//! its partitions' stored offsets and letting go of its spills, so every run is exactly
//! once on its own, as a batch is.
//!
//! ```text
//! (P, "bridge", route, "kafka-offset", topic, partition) = next offset to read (i64)
//! ```

use crate::kafka_client::KafkaEndpoint;
use crate::mapping::kafka_to_amqp;
use crate::route::{Bridged, Prepared};
use crate::sink::Backoff;
use crate::status::Status;
use crate::{BridgeError, RouteContext};
use bytes::Bytes;
use ferry_amqp::port::AmqpMessage;
use ferry_kafka::port::KafkaRecord;
use ferry_stage::{Spill, StageError, spill};
use ferry_store::RangeOption;
use ferry_telemetry::bridge as metric;
use foundationdb_tuple::Subspace;
use parking_lot::Mutex;
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, RebalanceProtocol, StreamConsumer,
};
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedMessage, Headers, Message};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// How long a batch waits for more records once it has one.
const BATCH_LINGER: Duration = Duration::from_millis(5);

/// A source's configuration (`[sources.NAME]`).
pub(crate) struct KafkaSource {
    /// The source's name.
    pub name: String,
    /// The brokers, and how to connect to them.
    pub endpoint: KafkaEndpoint,
    /// Topics to consume.
    pub topics: Vec<String>,
    /// The consumer group.
    pub group_id: String,
}

/// The key of `topic`/`partition`'s next offset in the route's space.
fn offset_key(space: &Subspace, topic: &str, partition: i32) -> Vec<u8> {
    space.pack(&("kafka-offset", topic, i64::from(partition)))
}

/// Next offsets to read by (topic, partition), as last committed to the store.
type Offsets = Arc<Mutex<HashMap<(String, i32), i64>>>;

/// rdkafka callbacks: connection errors go to `/readyz`, assigned partitions start at
/// their stored offsets.
struct SourceContext {
    /// Connection states.
    status: Status,
    /// `source:NAME`.
    label: String,
    /// The stored offsets this source knows of.
    offsets: Offsets,
}

impl ClientContext for SourceContext {
    fn error(&self, error: KafkaError, reason: &str) {
        warn!(source = %self.label, error = %error, reason, "kafka source error");
        self.status.down(&self.label, format!("{error}: {reason}"));
    }
}

impl ConsumerContext for SourceContext {
    fn rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        tpl: &mut TopicPartitionList,
    ) {
        let cooperative = matches!(
            consumer.rebalance_protocol(),
            RebalanceProtocol::Cooperative
        );
        let result = match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                {
                    let offsets = self.offsets.lock();
                    for mut e in tpl.elements() {
                        let stored = offsets.get(&(e.topic().to_owned(), e.partition()));
                        if let Some(&next) = stored {
                            // Ignored on failure: the partition then starts at Kafka's
                            // committed offset and the stored one still filters replays.
                            let _ = e.set_offset(Offset::Offset(next));
                        }
                    }
                }
                info!(source = %self.label, partitions = tpl.count(), "kafka partitions assigned");
                self.status.up(&self.label);
                if cooperative {
                    consumer.incremental_assign(tpl)
                } else {
                    consumer.assign(tpl)
                }
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                if cooperative {
                    consumer.incremental_unassign(tpl)
                } else {
                    consumer.unassign()
                }
            }
            other => {
                warn!(source = %self.label, error = ?other, "kafka rebalance failed");
                consumer.unassign()
            }
        };
        if let Err(e) = result {
            warn!(source = %self.label, error = %e, "kafka (un)assignment failed");
        }
    }
}

/// The task that consumes `source` into `ctx`'s route until `shutdown`.
pub(crate) fn start(
    ctx: Arc<RouteContext>,
    source: KafkaSource,
    shutdown: CancellationToken,
) -> futures::future::BoxFuture<'static, Result<(), BridgeError>> {
    Box::pin(run(ctx, source, shutdown))
}

async fn run(
    ctx: Arc<RouteContext>,
    source: KafkaSource,
    shutdown: CancellationToken,
) -> Result<(), BridgeError> {
    let label = format!("source:{}", source.name);
    ctx.status.down(&label, "connecting");
    let offsets: Offsets = Arc::new(Mutex::new(load_offsets(&ctx).await?));
    let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
    let consumer = loop {
        match consumer(&ctx, &source, &label, &offsets) {
            Ok(c) => break c,
            Err(e) => {
                warn!(source = %label, error = %e, "cannot create the kafka consumer; retrying");
                ctx.status.down(&label, e.to_string());
                tokio::select! {
                    _ = shutdown.cancelled() => return Ok(()),
                    _ = tokio::time::sleep(backoff.next_delay()) => {}
                }
            }
        }
    };
    let labels = [
        (metric::LABEL_ROUTE, ctx.config.name.clone()),
        (metric::LABEL_ENDPOINT, label.clone()),
    ];
    let batch_size = ctx.config.batch;
    loop {
        let mut batch = Vec::with_capacity(batch_size);
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            first = consumer.recv() => match first {
                Ok(m) => batch.push(record_of(&m)),
                Err(e) => {
                    warn!(source = %label, error = %e, "kafka consume error");
                    ctx.status.down(&label, e.to_string());
                    tokio::select! {
                        _ = shutdown.cancelled() => return Ok(()),
                        _ = tokio::time::sleep(backoff.next_delay()) => {}
                    }
                    continue;
                }
            },
        }
        let linger = tokio::time::sleep(BATCH_LINGER);
        tokio::pin!(linger);
        while batch.len() < batch_size {
            tokio::select! {
                _ = &mut linger => break,
                next = consumer.recv() => match next {
                    Ok(m) => batch.push(record_of(&m)),
                    Err(_) => break,
                },
            }
        }
        backoff.reset();
        ctx.status.up(&label);
        let Staged {
            staged,
            bytes,
            duplicates,
            next,
        } = stage(&ctx, batch, &labels).await?;
        metrics::counter!(metric::MESSAGES_IN_TOTAL, &labels).increment(staged);
        metrics::counter!(metric::BYTES_IN_TOTAL, &labels).increment(bytes);
        metrics::counter!(metric::SOURCE_DUPLICATES_TOTAL, &labels).increment(duplicates);
        let mut tpl = TopicPartitionList::new();
        {
            let mut known = offsets.lock();
            for ((topic, partition), offset) in next {
                let _ = tpl.add_partition_offset(&topic, partition, Offset::Offset(offset));
                known.insert((topic, partition), offset);
            }
        }
        // Only for visibility: the store's offsets are the ones that count.
        if let Err(e) = consumer.commit(&tpl, CommitMode::Async) {
            warn!(source = %label, error = %e, "cannot commit offsets to kafka (the store has them)");
        }
    }
}

/// One consumed record: its AMQP mapping as consumed, then [`Prepared`] to stage (its
/// body copied inline or written to a spill).
struct Consumed<M = AmqpMessage> {
    topic: String,
    partition: i32,
    offset: i64,
    /// The message.
    message: M,
    /// Header values mapped by the fallback rule.
    fallbacks: usize,
    /// Value bytes.
    bytes: usize,
}

/// A consumed record ready to stage.
type Ready = Consumed<Prepared>;

/// What staging a batch did.
#[derive(Default)]
struct Staged {
    /// Records staged.
    staged: u64,
    /// Their value bytes.
    bytes: u64,
    /// Records dropped as below their partition's stored offset.
    duplicates: u64,
    /// The partitions' next offsets, as now stored.
    next: BTreeMap<(String, i32), i64>,
}

fn record_of(m: &BorrowedMessage<'_>) -> Consumed {
    let headers = m
        .headers()
        .map(|h| {
            h.iter()
                .map(|h| (h.key.to_owned(), h.value.map(<[u8]>::to_vec)))
                .collect()
        })
        .unwrap_or_default();
    let record = KafkaRecord {
        key: m.key().map(Bytes::copy_from_slice),
        value: m.payload().map(Bytes::copy_from_slice),
        headers,
        timestamp_ms: m.timestamp().to_millis(),
    };
    let mapped = kafka_to_amqp(&record, "");
    Consumed {
        topic: m.topic().to_owned(),
        partition: m.partition(),
        offset: m.offset(),
        message: mapped.message,
        fallbacks: mapped.fallbacks.len(),
        bytes: record.value.as_ref().map_or(0, Bytes::len),
    }
}

/// Stages the records of `batch` not below their partition's stored offset and moves the
/// stored offsets past them: a large record's body is written to a spill first, then the
/// batch is staged in runs of one transaction each ([`spill::runs`]).
async fn stage(
    ctx: &RouteContext,
    batch: Vec<Consumed>,
    labels: &[(&'static str, String)],
) -> Result<Staged, BridgeError> {
    let stage_error = |error| BridgeError::Stage {
        route: ctx.config.name.clone(),
        error,
    };
    let mut ready = Vec::with_capacity(batch.len());
    for r in batch {
        let prepared = ctx
            .stages
            .prepare(ctx.holder, r.message)
            .await
            .map_err(stage_error)?;
        ready.push(Ready {
            topic: r.topic,
            partition: r.partition,
            offset: r.offset,
            message: prepared,
            fallbacks: r.fallbacks,
            bytes: r.bytes,
        });
    }
    let sizes: Vec<u64> = ready
        .iter()
        .map(|r| ctx.stages.copied_bytes(&r.message.message))
        .collect();
    let mut done = Staged::default();
    let mut fallbacks = 0;
    for run in spill::runs(&sizes) {
        let run = &ready[run];
        let (staged, next) = stage_run(ctx, run).await.map_err(stage_error)?;
        for r in staged {
            done.staged += 1;
            done.bytes += r.bytes as u64;
            fallbacks += r.fallbacks;
        }
        done.next.extend(next);
    }
    done.duplicates = ready.len() as u64 - done.staged;
    metrics::counter!(metric::MAPPING_FALLBACKS_TOTAL, labels).increment(fallbacks as u64);
    Ok(done)
}

/// Stages the records of `run` not below their partition's stored offset, moves the stored
/// offsets past them and lets go of their spills, in one transaction. Returns the staged
/// records and the run's partitions' new next offsets.
async fn stage_run<'r>(
    ctx: &RouteContext,
    run: &'r [Ready],
) -> Result<(Vec<&'r Ready>, BTreeMap<(String, i32), i64>), StageError> {
    let space = ctx.keys.space();
    let now = ferry_stage::now_ms();
    // A duplicate's spill is let go of too: nothing references it, and it is freed.
    let held: Vec<Spill> = run.iter().filter_map(|r| r.message.held).collect();
    let held = &held;
    ctx.db
        .run(|tx| async move {
            let mut next: BTreeMap<(String, i32), i64> = BTreeMap::new();
            for r in run {
                let at = (r.topic.clone(), r.partition);
                if let std::collections::btree_map::Entry::Vacant(slot) = next.entry(at) {
                    // Not a snapshot read: a concurrent consumer of this partition that
                    // commits first makes this transaction conflict and re-read.
                    let stored = tx
                        .get(&offset_key(space, &r.topic, r.partition), false)
                        .await?
                        .map(|v| decode_offset(&v))
                        .unwrap_or(0);
                    slot.insert(stored);
                }
            }
            let mut staged = Vec::with_capacity(run.len());
            for r in run {
                let at = next
                    .get_mut(&(r.topic.clone(), r.partition))
                    .expect("read above");
                if r.offset >= *at {
                    staged.push(r);
                    *at = r.offset + 1;
                }
            }
            let messages: Vec<&Bridged> = staged.iter().map(|r| &r.message.message).collect();
            let direct = ctx.stages.stage_in(&tx, &messages, now).await?;
            for ((topic, partition), offset) in &next {
                tx.set(
                    &offset_key(space, topic, *partition),
                    foundationdb_tuple::pack(offset),
                );
            }
            ctx.stages.let_go_in(&tx, ctx.holder, held).await?;
            Ok::<_, StageError>((staged, next, direct))
        })
        .await
        .map(|(staged, next, direct)| {
            ctx.stages.count_direct(&direct);
            (staged, next)
        })
}

fn decode_offset(v: &[u8]) -> i64 {
    foundationdb_tuple::unpack(v).unwrap_or(0)
}

/// The stored next offsets of the route's partitions.
async fn load_offsets(ctx: &RouteContext) -> Result<HashMap<(String, i32), i64>, BridgeError> {
    let space = ctx.keys.space().subspace(&("kafka-offset",));
    let (begin, end) = space.range();
    let pairs = ctx
        .db
        .run(|tx| {
            let (begin, end) = (begin.clone(), end.clone());
            async move {
                tx.get_range(&RangeOption::new(begin, end), true)
                    .await
                    .map_err(StageError::from)
            }
        })
        .await
        .map_err(|error| BridgeError::Stage {
            route: ctx.config.name.clone(),
            error,
        })?;
    Ok(pairs
        .iter()
        .filter_map(|kv| {
            let (topic, partition) = space.unpack::<(String, i64)>(&kv.key).ok()?;
            Some((
                (topic, i32::try_from(partition).ok()?),
                decode_offset(&kv.value),
            ))
        })
        .collect())
}

fn consumer(
    ctx: &RouteContext,
    source: &KafkaSource,
    label: &str,
    offsets: &Offsets,
) -> Result<StreamConsumer<SourceContext>, KafkaError> {
    let mut config = source.endpoint.client_config(&[
        ("group.id", &source.group_id),
        ("auto.offset.reset", "earliest"),
    ])?;
    // Not overridable: the store decides what was consumed.
    config
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false");
    let context = SourceContext {
        status: ctx.status.clone(),
        label: label.to_owned(),
        offsets: offsets.clone(),
    };
    let consumer: StreamConsumer<SourceContext> = config.create_with_context(context)?;
    let topics: Vec<&str> = source.topics.iter().map(String::as_str).collect();
    consumer.subscribe(&topics)?;
    Ok(consumer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_keys_sort_by_topic_then_partition() {
        let space = Subspace::from_bytes(b"p".to_vec());
        assert!(offset_key(&space, "a", 9) < offset_key(&space, "b", 0));
        assert!(offset_key(&space, "a", 2) < offset_key(&space, "a", 10));
        assert_eq!(decode_offset(&foundationdb_tuple::pack(&42i64)), 42);
    }
}
