//! The AMQP consumer of the crash run: lapin with manual acks and a prefetch, reporting
//! every delivery (its message id, attempt and `redelivered` flag). It acknowledges each
//! delivery only once [`IN_PROCESS`] later ones have come, as a consumer still processing
//! the last few does, so every kill finds deliveries unacknowledged, to come back
//! redelivered. It subscribes again on a new connection whenever Ferry is killed under it.

use crate::common::crash::ATTEMPT;
use crate::common::wait;
use crate::tally::{How, Seen};
use futures::StreamExt;
use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicQosOptions};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{Connection, ConnectionProperties};
use std::collections::VecDeque;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

/// Deliveries a consumer holds unacknowledged while it takes more (below the prefetch, so
/// the flow never waits for an ack).
pub const IN_PROCESS: usize = 5;
/// How long a consumer waits for the AMQP front to take it again after a kill.
const PATIENCE: Duration = Duration::from_secs(60);

/// A consumer of `queue` on a new connection to `uri`, or the error while the front is down.
async fn subscribe(
    uri: &str,
    queue: &str,
    prefetch: u16,
) -> lapin::Result<(Connection, lapin::Consumer)> {
    let conn = Connection::connect(uri, ConnectionProperties::default()).await?;
    let ch = conn.create_channel().await?;
    ch.basic_qos(prefetch, BasicQosOptions::default()).await?;
    let consumer = ch
        .basic_consume(
            queue.into(),
            "crash".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await?;
    Ok((conn, consumer))
}

/// What the consumer saw of `d`.
fn seen(d: &Delivery) -> Seen {
    let id = std::str::from_utf8(&d.data).unwrap().parse().unwrap();
    let attempt = d
        .properties
        .headers()
        .as_ref()
        .and_then(|h| match h.inner().get(ATTEMPT) {
            Some(AMQPValue::LongString(s)) => std::str::from_utf8(s.as_bytes()).ok(),
            _ => None,
        })
        .and_then(|a| a.parse().ok())
        .expect("every message carries its attempt");
    Seen {
        id,
        attempt,
        at: Instant::now(),
        how: How::Delivery {
            redelivered: d.redelivered,
        },
    }
}

/// Consumes `queue` at `uri` with `prefetch` unacknowledged deliveries until `stop`,
/// sending what it sees to `seen_tx`, and acknowledging each delivery when [`IN_PROCESS`]
/// later ones have come.
pub async fn consume(
    uri: String,
    queue: &'static str,
    prefetch: u16,
    stop: CancellationToken,
    seen_tx: UnboundedSender<Seen>,
) {
    while !stop.is_cancelled() {
        let (_conn, mut consumer) =
            wait::until_ok("the AMQP front taking a consumer again", PATIENCE, || {
                subscribe(&uri, queue, prefetch)
            })
            .await;
        let mut in_process = VecDeque::with_capacity(IN_PROCESS + 1);
        loop {
            let next = tokio::select! {
                () = stop.cancelled() => return,
                next = consumer.next() => next,
            };
            // An error or the end: the connection went with the daemon.
            let Some(Ok(delivery)) = next else { break };
            if seen_tx.send(seen(&delivery)).is_err() {
                return;
            }
            in_process.push_back(delivery);
            if in_process.len() > IN_PROCESS {
                let done = in_process.pop_front().unwrap();
                if done.ack(BasicAckOptions::default()).await.is_err() {
                    break;
                }
            }
        }
        // What was still held unacknowledged must come again; then subscribe again.
        for d in in_process.drain(..) {
            let held = Seen {
                how: How::Held,
                ..seen(&d)
            };
            _ = seen_tx.send(held);
        }
    }
}
