//! The rates' sampler: every [`PERIOD`] (RabbitMQ's 5 s statistics interval) it reads every
//! queue's counters, each vhost's totals and the totals over every vhost, and records them
//! as the rates'
//! readings, so the first page that asks already gets rates over the last readings instead
//! of 0.0 (RabbitMQ's management plugin samples the same way). It costs one read of a
//! stage's counters per queue per period.

use super::Api;
use super::overview::{ALL_VHOSTS_KEY, vhost_key};
use super::queues::{Counts, queue_key};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Time between two samples.
pub const PERIOD: Duration = Duration::from_secs(5);

/// Samples every [`PERIOD`], starting at once, until `shutdown`.
pub async fn run(api: Api, shutdown: CancellationToken) {
    let mut ticks = tokio::time::interval(PERIOD);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = ticks.tick() => {}
        }
        sample(&api).await;
    }
}

/// One sample of every queue, of each vhost's totals and of the totals over every vhost. A
/// queue whose counters cannot be read is left out of this sample (and of the totals).
async fn sample(api: &Api) {
    let mut totals = Counts::default();
    for vhost in api.amqp.vhosts() {
        let mut vhost_totals = Counts::default();
        for queue in vhost.queues() {
            let Ok(counts) = Counts::of(&queue).await else {
                continue;
            };
            counts.record(api, &queue_key(&queue), Instant::now());
            vhost_totals.add(&counts);
        }
        vhost_totals.record(api, &vhost_key(&vhost.name), Instant::now());
        totals.add(&vhost_totals);
    }
    totals.record(api, ALL_VHOSTS_KEY, Instant::now());
}
