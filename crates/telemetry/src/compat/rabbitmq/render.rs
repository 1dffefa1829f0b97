//! Renders RabbitMQ's families from [`super::state`] in the Prometheus text format, in
//! either of RabbitMQ's views ([`Detail`]). A fresh recorder per scrape: series of a
//! deleted queue vanish with the queue, and the two views share no state.

use super::state::{COUNTERS, MEASURED, NODE, Node, QueueSample};
use super::*;
use crate::process;
use metrics::{Label, counter, gauge};
use metrics_exporter_prometheus::PrometheusBuilder;
use std::sync::atomic::{AtomicU64, Ordering};

/// RabbitMQ's families in `detail`'s view, in the Prometheus text format.
pub fn render(detail: Detail) -> String {
    let node = NODE.lock().clone().unwrap_or_default();
    let queues = MEASURED.lock().clone();
    render_from(detail, &node, &queues)
}

/// [`render`] of the given node and queue measurements.
fn render_from(detail: Detail, node: &Node, queues: &[QueueSample]) -> String {
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::with_local_recorder(&recorder, || {
        for family in ALL {
            let m = &family.metric;
            match m.kind {
                Kind::Counter => metrics::describe_counter!(m.name, m.help),
                _ => metrics::describe_gauge!(m.name, m.help),
            }
        }
        record_node(node);
        record_counters(detail);
        record_queues(detail, queues);
    });
    handle.render()
}

