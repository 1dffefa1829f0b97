//! Single active consumer (`x-single-active-consumer`): one consumer of a queue receives
//! at a time, across every Ferry instance sharing the store.
//!
//! The turn is a claim in the store, `(P, "amqp", "sac", stage_id) = (holder,)`. A
//! consumer takes it when it is free or its holder is dead; otherwise it waits on a watch
//! of the claim, so it wakes when the active consumer gives up its turn. A holder that
//! dies without giving up is noticed when its lease would have expired: the waiter looks
//! again after one lease TTL.

use crate::state::broker::Broker;
use ferry_stage::{StageError, now_ms};
use foundationdb_tuple::{pack, unpack};
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// What one attempt found.
enum Attempt {
    /// The turn is ours.
    Taken,
    /// Another live consumer has it; wait on this.
    Wait(ferry_store::Watch),
}

/// Waits until `holder` has the turn of the claim at `key`; `false` if `stop` fired first
/// or the store failed.
pub(crate) async fn await_turn(
    broker: &Broker,
    key: &[u8],
    holder: u64,
    stop: &CancellationToken,
) -> bool {
    loop {
        let attempt = broker
            .db
            .run(|tx| async move {
                let current = match tx.get(key, false).await? {
                    Some(v) => Some(
                        unpack::<(u64,)>(&v)
                            .map(|(h,)| h)
                            .map_err(|_| StageError::Corrupt("active consumer claim".into()))?,
                    ),
                    None => None,
                };
                let free = match current {
                    None => true,
                    Some(h) if h == holder => true,
                    Some(h) => !broker.holders.is_alive_in(&tx, h, now_ms()).await?,
                };
                if free {
                    tx.set(key, pack(&(holder,)));
                    Ok::<_, StageError>(Attempt::Taken)
                } else {
                    Ok(Attempt::Wait(tx.watch(key)))
                }
            })
            .await;
        match attempt {
            Ok(Attempt::Taken) => return true,
            Ok(Attempt::Wait(watch)) => {
                tokio::select! {
                    () = stop.cancelled() => return false,
                    _ = watch => {}
                    () = tokio::time::sleep(broker.liveness.ttl()) => {}
                }
            }
            Err(e) => {
                warn!(error = %e, "cannot claim a single-active-consumer turn");
                return false;
            }
        }
    }
}

/// Gives up `holder`'s turn of the claim at `key`, if it has it, so the next consumer
/// wakes.
pub(crate) async fn give_up_turn(broker: &Broker, key: &[u8], holder: u64) {
    let result = broker
        .db
        .run(|tx| async move {
            if let Some(v) = tx.get(key, false).await?
                && unpack::<(u64,)>(&v).is_ok_and(|(h,)| h == holder)
            {
                tx.clear(key);
            }
            Ok::<_, StageError>(())
        })
        .await;
    if let Err(e) = result {
        warn!(error = %e, "cannot give up a single-active-consumer turn; it passes on when the lease expires");
    }
}
