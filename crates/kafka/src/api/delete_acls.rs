//! DeleteAcls: deletes the ACLs each filter matches, every filter in one store
//! transaction, and reloads this instance's ACL cache before answering; each filter's
//! answer lists the ACLs it deleted. Needs Alter on the cluster (else every filter is
//! `CLUSTER_AUTHORIZATION_FAILED`); a filter with an unknown code is `INVALID_REQUEST`.

use super::{Session, str_bytes};
use crate::Context;
use crate::acls::Operation;
use crate::acls::model::{AclFilter, FilterCodes};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::{DeleteAclsRequest, DeleteAclsResponse, ResponseKind};
use std::sync::Arc;
use tracing::{info, warn};

/// Deletes what the valid filters match.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: DeleteAclsRequest,
) -> ResponseKind {
    let access = session.access(ctx);
    let failed = |e: ResponseError, message: String| {
        DeleteAclsFilterResult::default()
            .with_error_code(e.code())
            .with_error_message(Some(str_bytes(message)))
    };
    if !access.cluster(Operation::Alter) {
        let results = request
            .filters
            .iter()
            .map(|_| {
                failed(
                    ResponseError::ClusterAuthorizationFailed,
                    "Authorization failed: deleting ACLs needs Alter on the cluster".to_owned(),
                )
            })
            .collect();
        return respond(results);
    }
    let parsed: Vec<Result<AclFilter, String>> = request
        .filters
        .iter()
        .map(|f| {
            AclFilter::from_codes(&FilterCodes {
                resource_type: f.resource_type_filter,
                name: f.resource_name_filter.as_ref().map(|s| s.as_str()),
                pattern_type: f.pattern_type_filter,
                principal: f.principal_filter.as_ref().map(|s| s.as_str()),
                host: f.host_filter.as_ref().map(|s| s.as_str()),
                operation: f.operation,
                permission: f.permission_type,
            })
            .map_err(|e| e.0)
        })
        .collect();
    let valid: Vec<AclFilter> = parsed
        .iter()
        .filter_map(|p| p.as_ref().ok())
        .cloned()
        .collect();
    let deleted = match ctx.acls.delete(&valid).await {
        Ok(deleted) => {
            let count: usize = deleted.iter().map(Vec::len).sum();
            info!(principal = %access.caller().principal, deleted = count, "Kafka ACLs deleted");
            Ok(deleted)
        }
        Err(e) => {
            warn!(error = %e, "cannot delete Kafka ACLs");
            Err(e.to_string())
        }
    };
    let mut per_valid = deleted.as_ref().ok().map(|d| d.iter());
    let results = parsed
        .into_iter()
        .map(|p| match (p, &deleted) {
            (Err(message), _) => failed(ResponseError::InvalidRequest, message),
            (Ok(_), Err(message)) => failed(ResponseError::UnknownServerError, message.clone()),
            (Ok(_), Ok(_)) => {
                let acls = per_valid
                    .as_mut()
                    .and_then(Iterator::next)
                    .cloned()
                    .unwrap_or_default();
                DeleteAclsFilterResult::default().with_matching_acls(
                    acls.into_iter()
                        .map(|a| {
                            DeleteAclsMatchingAcl::default()
                                .with_resource_type(a.resource.resource_type.code())
                                .with_resource_name(str_bytes(a.resource.name))
                                .with_pattern_type(a.resource.pattern_type.code())
                                .with_principal(str_bytes(a.principal))
                                .with_host(str_bytes(a.host))
                                .with_operation(a.operation.code())
                                .with_permission_type(a.permission.code())
                        })
                        .collect(),
                )
            }
        })
        .collect();
    respond(results)
}

/// The response with `results`, one per filter in request order.
fn respond(results: Vec<DeleteAclsFilterResult>) -> ResponseKind {
    ResponseKind::DeleteAcls(DeleteAclsResponse::default().with_filter_results(results))
}
