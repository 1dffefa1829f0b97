//! `[sinks.NAME] kind = "kafka"`: a topic on an external Kafka cluster, produced to with
//! rdkafka's idempotent producer (`enable.idempotence=true`, `acks=all`).
//!
//! A batch is sent pipelined and every delivery report awaited: a broker that is down or
//! busy (queue full, timeouts, retriable errors) answers [`Outcome::Retry`]; a record Kafka
//! refuses for good (too large, invalid) answers [`Outcome::Rejected`]. Without
//! transactions a crash between the broker's ack and the stage's ack sends the batch again
//! (at least once, same records).
//!
//! With `transactional = true` (transactional id `ferry.ROUTE.INDEX`) each batch is one
//! Kafka transaction, and a crash does not duplicate it:
//! 1. the batch's stage ids are stored with a fresh, increasing token;
//! 2. the records are produced in a transaction that also commits, for the marker consumer
//!    group `ferry.ROUTE.INDEX`, an offset whose metadata is the token;
//! 3. after the commit the worker acknowledges the stage.
//!
//! On (re)start `init_transactions` aborts what a previous incarnation left open (or
//! completes a commit it had decided); then, if the marker group's committed metadata is
//! the stored token, the stored ids are in Kafka already and are answered
//! [`Outcome::Delivered`] without producing them again when the stage redelivers them.
//! Until answered they are carried in every later record (at most [`MAX_CARRIED`]), so a
//! second crash before the stage redelivers them does not forget them.
//! Any transaction failure whose outcome is unknown is handled the same way: the producer
//! is dropped and the next delivery recovers.
//!
//! ```text
//! (P, "bridge", route, "kafka-txn", index) = (token, ids, carried ids), ids as 13 bytes
//!                                             (lane, versionstamp) each
//! ```

use crate::kafka_client::KafkaEndpoint;
use crate::sink::{ExternalSink, Outcome};
use crate::staged::Outgoing;
use crate::status::Status;
use ferry_config::KeySource;
use ferry_kafka::port::KafkaRecord;
use ferry_stage::{MessageId, StageError};
use ferry_store::Database;
use foundationdb_tuple::Subspace;
use futures::future::{BoxFuture, join_all};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerGroupMetadata};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use std::sync::Arc;
use std::time::Duration;
use tracing::{info, warn};

/// How long a transaction step (init, send offsets, commit, abort) may take.
const TXN_TIMEOUT: Duration = Duration::from_secs(30);
/// Most committed-but-unacknowledged ids carried from record to record; the oldest are
/// dropped first (by then the stage has long redelivered them).
pub(crate) const MAX_CARRIED: usize = 4_096;

/// A sink's configuration (`[sinks.NAME]`) and where it keeps its transaction record.
pub(crate) struct KafkaSinkConfig {
    /// `sink:NAME`, the status and log label.
    pub label: String,
    /// The brokers, and how to connect to them.
    pub endpoint: KafkaEndpoint,
    /// The topic.
    pub topic: String,
    /// The destination's place in its route (names the transaction record).
    pub index: usize,
    /// librdkafka's partitioner.
    pub partitioner: String,
    /// `ferry.ROUTE.INDEX` when the sink produces in transactions.
    pub transactional_id: Option<String>,
    /// What the record key is made from.
    pub key: KeySource,
}

/// rdkafka callbacks: connection errors go to `/readyz`.
struct SinkContext {
    status: Status,
    label: String,
}

impl ClientContext for SinkContext {
    fn error(&self, error: KafkaError, reason: &str) {
        warn!(sink = %self.label, error = %error, reason, "kafka sink error");
        self.status.down(&self.label, format!("{error}: {reason}"));
    }
}

type Kafka = FutureProducer<SinkContext>;

/// The transaction state of a transactional sink.
struct Txn {
    /// The token of the next transaction.
    next_token: i64,
    /// Stage ids a previous incarnation committed to Kafka but could not acknowledge.
    committed_before: Vec<MessageId>,
    /// The marker group, for `send_offsets_to_transaction`.
    marker: Arc<ConsumerGroupMetadata>,
}

/// A Kafka topic as a route destination.
pub(crate) struct KafkaSink {
    config: KafkaSinkConfig,
    status: Status,
    db: Database,
    /// The key of the transaction record.
    txn_key: Vec<u8>,
    /// The producer; `None` until connected, and after a failure that needs a new one.
    producer: Option<Kafka>,
    /// Recovered transaction state; `None` until recovered (transactional sinks only).
    txn: Option<Txn>,
}

