//! CreateAcls: stores the ACLs asked for, all valid ones in one store transaction, and
//! reloads this instance's ACL cache before answering. Needs Alter on the cluster (else
//! every creation is `CLUSTER_AUTHORIZATION_FAILED`); a creation that is not a concrete
//! ACL Ferry supports is `INVALID_REQUEST` with the reason, as Kafka answers.

use super::{Session, str_bytes};
use crate::Context;
use crate::acls::Operation;
use crate::acls::model::{Acl, AclCodes};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::{CreateAclsRequest, CreateAclsResponse, ResponseKind};
use std::sync::Arc;
use tracing::{info, warn};

/// Creates every valid ACL asked for.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: CreateAclsRequest,
) -> ResponseKind {
    let access = session.access(ctx);
    let failed = |e: ResponseError, message: String| {
        AclCreationResult::default()
            .with_error_code(e.code())
            .with_error_message(Some(str_bytes(message)))
    };
    if !access.cluster(Operation::Alter) {
        let results = request
            .creations
            .iter()
            .map(|_| {
                failed(
                    ResponseError::ClusterAuthorizationFailed,
                    "Authorization failed: creating ACLs needs Alter on the cluster".to_owned(),
                )
            })
            .collect();
        return respond(results);
    }
    let parsed: Vec<Result<Acl, String>> = request
        .creations
        .iter()
        .map(|c| {
            Acl::from_codes(&AclCodes {
                resource_type: c.resource_type,
                name: c.resource_name.as_str(),
                pattern_type: c.resource_pattern_type,
                principal: c.principal.as_str(),
                host: c.host.as_str(),
                operation: c.operation,
                permission: c.permission_type,
            })
            .map_err(|e| e.0)
        })
        .collect();
    let valid: Vec<Acl> = parsed
        .iter()
        .filter_map(|p| p.as_ref().ok())
        .cloned()
        .collect();
    let stored = ctx.acls.create(&valid).await;
    match &stored {
        Ok(()) => {
            info!(principal = %access.caller().principal, created = valid.len(), "Kafka ACLs created")
        }
        Err(e) => warn!(error = %e, "cannot store Kafka ACLs"),
    }
    let results = parsed
        .into_iter()
        .map(|p| match (p, &stored) {
            (Err(message), _) => failed(ResponseError::InvalidRequest, message),
            (Ok(_), Err(e)) => failed(ResponseError::UnknownServerError, e.to_string()),
            (Ok(_), Ok(())) => AclCreationResult::default(),
        })
        .collect();
    respond(results)
}

/// The response with `results`, one per creation in request order.
fn respond(results: Vec<AclCreationResult>) -> ResponseKind {
    ResponseKind::CreateAcls(CreateAclsResponse::default().with_results(results))
}
