//! ListPartitionReassignments (KIP-455): Ferry never moves replicas — the store keeps the
//! one copy of each partition, and AlterPartitionReassignments starts no reassignment — so
//! none is ever in progress and the answer lists none, whatever partitions are named (as
//! Kafka, which lists only partitions being reassigned). Needs Describe on the cluster,
//! else `CLUSTER_AUTHORIZATION_FAILED`.

use super::{Session, str_bytes};
use crate::Context;
use crate::acls::Operation;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, ResponseKind,
};
use std::sync::Arc;

/// Lists the reassignments in progress: none.
pub(super) fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    _request: ListPartitionReassignmentsRequest,
) -> ResponseKind {
    let response = ListPartitionReassignmentsResponse::default();
    ResponseKind::ListPartitionReassignments(if session.access(ctx).cluster(Operation::Describe) {
        response
    } else {
        response
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
            .with_error_message(Some(str_bytes("Authorization failed.")))
    })
}
