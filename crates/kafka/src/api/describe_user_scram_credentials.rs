//! DescribeUserScramCredentials (KIP-554): the mechanisms and iteration counts of users'
//! SCRAM credentials, read from the user store (never a salt or a key). Asked for no users
//! (null or empty), it describes every user that has a SCRAM credential, by name; asked
//! for some, it answers each once, in the order asked: one without a SCRAM credential, or
//! unknown, is `RESOURCE_NOT_FOUND`, one named twice `DUPLICATE_RESOURCE`, as Kafka's
//! broker answers. Needs Describe on the cluster, else `CLUSTER_AUTHORIZATION_FAILED`: for
//! each user named, or, asked for every user, for the request.
//!
//! Unlike Kafka, a refusal of named users is not also the request's error code: librdkafka
//! (2.12 to 2.16 at least) frees a request-level error message it does not own and aborts
//! the client. Asked for every user, the request's error code is the only place for it
//! (Kafka's too), and librdkafka aborts as it does against Kafka.

use super::{Session, grouped, str_bytes};
use crate::Context;
use crate::acls::Operation;
use ferry_auth::User;
use ferry_auth::scram::Mechanism;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse, ResponseKind,
};
use std::sync::Arc;
use tracing::warn;

/// Describes the users asked for (all when none is).
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: DescribeUserScramCredentialsRequest,
) -> ResponseKind {
    let asked: Vec<String> = request
        .users
        .unwrap_or_default()
        .into_iter()
        .map(|u| u.name.to_string())
        .collect();
    let denied = (!session.access(ctx).cluster(Operation::Describe)).then_some((
        ResponseError::ClusterAuthorizationFailed,
        "Authorization failed: describing SCRAM credentials needs Describe on the cluster",
    ));
    let response = if asked.is_empty() {
        match denied {
            Some((error, message)) => failed(error, message),
            None => match ctx.users.store().list().await {
                Ok(users) => DescribeUserScramCredentialsResponse::default().with_results(
                    users
                        .iter()
                        .filter(|u| !infos(u).is_empty())
                        .map(|u| described(&u.name, Some(u)))
                        .collect(),
                ),
                Err(e) => {
                    warn!(error = %e, "cannot read the users to describe their SCRAM credentials");
                    failed(ResponseError::UnknownServerError, &e.to_string())
                }
            },
        }
    } else {
        let mut results = Vec::new();
        for (name, times) in grouped(asked.iter().map(|name| (name.as_str(), ()))) {
            let result = if let Some((error, message)) = denied {
                refused(name, error, message.to_owned())
            } else if times.len() > 1 {
                refused(
                    name,
                    ResponseError::DuplicateResource,
                    format!(
                        "Cannot describe SCRAM credentials for the same user twice in a single request: {name}"
                    ),
                )
            } else {
                match ctx.users.store().get(name).await {
                    Ok(user) => described(name, user.as_ref()),
                    Err(e) => {
                        warn!(user = %name, error = %e, "cannot read a user to describe its SCRAM credentials");
                        refused(name, ResponseError::UnknownServerError, e.to_string())
                    }
                }
            };
            results.push(result);
        }
        DescribeUserScramCredentialsResponse::default().with_results(results)
    };
    ResponseKind::DescribeUserScramCredentials(response)
}

/// The mechanism and iterations of each SCRAM credential `user` has.
fn infos(user: &User) -> Vec<CredentialInfo> {
    Mechanism::ALL
        .into_iter()
        .filter_map(|m| user.scram(m))
        .map(|c| {
            CredentialInfo::default()
                .with_mechanism(c.mechanism().kafka_number())
                // A configured count past i32::MAX (absurd, but a u32) shows as i32::MAX.
                .with_iterations(i32::try_from(c.iterations()).unwrap_or(i32::MAX))
        })
        .collect()
}

/// The answer for user `name`, stored as `user` (`None`: unknown).
fn described(name: &str, user: Option<&User>) -> DescribeUserScramCredentialsResult {
    let infos = user.map(infos).unwrap_or_default();
    if infos.is_empty() {
        return refused(
            name,
            ResponseError::ResourceNotFound,
            format!("Attempt to describe a user credential that does not exist: {name}"),
        );
    }
    DescribeUserScramCredentialsResult::default()
        .with_user(str_bytes(name))
        .with_credential_infos(infos)
}

/// A refusal for user `name`.
fn refused(
    name: &str,
    error: ResponseError,
    message: String,
) -> DescribeUserScramCredentialsResult {
    DescribeUserScramCredentialsResult::default()
        .with_user(str_bytes(name))
        .with_error_code(error.code())
        .with_error_message(Some(str_bytes(message)))
}

/// A response refusing the whole request (asking for every user).
fn failed(error: ResponseError, message: &str) -> DescribeUserScramCredentialsResponse {
    DescribeUserScramCredentialsResponse::default()
        .with_error_code(error.code())
        .with_error_message(Some(str_bytes(message)))
}