impl KafkaSink {
    /// A sink that connects on its first delivery (until then `/readyz` does not list it,
    /// as for the RabbitMQ sink: an idle sink is not a broker that is down).
    pub(crate) fn new(
        config: KafkaSinkConfig,
        status: Status,
        db: Database,
        space: &Subspace,
    ) -> Self {
        let index = config.index as i64;
        Self {
            txn_key: space.pack(&("kafka-txn", index)),
            config,
            status,
            db,
            producer: None,
            txn: None,
        }
    }

    fn producer(&mut self) -> Result<Kafka, KafkaError> {
        if let Some(p) = &self.producer {
            return Ok(p.clone());
        }
        let c = &self.config;
        let mut config = c
            .endpoint
            .client_config(&[("partitioner", &c.partitioner)])?;
        // Not overridable: what makes the sink's guarantees.
        config.set("enable.idempotence", "true").set("acks", "all");
        if let Some(id) = &c.transactional_id {
            config.set("transactional.id", id);
        }
        let p: Kafka = config.create_with_context(SinkContext {
            status: self.status.clone(),
            label: c.label.clone(),
        })?;
        self.producer = Some(p.clone());
        Ok(p)
    }

    /// Produces `batch` pipelined and awaits every delivery report.
    async fn produce(&self, producer: &Kafka, batch: &[&Outgoing]) -> Vec<Outcome> {
        let records: Vec<KafkaRecord> = batch.iter().map(|o| o.to_kafka(self.config.key)).collect();
        let mut futures = Vec::with_capacity(records.len());
        for r in &records {
            let mut record = FutureRecord::<[u8], [u8]>::to(&self.config.topic);
            if let Some(k) = &r.key {
                record = record.key(&k[..]);
            }
            if let Some(v) = &r.value {
                record = record.payload(&v[..]);
            }
            if let Some(ts) = r.timestamp_ms {
                record = record.timestamp(ts);
            }
            if !r.headers.is_empty() {
                let headers = r.headers.iter().fold(
                    OwnedHeaders::new_with_capacity(r.headers.len()),
                    |h, (key, value)| {
                        h.insert(Header {
                            key,
                            value: value.as_deref(),
                        })
                    },
                );
                record = record.headers(headers);
            }
            futures.push(producer.send_result(record).map_err(|(e, _)| e));
        }
        let reports = join_all(futures.into_iter().map(|f| async move {
            match f {
                Ok(delivery) => match delivery.await {
                    Ok(Ok(_)) => Outcome::Delivered,
                    Ok(Err((e, _))) => outcome_of(&e),
                    Err(_) => Outcome::Retry("the producer was closed".into()),
                },
                Err(e) => outcome_of(&e),
            }
        }))
        .await;
        if reports.contains(&Outcome::Delivered) {
            self.status.up(&self.config.label);
        }
        reports
    }

    /// After (re)starting a transactional producer: fences the previous incarnation and
    /// learns which stage ids its last transaction put in Kafka.
    async fn recover(&mut self, producer: &Kafka) -> Result<Txn, String> {
        let p = producer.clone();
        blocking(move || p.init_transactions(TXN_TIMEOUT)).await?;
        let key = self.txn_key.clone();
        let stored = self
            .db
            .run(|tx| {
                let key = key.clone();
                async move { tx.get(&key, true).await.map_err(StageError::from) }
            })
            .await
            .map_err(|e| format!("cannot read the sink's transaction record: {e}"))?;
        let (marker, committed_token) = self.marker().await?;
        let Some(record) = stored.as_deref().and_then(Record::decode) else {
            return Ok(Txn {
                next_token: 1,
                committed_before: Vec::new(),
                marker: Arc::new(marker),
            });
        };
        let committed = committed_token == Some(record.token);
        info!(sink = %self.config.label, token = record.token, committed, in_doubt = record.ids.len(), "kafka transaction state recovered");
        let mut committed_before = record.carried;
        if committed {
            committed_before.extend(record.ids);
        }
        Ok(Txn {
            next_token: record.token + 1,
            committed_before,
            marker: Arc::new(marker),
        })
    }

