//! DescribeCluster (KIP-700): the live brokers (as Metadata lists them), the controller
//! (this instance, as Metadata names it) and the cluster id, and, when asked, the
//! operations the principal may do to the cluster (0 without Describe on it, as Kafka).
//! Only broker endpoints are described (v1's endpoint type 1); asking for controllers is
//! `UNSUPPORTED_ENDPOINT_TYPE`, as a Kafka broker answers.

use super::metadata::brokers;
use super::{Session, str_bytes};
use crate::Context;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{
    BrokerId, DescribeClusterRequest, DescribeClusterResponse, ResponseKind,
};
use std::sync::Arc;

/// The endpoint type of brokers.
const BROKERS: i8 = 1;

/// Describes the cluster.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    version: i16,
    request: DescribeClusterRequest,
) -> ResponseKind {
    let response = DescribeClusterResponse::default().with_endpoint_type(BROKERS);
    if version >= 1 && request.endpoint_type != BROKERS {
        return ResponseKind::DescribeCluster(
            response
                .with_error_code(ResponseError::UnsupportedEndpointType.code())
                .with_error_message(Some(str_bytes(format!(
                    "endpoint type {} is not supported: Ferry describes brokers (1) only",
                    request.endpoint_type
                )))),
        );
    }
    let mut response = response
        .with_cluster_id(str_bytes(ctx.cluster_id.clone()))
        .with_controller_id(BrokerId(ctx.brokers.me().node))
        .with_brokers(
            brokers(ctx, session)
                .await
                .into_iter()
                .map(|b| {
                    DescribeClusterBroker::default()
                        .with_broker_id(BrokerId(b.node))
                        .with_host(str_bytes(b.host))
                        .with_port(b.port)
                })
                .collect(),
        );
    if request.include_cluster_authorized_operations {
        response.cluster_authorized_operations = session.access(ctx).cluster_operations();
    }
    ResponseKind::DescribeCluster(response)
}
