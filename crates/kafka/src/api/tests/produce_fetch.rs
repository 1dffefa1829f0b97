//! Produce, Fetch and ListOffsets: what is appended where, what is refused with which
//! code, what a fetch returns and when a long poll answers, and the offsets a lookup
//! finds.

use super::fixture::{Answer, FIRST_TIMESTAMP, Front, batch, name, producer_batch, values};
use super::{
    create_topic, create_topic_with, fetch, fetch_request, fetch_until, fetch_with, list_offset,
    produce, produce_request, produce_to,
};
use crate::wire::batch::marker;
use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{FetchRequest, FetchResponse, InitProducerIdRequest};
use std::time::{Duration, Instant};

/// ListOffsets' "latest" and "earliest" timestamps.
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;

#[tokio::test]
async fn produced_batches_get_dense_offsets_and_are_fetched_back() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "orders", 1).await;
    assert_eq!(
        produce_to(&mut c, "orders", batch(&["a", "b"])).await,
        (0, 0)
    );
    assert_eq!(produce_to(&mut c, "orders", batch(&["c"])).await, (0, 2));
    let p = fetch(&mut c, "orders", 0).await;
    assert_eq!(
        (
            p.error_code,
            p.high_watermark,
            p.last_stable_offset,
            p.log_start_offset
        ),
        (0, 3, 3, 0)
    );
    assert_eq!(
        values(&p.records.unwrap()),
        [(0, "a".into()), (1, "b".into()), (2, "c".into())]
    );
    let from_middle = fetch(&mut c, "orders", 2).await;
    assert_eq!(values(&from_middle.records.unwrap()), [(2, "c".into())]);
    front.stop().await;
}

#[tokio::test]
async fn a_burst_of_produce_requests_is_answered_in_request_order() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "burst", 2).await;
    let requests = vec![
        produce_request("burst", 0, batch(&["a"])),
        produce_request("burst", 1, batch(&["b", "c"])),
        produce_request("burst", 0, batch(&["d"])),
    ];
    let mut offsets = Vec::new();
    for answer in c.produce_burst(9, requests).await {
        let r = answer.response().await;
        let p = &r.responses[0].partition_responses[0];
        offsets.push((p.index, p.error_code, p.base_offset));
    }
    assert_eq!(offsets, [(0, 0, 0), (1, 0, 0), (0, 0, 1)]);
    front.stop().await;
}

#[tokio::test]
async fn a_request_larger_than_a_store_transaction_is_staged_whole() {
    let front = Front::start_with(|c| c.max_message_bytes = 4 << 20).await;
    let mut c = front.client();
    create_topic(&mut c, "big", 4).await;
    // Four 3 MB batches: 12 MB in one request, over FoundationDB's 10 MB transaction limit.
    let value = "x".repeat(3 << 20);
    let data = (0..4)
        .map(|p| {
            PartitionProduceData::default()
                .with_index(p)
                .with_records(Some(batch(&[&value])))
        })
        .collect();
    let request = produce_request("big", 0, Bytes::new()).with_topic_data(vec![
        TopicProduceData::default()
            .with_name(name("big"))
            .with_partition_data(data),
    ]);
    let response = c.call(9, request).await;
    let answers: Vec<(i32, i16, i64)> = response.responses[0]
        .partition_responses
        .iter()
        .map(|p| (p.index, p.error_code, p.base_offset))
        .collect();
    assert_eq!(answers, [(0, 0, 0), (1, 0, 0), (2, 0, 0), (3, 0, 0)]);
    front.stop().await;
}

#[tokio::test]
async fn produce_to_an_unknown_topic_or_partition_is_unknown_topic_or_partition() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "one", 1).await;
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    assert_eq!(
        produce_to(&mut c, "nowhere", batch(&["x"])).await.0,
        unknown
    );
    let refused = produce(&mut c, "one", 1, batch(&["x"])).await;
    assert_eq!(refused.error_code, unknown);
    assert_eq!(refused.base_offset, -1, "no offset, as Kafka answers");
    // Produce never creates a topic, whatever `auto_create_topics` says.
    assert!(front.ctx.topics.get("nowhere").is_none());
    front.stop().await;
}

