//! Replaying dead-lettered messages: everything in a route destination's dead-letter
//! stage (`bridge.ROUTE.INDEX.dead`) moves back to the destination's stage, in batches
//! of one transaction each (taken from one and appended to the other together, so a
//! message is never lost or doubled), to be delivered again with a fresh attempt count.

use super::route::{dead_letter_name, stage_name};
use ferry_stage::{NewMessage, StageError, Stages, now_ms};

/// Messages moved per transaction.
const REPLAY_BATCH: usize = 256;

/// Moves every message of destination `index`'s dead-letter stage of route `route` back
/// to its stage; returns how many moved.
///
/// # Errors
/// [`StageError::NotFound`] when the route's stages do not exist (the route never ran),
/// or the store's error.
pub async fn replay(stages: &Stages, route: &str, index: usize) -> Result<u64, StageError> {
    let dead = stages.open(&dead_letter_name(route, index)).await?;
    let live = stages.open(&stage_name(route, index)).await?;
    let mut moved = 0u64;
    loop {
        let now = now_ms();
        let n = stages
            .db()
            .run(|tx| {
                let (dead, live) = (&dead, &live);
                async move {
                    let taken = dead.pop_in(&tx, REPLAY_BATCH, now).await?;
                    let again: Vec<NewMessage> = taken
                        .into_iter()
                        .map(|d| NewMessage::new(d.body).priority(d.envelope.priority))
                        .collect();
                    live.append_in(&tx, &again, now).await?;
                    Ok::<_, StageError>(again.len())
                }
            })
            .await?;
        if n == 0 {
            return Ok(moved);
        }
        moved += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_stage::StageOptions;
    use ferry_store::Database;
    use ferry_store::StoreConfig;

    #[tokio::test]
    async fn dead_letters_move_back_in_order_with_their_priority() {
        let dir = tempfile::tempdir().unwrap();
        let store = StoreConfig {
            path: dir.path().join("data"),
            ..StoreConfig::default()
        };
        let db = Database::open(&store).await.unwrap();
        let stages = Stages::new(db.clone(), "ferry");
        let all_lanes = StageOptions {
            max_priority: u8::MAX,
            ..StageOptions::default()
        };
        let dead = stages.create("bridge.r.0.dead", &all_lanes).await.unwrap();
        let live = stages.create("bridge.r.0", &all_lanes).await.unwrap();
        let messages: Vec<NewMessage> = (0..600u32)
            .map(|i| NewMessage::new(i.to_be_bytes().to_vec()).priority((i % 2) as u8))
            .collect();
        dead.append(&messages).await.unwrap();

        assert_eq!(replay(&stages, "r", 0).await.unwrap(), 600);
        assert_eq!(dead.depth().await.unwrap().ready, 0);
        let back = live.pop(1000).await.unwrap();
        let odd: Vec<u32> = (0..600).filter(|i| i % 2 == 1).collect();
        let even: Vec<u32> = (0..600).filter(|i| i % 2 == 0).collect();
        let got: Vec<u32> = back
            .iter()
            .map(|d| u32::from_be_bytes(d.body[..4].try_into().unwrap()))
            .collect();
        assert_eq!(got, [odd, even].concat(), "priority first, FIFO within it");
        assert!(matches!(
            replay(&stages, "nope", 0).await,
            Err(StageError::NotFound(_))
        ));
        db.close().await;
    }
}
