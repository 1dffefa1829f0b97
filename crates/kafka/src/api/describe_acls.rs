//! DescribeAcls: the stored ACLs the filter matches (read from the store, so an ACL
//! another instance just created is there), grouped by resource pattern. Needs Describe
//! on the cluster (else `CLUSTER_AUTHORIZATION_FAILED`); a filter with an unknown code is
//! `INVALID_REQUEST`.

use super::{Session, str_bytes};
use crate::Context;
use crate::acls::Operation;
use crate::acls::model::{Acl, AclFilter, FilterCodes, ResourcePattern};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{DescribeAclsRequest, DescribeAclsResponse, ResponseKind};
use std::collections::BTreeMap;
use std::sync::Arc;
use tracing::warn;

/// Describes the matching ACLs.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: DescribeAclsRequest,
) -> ResponseKind {
    let failed = |e: ResponseError, message: String| {
        ResponseKind::DescribeAcls(
            DescribeAclsResponse::default()
                .with_error_code(e.code())
                .with_error_message(Some(str_bytes(message))),
        )
    };
    if !session.access(ctx).cluster(Operation::Describe) {
        return failed(
            ResponseError::ClusterAuthorizationFailed,
            "Authorization failed: describing ACLs needs Describe on the cluster".to_owned(),
        );
    }
    let filter = match AclFilter::from_codes(&FilterCodes {
        resource_type: request.resource_type_filter,
        name: request.resource_name_filter.as_ref().map(|s| s.as_str()),
        pattern_type: request.pattern_type_filter,
        principal: request.principal_filter.as_ref().map(|s| s.as_str()),
        host: request.host_filter.as_ref().map(|s| s.as_str()),
        operation: request.operation,
        permission: request.permission_type,
    }) {
        Ok(f) => f,
        Err(e) => return failed(ResponseError::InvalidRequest, e.0),
    };
    let set = match ctx.acls.list().await {
        Ok(set) => set,
        Err(e) => {
            warn!(error = %e, "cannot read the Kafka ACLs");
            return failed(ResponseError::UnknownServerError, e.to_string());
        }
    };
    let matching = set.acls.into_iter().filter(|a| filter.matches(a));
    ResponseKind::DescribeAcls(
        DescribeAclsResponse::default().with_resources(by_resource(matching)),
    )
}

/// `acls` grouped by resource pattern, as DescribeAcls answers them.
fn by_resource(acls: impl Iterator<Item = Acl>) -> Vec<DescribeAclsResource> {
    let mut grouped: BTreeMap<ResourcePattern, Vec<AclDescription>> = BTreeMap::new();
    for acl in acls {
        grouped.entry(acl.resource).or_default().push(
            AclDescription::default()
                .with_principal(str_bytes(acl.principal))
                .with_host(str_bytes(acl.host))
                .with_operation(acl.operation.code())
                .with_permission_type(acl.permission.code()),
        );
    }
    grouped
        .into_iter()
        .map(|(resource, acls)| {
            DescribeAclsResource::default()
                .with_resource_type(resource.resource_type.code())
                .with_resource_name(str_bytes(resource.name))
                .with_pattern_type(resource.pattern_type.code())
                .with_acls(acls)
        })
        .collect()
}
