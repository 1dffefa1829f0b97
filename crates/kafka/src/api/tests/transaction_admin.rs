//! The transaction admin APIs (KIP-664) over the coordinator's state: DescribeTransactions,
//! ListTransactions with each of its filters, DescribeProducers of idempotent and
//! transactional producers, and what each refuses or leaves out without the ACLs.

use super::acls::{
    ALLOW, DESCRIBE, LITERAL, READ, TOPIC, TRANSACTIONAL_ID, client_of, create_acls, creation,
    guarded,
};
use super::create_topic;
use super::fixture::{Client, Front, name, producer_batch, text};
use super::produce_to;
use super::transactions::{add_partitions, end, producer};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::describe_transactions_response::TransactionState;
use kafka_protocol::messages::{
    DescribeProducersRequest, DescribeTransactionsRequest, InitProducerIdRequest,
    ListTransactionsRequest, ProducerId, TransactionalId,
};

/// DescribeTransactions (v0) of one id.
async fn describe(c: &mut Client, id: &str) -> TransactionState {
    let request = DescribeTransactionsRequest::default()
        .with_transactional_ids(vec![TransactionalId(text(id))]);
    c.call(0, request).await.transaction_states.remove(0)
}

/// ListTransactions at `version`: (error code, unknown state filters, (id, state) sorted).
async fn list(
    c: &mut Client,
    version: i16,
    request: ListTransactionsRequest,
) -> (i16, Vec<String>, Vec<(String, String)>) {
    let r = c.call(version, request).await;
    let mut listed: Vec<(String, String)> = r
        .transaction_states
        .iter()
        .map(|t| {
            (
                t.transactional_id.as_str().to_owned(),
                t.transaction_state.as_str().to_owned(),
            )
        })
        .collect();
    listed.sort();
    let unknown = r
        .unknown_state_filters
        .iter()
        .map(|s| s.to_string())
        .collect();
    (r.error_code, unknown, listed)
}

fn states(filters: &[&str]) -> ListTransactionsRequest {
    ListTransactionsRequest::default()
        .with_state_filters(filters.iter().map(|s| text(s)).collect())
        .with_duration_filter(-1)
}

fn listed(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(i, s)| ((*i).to_owned(), (*s).to_owned()))
        .collect()
}

#[tokio::test]
async fn describe_transactions_follows_a_transaction_from_empty_to_ongoing_and_back() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "ledger", 2).await;
    let unknown = describe(&mut c, "nobody").await;
    assert_eq!(
        unknown.error_code,
        ResponseError::TransactionalIdNotFound.code()
    );

    let p = producer(&mut c, "writer").await;
    let idle = describe(&mut c, "writer").await;
    assert_eq!(idle.error_code, 0);
    assert_eq!(idle.transaction_state.as_str(), "Empty");
    assert_eq!((idle.producer_id.0, idle.producer_epoch), p);
    assert_eq!(idle.transaction_timeout_ms, 60_000);
    assert_eq!(idle.transaction_start_time_ms, -1);
    assert!(idle.topics.is_empty());

    add_partitions(&mut c, "writer", p, &[("ledger", &[1, 0])]).await;
    let open = describe(&mut c, "writer").await;
    assert_eq!(open.transaction_state.as_str(), "Ongoing");
    assert!(open.transaction_start_time_ms > 0);
    assert_eq!(open.topics.len(), 1);
    assert_eq!(open.topics[0].topic, name("ledger"));
    assert_eq!(open.topics[0].partitions, [0, 1]);

    assert_eq!(end(&mut c, "writer", p, true).await, 0);
    let ended = describe(&mut c, "writer").await;
    assert_eq!(ended.transaction_state.as_str(), "Empty");
    assert!(ended.topics.is_empty());
}

#[tokio::test]
async fn list_transactions_filters_by_state_producer_duration_and_pattern() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "ledger", 1).await;
    let open = producer(&mut c, "orders-1").await;
    let idle = producer(&mut c, "payments-1").await;
    add_partitions(&mut c, "orders-1", open, &[("ledger", &[0])]).await;

    let everything = listed(&[("orders-1", "Ongoing"), ("payments-1", "Empty")]);
    assert_eq!(list(&mut c, 0, states(&[])).await, (0, vec![], everything));
    assert_eq!(
        list(&mut c, 0, states(&["Ongoing", "Bogus"])).await,
        (
            0,
            vec!["Bogus".to_owned()],
            listed(&[("orders-1", "Ongoing")])
        )
    );
    let by_producer = states(&[]).with_producer_id_filters(vec![ProducerId(idle.0)]);
    assert_eq!(
        list(&mut c, 0, by_producer).await.2,
        listed(&[("payments-1", "Empty")])
    );
    // v1: open longer than a day — none; longer than 0 ms — the open one (ages are ms).
    assert!(
        list(&mut c, 1, states(&[]).with_duration_filter(86_400_000))
            .await
            .2
            .is_empty()
    );
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    assert_eq!(
        list(&mut c, 1, states(&[]).with_duration_filter(0)).await.2,
        listed(&[("orders-1", "Ongoing")])
    );
    // v2: a pattern over whole ids; one that does not parse is INVALID_REGULAR_EXPRESSION.
    let pattern = |p: &str| states(&[]).with_transactional_id_pattern(Some(text(p)));
    assert_eq!(
        list(&mut c, 2, pattern("pay.*")).await.2,
        listed(&[("payments-1", "Empty")])
    );
    assert!(list(&mut c, 2, pattern("pay")).await.2.is_empty());
    assert_eq!(
        list(&mut c, 2, pattern("(")).await.0,
        ResponseError::InvalidRegularExpression.code()
    );
}