    /// The marker group's metadata and the token last committed to it, if any.
    async fn marker(&self) -> Result<(ConsumerGroupMetadata, Option<i64>), String> {
        let group = self.config.transactional_id.clone().unwrap_or_default();
        let config = self
            .config
            .endpoint
            .client_config(&[("group.id", &group)])
            .map_err(|e| e.to_string())?;
        let topic = self.config.topic.clone();
        blocking(move || {
            let consumer: BaseConsumer = config.create()?;
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition(&topic, 0);
            let committed = consumer.committed_offsets(tpl, TXN_TIMEOUT)?;
            let token = committed
                .elements()
                .first()
                .and_then(|e| e.metadata().parse::<i64>().ok());
            let cgm = consumer
                .group_metadata()
                .ok_or_else(|| KafkaError::Subscription("no consumer group metadata".into()))?;
            Ok((cgm, token))
        })
        .await
    }

    /// One batch in one Kafka transaction.
    async fn deliver_in_txn(&mut self, producer: &Kafka, batch: &[&Outgoing]) -> Vec<Outcome> {
        let retry_all = |why: String| vec![Outcome::Retry(why); batch.len()];
        let txn = self.txn.as_ref().expect("recovered before delivering");
        let (token, marker) = (txn.next_token, txn.marker.clone());
        let record = Record {
            token,
            ids: batch.iter().map(|o| o.id).collect(),
            carried: txn.committed_before.clone(),
        }
        .encode();
        let key = self.txn_key.clone();
        let stored = self
            .db
            .run(|tx| {
                tx.set(&key, &record);
                async { Ok::<_, StageError>(()) }
            })
            .await;
        if let Err(e) = stored {
            return retry_all(format!("cannot store the sink's transaction record: {e}"));
        }
        if let Some(t) = &mut self.txn {
            t.next_token = token + 1;
        }
        if let Err(e) = producer.begin_transaction() {
            self.reset(&e.to_string());
            return retry_all(e.to_string());
        }
        let outcomes = self.produce(producer, batch).await;
        if outcomes.iter().any(|o| *o != Outcome::Delivered) {
            let p = producer.clone();
            if let Err(e) = blocking(move || p.abort_transaction(TXN_TIMEOUT)).await {
                self.reset(&e);
            }
            return outcomes
                .into_iter()
                .map(|o| match o {
                    Outcome::Delivered => Outcome::Retry("its transaction was aborted".into()),
                    other => other,
                })
                .collect();
        }
        let topic = self.config.topic.clone();
        let p = producer.clone();
        let committed = blocking(move || {
            let mut offsets = TopicPartitionList::new();
            let mut marker_offset = offsets.add_partition(&topic, 0);
            marker_offset.set_offset(Offset::Offset(token))?;
            marker_offset.set_metadata(token.to_string());
            p.send_offsets_to_transaction(&offsets, &marker, TXN_TIMEOUT)?;
            p.commit_transaction(TXN_TIMEOUT)
        })
        .await;
        match committed {
            Ok(()) => outcomes,
            Err(e) => {
                // Committed or not: the next delivery's recovery reads the marker.
                self.reset(&e);
                retry_all(e)
            }
        }
    }

    /// Drops the producer (and the recovered state) after a failure whose outcome is
    /// unknown; the next delivery starts over and recovers.
    fn reset(&mut self, why: &str) {
        warn!(sink = %self.config.label, error = why, "kafka producer reset");
        self.status.down(&self.config.label, why.to_owned());
        self.producer = None;
        self.txn = None;
    }

