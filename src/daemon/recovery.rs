//! Recovery at start: the lease holders this instance's earlier incarnations left behind
//! when their process died (a kill -9, a crash) are released at once, their leased
//! deliveries going back to their queues marked redelivered, instead of when the lease
//! reaper finds their deadlines passed one `stage.lease_ttl_ms` later. The release is the
//! reaper's own ([`Holders::release`] through [`Holders::release_outlived`]). The Kafka
//! front frees its leases the same way as it starts ([`ferry_kafka::recovery`]).

use ferry_stage::Incarnation;
use ferry_stage::{Holders, Stages};
use tracing::{info, warn};

/// Releases every lease holder `incarnation` outlived. A store error is logged and the
/// start goes on: the lease reaper then returns those leases when their deadlines pass.
pub async fn release_holders(stages: &Stages, incarnation: &Incarnation) {
    match Holders::new(stages).release_outlived(incarnation).await {
        Ok(returned) => info!(
            returned,
            incarnation = incarnation.owner().number,
            "returned the leases of this instance's earlier incarnations to their stages"
        ),
        Err(e) => warn!(
            error = %e,
            "cannot return the leases of this instance's earlier incarnations; the lease \
             reaper returns them once their deadlines pass"
        ),
    }
}