#[tokio::test]
async fn describe_producers_shows_each_producer_its_last_sequence_and_open_transaction() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "ledger", 1).await;
    let idempotent = c
        .call(
            4,
            InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000),
        )
        .await;
    assert_eq!(idempotent.error_code, 0);
    let idempotent = (idempotent.producer_id.0, idempotent.producer_epoch);
    let batch = producer_batch(&["a", "b", "c"], idempotent, 0, false);
    assert_eq!(produce_to(&mut c, "ledger", batch).await, (0, 0));
    let transactional = producer(&mut c, "writer").await;
    add_partitions(&mut c, "writer", transactional, &[("ledger", &[0])]).await;
    let batch = producer_batch(&["t"], transactional, 0, true);
    assert_eq!(produce_to(&mut c, "ledger", batch).await, (0, 3));

    let request = DescribeProducersRequest::default().with_topics(vec![
        TopicRequest::default()
            .with_name(name("ledger"))
            .with_partition_indexes(vec![0, 7]),
        TopicRequest::default()
            .with_name(name("missing"))
            .with_partition_indexes(vec![0]),
    ]);
    let r = c.call(0, request).await;
    let partition = &r.topics[0].partitions[0];
    assert_eq!(partition.error_code, 0);
    let mut producers: Vec<(i64, i32, i32, i64)> = partition
        .active_producers
        .iter()
        .map(|p| {
            (
                p.producer_id.0,
                p.producer_epoch,
                p.last_sequence,
                p.current_txn_start_offset,
            )
        })
        .collect();
    producers.sort();
    let epoch = |p: (i64, i16)| i32::from(p.1);
    assert_eq!(
        producers,
        [
            (idempotent.0, epoch(idempotent), 2, -1),
            (transactional.0, epoch(transactional), 0, 3)
        ]
    );
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    assert_eq!(r.topics[0].partitions[1].error_code, unknown);
    assert_eq!(r.topics[1].partitions[0].error_code, unknown);
}

/// DescribeProducers (v0) of partition 0 of `ledger`: its error code.
async fn describe_ledger_producers(c: &mut Client) -> i16 {
    let request = DescribeProducersRequest::default().with_topics(vec![
        TopicRequest::default()
            .with_name(name("ledger"))
            .with_partition_indexes(vec![0]),
    ]);
    c.call(0, request).await.topics[0].partitions[0].error_code
}

#[tokio::test]
async fn the_transaction_admin_apis_show_only_what_acls_allow() {
    let front = guarded().await;
    let mut admin = client_of(&front, "admin");
    create_topic(&mut admin, "ledger", 1).await;
    producer(&mut admin, "seen").await;
    producer(&mut admin, "hidden").await;
    let granted = create_acls(
        &mut admin,
        vec![creation(
            TRANSACTIONAL_ID,
            "seen",
            LITERAL,
            "User:alice",
            DESCRIBE,
            ALLOW,
        )],
    )
    .await;
    assert_eq!(granted, [0]);
    let mut alice = client_of(&front, "alice");
    assert_eq!(
        list(&mut alice, 0, states(&[])).await.2,
        listed(&[("seen", "Empty")])
    );
    assert_eq!(describe(&mut alice, "seen").await.error_code, 0);
    assert_eq!(
        describe(&mut alice, "hidden").await.error_code,
        ResponseError::TransactionalIdAuthorizationFailed.code()
    );
    assert_eq!(
        describe_ledger_producers(&mut alice).await,
        ResponseError::TopicAuthorizationFailed.code()
    );
    let granted = create_acls(
        &mut admin,
        vec![creation(
            TOPIC,
            "ledger",
            LITERAL,
            "User:alice",
            READ,
            ALLOW,
        )],
    )
    .await;
    assert_eq!(granted, [0]);
    assert_eq!(describe_ledger_producers(&mut alice).await, 0);
}