    async fn deliver_batch(&mut self, batch: &[Outgoing]) -> Vec<Outcome> {
        let producer = match self.producer() {
            Ok(p) => p,
            Err(e) => {
                self.status.down(&self.config.label, e.to_string());
                return vec![Outcome::Retry(e.to_string()); batch.len()];
            }
        };
        if self.config.transactional_id.is_none() {
            let all: Vec<&Outgoing> = batch.iter().collect();
            let outcomes = self.produce(&producer, &all).await;
            if let Some((code, why)) = producer.client().fatal_error() {
                self.reset(&format!("{code}: {why}"));
            }
            return outcomes;
        }
        if self.txn.is_none() {
            match self.recover(&producer).await {
                Ok(t) => self.txn = Some(t),
                Err(e) => {
                    self.reset(&e);
                    return vec![Outcome::Retry(e); batch.len()];
                }
            }
        }
        let before = &self.txn.as_ref().expect("recovered above").committed_before;
        let (done, todo): (Vec<usize>, Vec<usize>) =
            (0..batch.len()).partition(|&i| before.contains(&batch[i].id));
        let mut outcomes = vec![Outcome::Delivered; batch.len()];
        if !todo.is_empty() {
            let send: Vec<&Outgoing> = todo.iter().map(|&i| &batch[i]).collect();
            for (i, o) in todo
                .into_iter()
                .zip(self.deliver_in_txn(&producer, &send).await)
            {
                outcomes[i] = o;
            }
        }
        if let Some(t) = &mut self.txn {
            t.committed_before
                .retain(|id| !done.iter().any(|&i| batch[i].id == *id));
        }
        outcomes
    }
}

impl ExternalSink for KafkaSink {
    fn deliver<'a>(&'a mut self, batch: &'a [Outgoing]) -> BoxFuture<'a, Vec<Outcome>> {
        Box::pin(self.deliver_batch(batch))
    }
}

/// Runs a blocking rdkafka call off the async workers.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, KafkaError> + Send + 'static,
) -> Result<T, String> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(e) => Err(format!("a kafka call panicked: {e}")),
    }
}

/// Permanent refusals are rejected; everything else (broker down, queue full, timeouts,
/// retriable broker errors) is retried.
fn outcome_of(e: &KafkaError) -> Outcome {
    use RDKafkaErrorCode as C;
    match e.rdkafka_error_code() {
        Some(
            C::MessageSizeTooLarge
            | C::InvalidMessage
            | C::InvalidMessageSize
            | C::InvalidRecord
            | C::InvalidTimestamp
            | C::BadMessage,
        ) => Outcome::Rejected(e.to_string()),
        _ => Outcome::Retry(e.to_string()),
    }
}

/// The stored transaction record of a transactional sink.
#[derive(Debug, PartialEq, Eq)]
struct Record {
    /// The token of the last transaction begun.
    token: i64,
    /// The stage ids it carries.
    ids: Vec<MessageId>,
    /// Ids of earlier committed transactions the stage has not redelivered yet.
    carried: Vec<MessageId>,
}

impl Record {
    fn encode(&self) -> Vec<u8> {
        let carried = &self.carried[self.carried.len().saturating_sub(MAX_CARRIED)..];
        foundationdb_tuple::pack(&(self.token, pack_ids(&self.ids), pack_ids(carried)))
    }

    fn decode(v: &[u8]) -> Option<Self> {
        type Packed<'a> = (
            i64,
            foundationdb_tuple::Bytes<'a>,
            foundationdb_tuple::Bytes<'a>,
        );
        let (token, ids, carried): Packed<'_> = foundationdb_tuple::unpack(v).ok()?;
        Some(Self {
            token,
            ids: unpack_ids(&ids),
            carried: unpack_ids(&carried),
        })
    }
}

fn pack_ids(ids: &[MessageId]) -> foundationdb_tuple::Bytes<'static> {
    let mut bytes = Vec::with_capacity(ids.len() * 13);
    for id in ids {
        bytes.push(id.lane);
        bytes.extend_from_slice(&id.stamp);
    }
    foundationdb_tuple::Bytes::from(bytes)
}

fn unpack_ids(bytes: &[u8]) -> Vec<MessageId> {
    bytes
        .chunks_exact(13)
        .map(|c| MessageId {
            lane: c[0],
            stamp: c[1..].try_into().expect("13-byte chunk"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transaction_record_round_trips() {
        let ids = [
            MessageId {
                lane: 255,
                stamp: [1; 12],
            },
            MessageId {
                lane: 0,
                stamp: [2; 12],
            },
        ];
        let r = Record {
            token: 7,
            ids: ids.to_vec(),
            carried: ids[1..].to_vec(),
        };
        assert_eq!(Record::decode(&r.encode()), Some(r));
    }

    #[test]
    fn too_large_is_rejected_and_queue_full_retried() {
        let too_large = KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge);
        assert!(matches!(outcome_of(&too_large), Outcome::Rejected(_)));
        let full = KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull);
        assert!(matches!(outcome_of(&full), Outcome::Retry(_)));
    }
}
