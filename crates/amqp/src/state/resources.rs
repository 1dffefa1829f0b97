//! The resource monitor: every `amqp.resource_check_ms` it reads every queue's depth
//! (publishing the ready/unacked gauges, also under RabbitMQ's names), and raises or
//! clears the alarm that blocks publishers (`connection.blocked`) while the store's
//! free-disk alarm (`store.min_free_disk_mb`) or the memory high-water mark
//! (`daemon.max_memory_mb`, [`MemoryWatermark`]) is raised, or `amqp.max_backlog_messages`
//! is exceeded.

use super::broker::Broker;
use ferry_config::AmqpConfig;
use ferry_telemetry::amqp as metric;
use ferry_telemetry::compat::rabbitmq::state::{self as rabbitmq, QueueSample};
use ferry_telemetry::memory_watermark::MemoryWatermark;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Runs the monitor until `shutdown`, publishing the alarm on `alarm`.
pub(crate) async fn run(
    broker: Arc<Broker>,
    mut memory: MemoryWatermark,
    alarm: watch::Sender<Option<String>>,
    shutdown: CancellationToken,
) {
    let config = &broker.config;
    let mut ticks = tokio::time::interval(config.resource_check());
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = ticks.tick() => {}
            () = memory.changed() => {}
        }
        let backlog = publish_depths(&broker).await;
        let reason = broker
            .db
            .disk_alarm()
            .or_else(|| memory.raised())
            .or_else(|| backlog_exceeded(config, backlog));
        metrics::gauge!(metric::BLOCKED).set(if reason.is_some() { 1.0 } else { 0.0 });
        if *alarm.borrow() != reason {
            match &reason {
                Some(r) => warn!(reason = %r, "blocking AMQP publishers"),
                None => info!("unblocking AMQP publishers"),
            }
            alarm.send_replace(reason);
        }
    }
}

/// Reads every queue's depth, sets its gauges, and returns the ready messages in all.
async fn publish_depths(broker: &Broker) -> u64 {
    let mut backlog = 0u64;
    let mut measured = Vec::new();
    for vhost in broker.vhosts.list() {
        for queue in vhost.queues() {
            match queue.stage.depth().await {
                Ok(depth) => {
                    let labels = queue.labels();
                    metrics::gauge!(metric::QUEUE_READY, &labels).set(depth.ready as f64);
                    metrics::gauge!(metric::QUEUE_UNACKED, &labels).set(depth.in_flight as f64);
                    backlog += depth.ready.max(0) as u64;
                    measured.push(QueueSample {
                        vhost: vhost.name.clone(),
                        queue: queue.name.clone(),
                        ready: depth.ready.max(0) as u64,
                        unacked: depth.in_flight.max(0) as u64,
                        consumers: queue.consumers() as u64,
                    });
                }
                Err(e) => warn!(queue = %queue.name, error = %e, "cannot read a queue's depth"),
            }
        }
    }
    rabbitmq::queues_measured(measured);
    backlog
}

/// Why publishers must be blocked, if `backlog` exceeds `amqp.max_backlog_messages`.
fn backlog_exceeded(config: &AmqpConfig, backlog: u64) -> Option<String> {
    (config.max_backlog_messages > 0 && backlog > config.max_backlog_messages).then(|| {
        format!(
            "{backlog} ready messages exceed amqp.max_backlog_messages ({})",
            config.max_backlog_messages
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backlog_blocks_only_when_exceeded_and_configured() {
        let mut config = AmqpConfig::default();
        assert_eq!(backlog_exceeded(&config, u64::MAX), None);
        config.max_backlog_messages = 10;
        assert_eq!(backlog_exceeded(&config, 10), None);
        assert_eq!(
            backlog_exceeded(&config, 11).as_deref(),
            Some("11 ready messages exceed amqp.max_backlog_messages (10)")
        );
    }
}