fn value(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

fn record_node(node: &Node) {
    gauge!(IDENTITY_INFO, LABEL_NODE => node.node.clone(), LABEL_CLUSTER => node.cluster.clone(), LABEL_CLUSTER_PERMANENT_ID => node.cluster_permanent_id.clone()).set(1.0);
    let version = env!("CARGO_PKG_VERSION");
    gauge!(BUILD_INFO,
        LABEL_RABBITMQ_VERSION => format!("ferry {version}"),
        LABEL_PLUGIN_VERSION => version,
        LABEL_CLIENT_VERSION => "metrics-exporter-prometheus",
        LABEL_ERLANG_VERSION => "none")
    .set(1.0);
    record_process(node);
}

/// The process figures RabbitMQ-Overview charts, where this platform tells them.
fn record_process(node: &Node) {
    if let Some(bytes) = process::resident_bytes() {
        gauge!(PROCESS_RESIDENT_MEMORY_BYTES).set(bytes as f64);
    }
    gauge!(RESIDENT_MEMORY_LIMIT_BYTES).set(node.memory_limit_bytes as f64);
    if let Some(open) = process::open_fds() {
        gauge!(PROCESS_OPEN_FDS).set(open as f64);
    }
    if let Some(max) = process::max_fds() {
        gauge!(PROCESS_MAX_FDS).set(max as f64);
    }
    if let Some(free) = node
        .data_dir
        .as_deref()
        .and_then(crate::file_system::available_bytes)
    {
        gauge!(DISK_SPACE_AVAILABLE_BYTES).set(free as f64);
    }
    if let Some(limit) = node.disk_limit_bytes {
        gauge!(DISK_SPACE_AVAILABLE_LIMIT_BYTES).set(limit as f64);
    }
}

fn record_counters(detail: Detail) {
    let c = &COUNTERS;
    let open = |opened: &AtomicU64, closed: &AtomicU64| value(opened).saturating_sub(value(closed));
    gauge!(CONNECTIONS).set(open(&c.connections_opened, &c.connections_closed) as f64);
    gauge!(CHANNELS).set(open(&c.channels_opened, &c.channels_closed) as f64);
    for (name, n) in [
        (CONNECTIONS_OPENED_TOTAL, &c.connections_opened),
        (CONNECTIONS_CLOSED_TOTAL, &c.connections_closed),
        (CHANNELS_OPENED_TOTAL, &c.channels_opened),
        (CHANNELS_CLOSED_TOTAL, &c.channels_closed),
        (QUEUES_DECLARED_TOTAL, &c.queues_declared),
        (QUEUES_CREATED_TOTAL, &c.queues_created),
        (QUEUES_DELETED_TOTAL, &c.queues_deleted),
    ] {
        counter!(name).absolute(value(n));
    }
    let protocol = [Label::new(LABEL_PROTOCOL, PROTOCOL_AMQP091)];
    for (name, n) in [
        (GLOBAL_MESSAGES_RECEIVED_TOTAL, &c.received),
        (GLOBAL_MESSAGES_RECEIVED_CONFIRM_TOTAL, &c.received_confirm),
        (GLOBAL_MESSAGES_ROUTED_TOTAL, &c.routed),
        (
            GLOBAL_MESSAGES_UNROUTABLE_DROPPED_TOTAL,
            &c.unroutable_dropped,
        ),
        (
            GLOBAL_MESSAGES_UNROUTABLE_RETURNED_TOTAL,
            &c.unroutable_returned,
        ),
        (GLOBAL_MESSAGES_CONFIRMED_TOTAL, &c.confirmed),
    ] {
        counter!(name, protocol.iter()).absolute(value(n));
    }
    let delivered = [
        &c.consume_manual_ack,
        &c.consume_auto_ack,
        &c.get_manual_ack,
        &c.get_auto_ack,
    ]
    .into_iter()
    .map(value)
    .sum();
    let by_type = [
        Label::new(LABEL_PROTOCOL, PROTOCOL_AMQP091),
        Label::new(LABEL_QUEUE_TYPE, QUEUE_TYPE_CLASSIC),
    ];
    for (name, n) in [
        (GLOBAL_MESSAGES_DELIVERED_TOTAL, delivered),
        (
            GLOBAL_MESSAGES_DELIVERED_CONSUME_MANUAL_ACK_TOTAL,
            value(&c.consume_manual_ack),
        ),
        (
            GLOBAL_MESSAGES_DELIVERED_CONSUME_AUTO_ACK_TOTAL,
            value(&c.consume_auto_ack),
        ),
        (
            GLOBAL_MESSAGES_DELIVERED_GET_MANUAL_ACK_TOTAL,
            value(&c.get_manual_ack),
        ),
        (
            GLOBAL_MESSAGES_DELIVERED_GET_AUTO_ACK_TOTAL,
            value(&c.get_auto_ack),
        ),
        (GLOBAL_MESSAGES_REDELIVERED_TOTAL, value(&c.redelivered)),
        (GLOBAL_MESSAGES_ACKNOWLEDGED_TOTAL, value(&c.acknowledged)),
        (GLOBAL_MESSAGES_GET_EMPTY_TOTAL, value(&c.get_empty)),
    ] {
        counter!(name, by_type.iter()).absolute(n);
    }
    if detail == Detail::Aggregated {
        // RabbitMQ's per-channel counters, summed over channels: the same events.
        for (name, n) in [
            (QUEUE_MESSAGES_PUBLISHED_TOTAL, &c.stored_in_queues),
            (CHANNEL_MESSAGES_PUBLISHED_TOTAL, &c.received),
            (CHANNEL_MESSAGES_CONFIRMED_TOTAL, &c.confirmed),
            (
                CHANNEL_MESSAGES_UNROUTABLE_RETURNED_TOTAL,
                &c.unroutable_returned,
            ),
            (
                CHANNEL_MESSAGES_UNROUTABLE_DROPPED_TOTAL,
                &c.unroutable_dropped,
            ),
            (CHANNEL_MESSAGES_DELIVERED_ACK_TOTAL, &c.consume_manual_ack),
            (CHANNEL_MESSAGES_DELIVERED_TOTAL, &c.consume_auto_ack),
            (CHANNEL_MESSAGES_REDELIVERED_TOTAL, &c.redelivered),
            (CHANNEL_MESSAGES_ACKED_TOTAL, &c.acknowledged),
            (CHANNEL_GET_ACK_TOTAL, &c.get_manual_ack),
            (CHANNEL_GET_TOTAL, &c.get_auto_ack),
            (CHANNEL_GET_EMPTY_TOTAL, &c.get_empty),
        ] {
            counter!(name).absolute(value(n));
        }
    }
}

fn record_queues(detail: Detail, queues: &[QueueSample]) {
    let consumers: u64 = queues.iter().map(|q| q.consumers).sum();
    gauge!(QUEUES).set(queues.len() as f64);
    gauge!(CONSUMERS).set(consumers as f64);
    gauge!(GLOBAL_CONSUMERS, LABEL_PROTOCOL => PROTOCOL_AMQP091).set(consumers as f64);
    let depths = |q: &QueueSample| {
        [
            (QUEUE_MESSAGES_READY, q.ready),
            (QUEUE_MESSAGES_UNACKED, q.unacked),
            (QUEUE_MESSAGES, q.ready + q.unacked),
            (QUEUE_CONSUMERS, q.consumers),
        ]
    };
    match detail {
        Detail::Aggregated => {
            gauge!(CHANNEL_CONSUMERS).set(consumers as f64);
            let mut sums = depths(&QueueSample::default());
            for q in queues {
                for (sum, (_, n)) in sums.iter_mut().zip(depths(q)) {
                    sum.1 += n;
                }
            }
            for (name, n) in sums {
                gauge!(name).set(n as f64);
            }
        }
        Detail::PerObject => {
            for q in queues {
                let labels = [
                    Label::new(LABEL_VHOST, q.vhost.clone()),
                    Label::new(LABEL_QUEUE, q.queue.clone()),
                ];
                for (name, n) in depths(q) {
                    gauge!(name, labels.iter()).set(n as f64);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Each family's `# TYPE` and the label names of its samples, from a rendering.
    fn families(text: &str) -> BTreeMap<String, (String, Vec<Vec<String>>)> {
        let mut out: BTreeMap<String, (String, Vec<Vec<String>>)> = BTreeMap::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                out.entry(name.to_owned()).or_default().0 = kind.to_owned();
            } else if !line.starts_with('#') && !line.is_empty() {
                let name = line.split(['{', ' ']).next().unwrap();
                let labels = line
                    .split_once('{')
                    .map(|(_, rest)| {
                        rest.split(',')
                            .filter_map(|kv| kv.split_once('=').map(|(k, _)| k.to_owned()))
                            .collect()
                    })
                    .unwrap_or_default();
                out.entry(name.to_owned()).or_default().1.push(labels);
            }
        }
        out
    }

    #[test]
    fn each_view_renders_exactly_the_families_of_its_scope() {
        let queues = [QueueSample {
            vhost: "/".into(),
            queue: "q".into(),
            ready: 3,
            unacked: 1,
            consumers: 2,
        }];
        let node = Node {
            memory_limit_bytes: 1 << 30,
            data_dir: Some(std::env::temp_dir()),
            disk_limit_bytes: Some(50 << 20),
            ..Node::default()
        };
        for detail in [Detail::Aggregated, Detail::PerObject] {
            let rendered = families(&render_from(detail, &node, &queues));
            let expected: BTreeMap<String, (String, Vec<String>)> = ALL
                .iter()
                .filter_map(|f| {
                    let labels = f.scope.labels(detail)?;
                    let kind = match f.metric.kind {
                        Kind::Counter => "counter",
                        _ => "gauge",
                    };
                    Some((
                        f.metric.name.to_owned(),
                        (
                            kind.to_owned(),
                            labels.iter().map(|l| l.to_string()).collect(),
                        ),
                    ))
                })
                .collect();
            let got: BTreeMap<String, (String, Vec<String>)> = rendered
                .into_iter()
                .map(|(name, (kind, samples))| {
                    assert!(
                        samples.windows(2).all(|w| w[0] == w[1]),
                        "{name}: label sets differ"
                    );
                    (name, (kind, samples.into_iter().next().unwrap_or_default()))
                })
                .collect();
            assert_eq!(got, expected, "{detail:?}");
        }
    }

    #[test]
    fn aggregated_view_sums_queues_and_per_object_view_labels_them() {
        let queues = [
            QueueSample {
                vhost: "/".into(),
                queue: "a".into(),
                ready: 3,
                unacked: 1,
                consumers: 0,
            },
            QueueSample {
                vhost: "v".into(),
                queue: "b".into(),
                ready: 2,
                unacked: 0,
                consumers: 1,
            },
        ];
        let node = Node::default();
        let aggregated = render_from(Detail::Aggregated, &node, &queues);
        assert!(
            aggregated.contains("\nrabbitmq_queue_messages_ready 5\n"),
            "{aggregated}"
        );
        assert!(
            aggregated.contains("\nrabbitmq_queue_messages 6\n"),
            "{aggregated}"
        );
        let per_object = render_from(Detail::PerObject, &node, &queues);
        assert!(
            per_object.contains("rabbitmq_queue_messages_ready{vhost=\"/\",queue=\"a\"} 3\n"),
            "{per_object}"
        );
        assert!(
            per_object.contains("rabbitmq_queue_messages_ready{vhost=\"v\",queue=\"b\"} 2\n"),
            "{per_object}"
        );
        assert!(!per_object.contains("rabbitmq_channel_"), "{per_object}");
    }
}