#[tokio::test]
async fn a_corrupt_batch_is_corrupt_message_and_acknowledged_records_stay_intact() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "crc", 1).await;
    assert_eq!(
        produce_to(&mut c, "crc", batch(&["one", "two"])).await,
        (0, 0)
    );
    let mut corrupt = batch(&["evil"]).to_vec();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0x55;
    assert_eq!(
        produce_to(&mut c, "crc", Bytes::from(corrupt)).await.0,
        ResponseError::CorruptMessage.code()
    );
    let good = batch(&["three"]);
    let truncated = good.slice(..good.len() - 1);
    assert_eq!(
        produce_to(&mut c, "crc", truncated).await.0,
        ResponseError::CorruptMessage.code()
    );
    assert_eq!(produce_to(&mut c, "crc", good).await, (0, 2));
    let p = fetch(&mut c, "crc", 0).await;
    assert_eq!(p.high_watermark, 3);
    assert_eq!(
        values(&p.records.unwrap()),
        [(0, "one".into()), (1, "two".into()), (2, "three".into())]
    );
    front.stop().await;
}

#[tokio::test]
async fn batches_a_producer_may_not_send_are_refused_with_their_codes() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic_with(&mut c, "strict", 1, &[("max.message.bytes", "200")]).await;
    let too_large = batch(&[&"x".repeat(300)]);
    assert_eq!(
        produce_to(&mut c, "strict", too_large).await.0,
        ResponseError::MessageTooLarge.code()
    );
    let control = Bytes::from(marker(7, 0, true, FIRST_TIMESTAMP));
    assert_eq!(
        produce_to(&mut c, "strict", control).await.0,
        ResponseError::InvalidRecord.code()
    );
    let two = [batch(&["a"]), batch(&["b"])].concat();
    assert_eq!(
        produce_to(&mut c, "strict", Bytes::from(two)).await.0,
        ResponseError::InvalidRecord.code()
    );
    let mut old_format = batch(&["a"]).to_vec();
    old_format[16] = 1;
    assert_eq!(
        produce_to(&mut c, "strict", Bytes::from(old_format))
            .await
            .0,
        ResponseError::UnsupportedForMessageFormat.code()
    );
    assert_eq!(
        fetch(&mut c, "strict", 0).await.high_watermark,
        0,
        "nothing refused is in the log"
    );
    front.stop().await;
}

#[tokio::test]
async fn a_produce_with_acks_zero_is_not_answered_but_written() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "fire", 1).await;
    let request = produce_request("fire", 0, batch(&["forgotten"])).with_acks(0);
    assert!(matches!(c.send(9, request).await, Answer::Nothing));
    let p = fetch_until(&mut c, "fire", 1).await;
    assert_eq!(values(&p.records.unwrap()), [(0, "forgotten".into())]);
    front.stop().await;
}

#[tokio::test]
async fn an_idempotent_resend_gets_its_first_offset_and_a_sequence_gap_is_refused() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "idem", 1).await;
    let idempotent = InitProducerIdRequest::default().with_transactional_id(None);
    let init = c.call(4, idempotent).await;
    assert_eq!((init.error_code, init.producer_epoch), (0, 0));
    let producer = (init.producer_id.0, 0);
    let first = producer_batch(&["a", "b"], producer, 0, false);
    assert_eq!(produce_to(&mut c, "idem", first.clone()).await, (0, 0));
    assert_eq!(
        produce_to(&mut c, "idem", first).await,
        (0, 0),
        "a resend is answered with its offset and not written again"
    );
    let gap = producer_batch(&["z"], producer, 5, false);
    assert_eq!(
        produce_to(&mut c, "idem", gap).await.0,
        ResponseError::OutOfOrderSequenceNumber.code()
    );
    let next = producer_batch(&["c"], producer, 2, false);
    assert_eq!(produce_to(&mut c, "idem", next).await, (0, 2));
    let p = fetch(&mut c, "idem", 0).await;
    assert_eq!(
        values(&p.records.unwrap()),
        [(0, "a".into()), (1, "b".into()), (2, "c".into())]
    );
    front.stop().await;
}

#[tokio::test]
async fn fetching_outside_the_log_is_offset_out_of_range() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "bounds", 1).await;
    produce_to(&mut c, "bounds", batch(&["a", "b"])).await;
    let out_of_range = ResponseError::OffsetOutOfRange.code();
    let past = fetch(&mut c, "bounds", 3).await;
    assert_eq!((past.error_code, past.high_watermark), (out_of_range, 2));
    assert_eq!(fetch(&mut c, "bounds", -1).await.error_code, out_of_range);
    let end = fetch(&mut c, "bounds", 2).await;
    assert_eq!(
        (
            end.error_code,
            end.high_watermark,
            end.records.map(|r| r.len())
        ),
        (0, 2, Some(0)),
        "the end of the log is empty, not an error"
    );
    front.stop().await;
}

