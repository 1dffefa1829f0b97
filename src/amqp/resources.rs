//! The resource monitor: every `amqp.resource_check_ms` it reads every queue's depth
//! (publishing the ready/unacked gauges, also under RabbitMQ's names) and the process's resident memory, and raises or
//! clears the alarm that blocks publishers (`connection.blocked`) when
//! `amqp.max_backlog_messages` or `amqp.max_memory_mb` is exceeded, or while the store's
//! free-disk alarm (`store.min_free_disk_mb`) is raised.

use super::broker::Broker;
use crate::config::AmqpConfig;
use crate::telemetry::amqp as metric;
use crate::telemetry::compat::rabbitmq::state::{self as rabbitmq, QueueSample};
use std::sync::Arc;
use tokio::sync::watch;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Runs the monitor until `shutdown`, publishing the alarm on `alarm`.
pub async fn run(
    broker: Arc<Broker>,
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
        }
        let backlog = publish_depths(&broker).await;
        let reason = broker
            .db
            .disk_alarm()
            .or_else(|| limit_reached(config, backlog, resident_mb()));
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

/// Why publishers must be blocked, if a limit is exceeded.
fn limit_reached(config: &AmqpConfig, backlog: u64, resident_mb: Option<u64>) -> Option<String> {
    if config.max_backlog_messages > 0 && backlog > config.max_backlog_messages {
        return Some(format!(
            "{backlog} ready messages exceed amqp.max_backlog_messages ({})",
            config.max_backlog_messages
        ));
    }
    match resident_mb {
        Some(mb) if config.max_memory_mb > 0 && mb > config.max_memory_mb => Some(format!(
            "{mb} MiB resident memory exceeds amqp.max_memory_mb ({})",
            config.max_memory_mb
        )),
        _ => None,
    }
}

/// The process's resident memory in MiB (Linux: `/proc/self/statm`, 4 KiB pages).
fn resident_mb() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096 / (1024 * 1024))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_block_only_when_exceeded_and_configured() {
        let mut config = AmqpConfig::default();
        assert_eq!(limit_reached(&config, u64::MAX, Some(u64::MAX)), None);
        config.max_backlog_messages = 10;
        assert_eq!(limit_reached(&config, 10, None), None);
        assert_eq!(
            limit_reached(&config, 11, None).as_deref(),
            Some("11 ready messages exceed amqp.max_backlog_messages (10)")
        );
        config.max_memory_mb = 100;
        assert!(
            limit_reached(&config, 0, Some(101))
                .unwrap()
                .contains("amqp.max_memory_mb")
        );
    }

    #[test]
    fn resident_memory_is_readable_here() {
        assert!(resident_mb().is_some_and(|mb| mb > 0));
    }
}