#[tokio::test]
async fn fetching_an_unknown_topic_is_unknown_topic_or_partition() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "known", 1).await;
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    assert_eq!(fetch(&mut c, "unknown", 0).await.error_code, unknown);
    let p = fetch_with(&mut c, fetch_request("known", 3, 0)).await;
    assert_eq!((p.partition_index, p.error_code), (3, unknown));
    front.stop().await;
}

/// A fetch of partitions 0 and 1 of `topic` in session `session` at `epoch`, from the
/// given offsets (an incremental fetch names only what changed: `None` leaves one out).
fn session_fetch(topic: &str, session: i32, epoch: i32, offsets: [Option<i64>; 2]) -> FetchRequest {
    let mut request = fetch_request(topic, 0, 0)
        .with_session_id(session)
        .with_session_epoch(epoch);
    request.topics[0].partitions = offsets
        .iter()
        .enumerate()
        .filter_map(|(index, offset)| {
            let template = request.topics[0].partitions[0].clone();
            offset.map(|o| template.with_partition(index as i32).with_fetch_offset(o))
        })
        .collect();
    if request.topics[0].partitions.is_empty() {
        request.topics.clear();
    }
    request
}

/// (partition, high watermark, record bytes) of each partition answered.
fn answered(response: &FetchResponse) -> Vec<(i32, i64, usize)> {
    response
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| {
            let bytes = p.records.as_ref().map_or(0, |r| r.len());
            (p.partition_index, p.high_watermark, bytes)
        })
        .collect()
}

#[tokio::test]
async fn a_fetch_session_answers_only_what_changed() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "s", 2).await;
    produce_to(&mut c, "s", batch(&["zero"])).await;
    // Epoch 0 opens a session with both partitions; the answer is full.
    let full = c
        .call(12, session_fetch("s", 0, 0, [Some(0), Some(0)]))
        .await;
    let session = full.session_id;
    assert!(session > 0, "a session is opened");
    let got = answered(&full);
    assert_eq!(got.len(), 2);
    assert_eq!((got[0].0, got[0].1), (0, 1));
    assert!(got[0].2 > 0, "partition 0's record");
    assert_eq!(got[1], (1, 0, 0));
    // Nothing new, the position of partition 0 moved: nothing to answer.
    let quiet = c
        .call(12, session_fetch("s", session, 1, [Some(1), None]))
        .await;
    assert_eq!((quiet.error_code, quiet.session_id), (0, session));
    assert_eq!(answered(&quiet), []);
    // A record on partition 1, which the request does not name: the session reads it.
    produce(&mut c, "s", 1, batch(&["one"])).await;
    let news = c
        .call(12, session_fetch("s", session, 2, [None, None]))
        .await;
    let got = answered(&news);
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].0, got[0].1), (1, 1));
    assert!(got[0].2 > 0);
    // The same epoch again, or an unknown session: refused, with nothing read.
    let again = c
        .call(12, session_fetch("s", session, 2, [None, None]))
        .await;
    assert_eq!(
        (again.error_code, again.responses.len()),
        (ResponseError::InvalidFetchSessionEpoch.code(), 0)
    );
    let unknown = session.wrapping_add(1).max(1);
    let lost = c
        .call(12, session_fetch("s", unknown, 1, [None, None]))
        .await;
    assert_eq!(
        lost.error_code,
        ResponseError::FetchSessionIdNotFound.code()
    );
    // Epoch -1 closes the session: a full, sessionless answer.
    let last = c
        .call(12, session_fetch("s", session, -1, [Some(1), Some(1)]))
        .await;
    assert_eq!((last.error_code, last.session_id), (0, 0));
    assert_eq!(answered(&last), [(0, 1, 0), (1, 1, 0)]);
    assert!(front.ctx.fetch_sessions.is_empty());
    front.stop().await;
}

#[tokio::test]
async fn a_fetch_returns_whole_batches_within_the_partition_limit_but_always_the_first() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "sizes", 1).await;
    produce_to(&mut c, "sizes", batch(&["first", "batch"])).await;
    produce_to(&mut c, "sizes", batch(&["second"])).await;
    let mut request = fetch_request("sizes", 0, 0);
    request.topics[0].partitions[0].partition_max_bytes = 1;
    let p = fetch_with(&mut c, request).await;
    assert_eq!(
        values(&p.records.unwrap()),
        [(0, "first".into()), (1, "batch".into())],
        "one whole batch, though larger than the limit"
    );
    front.stop().await;
}

#[tokio::test]
async fn a_long_poll_answers_when_records_arrive() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "waiting", 1).await;
    let request = fetch_request("waiting", 0, 0)
        .with_max_wait_ms(8_000)
        .with_min_bytes(1);
    let started = Instant::now();
    let Answer::Response(poll) = c.send(12, request).await else {
        panic!("a fetch is answered");
    };
    // The poll is asleep on its watch, not answering empty.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!poll.is_finished(), "answered before any record arrived");
    assert_eq!(
        produce_to(&mut c, "waiting", batch(&["news"])).await,
        (0, 0)
    );
    let response = poll.response().await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "woken, not timed out"
    );
    let p = &response.responses[0].partitions[0];
    assert_eq!((p.error_code, p.high_watermark), (0, 1));
    assert_eq!(values(p.records.as_ref().unwrap()), [(0, "news".into())]);
    front.stop().await;
}

#[tokio::test]
async fn a_long_poll_answers_empty_when_its_wait_passes() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "quiet", 1).await;
    let request = fetch_request("quiet", 0, 0)
        .with_max_wait_ms(200)
        .with_min_bytes(1);
    let started = Instant::now();
    let p = fetch_with(&mut c, request).await;
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(
        (p.error_code, p.high_watermark, p.records.map(|r| r.len())),
        (0, 0, Some(0))
    );
    front.stop().await;
}

#[tokio::test]
async fn list_offsets_finds_the_earliest_the_latest_and_the_first_at_a_time() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "times", 1).await;
    // Timestamps FIRST_TIMESTAMP + 0, 10, 20 at offsets 0, 1, 2.
    produce_to(&mut c, "times", batch(&["a", "b", "c"])).await;
    let at = |p: kafka_protocol::messages::list_offsets_response::ListOffsetsPartitionResponse| {
        (p.error_code, p.offset, p.timestamp)
    };
    assert_eq!(
        at(list_offset(&mut c, "times", 0, EARLIEST, 0).await),
        (0, 0, -1)
    );
    assert_eq!(
        at(list_offset(&mut c, "times", 0, LATEST, 0).await),
        (0, 3, -1)
    );
    let found = list_offset(&mut c, "times", 0, FIRST_TIMESTAMP + 5, 0).await;
    assert_eq!((found.error_code, found.offset), (0, 1));
    let before = list_offset(&mut c, "times", 0, 0, 0).await;
    assert_eq!((before.error_code, before.offset), (0, 0));
    assert_eq!(
        at(list_offset(&mut c, "times", 0, FIRST_TIMESTAMP + 21, 0).await),
        (0, -1, -1),
        "no record is that new"
    );
    assert_eq!(
        list_offset(&mut c, "times", 1, LATEST, 0).await.error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
    assert_eq!(
        list_offset(&mut c, "absent", 0, LATEST, 0).await.error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
    front.stop().await;
}

#[tokio::test]
async fn a_produce_naming_several_topics_answers_each_partition() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "left", 1).await;
    create_topic(&mut c, "right", 1).await;
    let data = |topic: &str, partition: i32| {
        TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![
                PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(batch(&[topic]))),
            ])
    };
    let request = produce_request("left", 0, batch(&["first"]));
    let request =
        request.with_topic_data(vec![data("left", 0), data("right", 0), data("right", 4)]);
    let response = c.call(9, request).await;
    // The base offset of a refused partition is not asserted: clients ignore it.
    let answered: Vec<(String, i32, i16, Option<i64>)> = response
        .responses
        .iter()
        .flat_map(|t| {
            t.partition_responses.iter().map(|p| {
                let offset = (p.error_code == 0).then_some(p.base_offset);
                (t.name.0.to_string(), p.index, p.error_code, offset)
            })
        })
        .collect();
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    assert_eq!(
        answered,
        [
            ("left".into(), 0, 0, Some(0)),
            ("right".into(), 0, 0, Some(0)),
            ("right".into(), 4, unknown, None),
        ]
    );
    front.stop().await;
}
