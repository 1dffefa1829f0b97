//! AlterUserScramCredentials (KIP-554): sets and removes users' SCRAM credentials in the
//! user store, where the next login on any instance reads them. An upsertion carries the
//! SaltedPassword the client computed (never the password); Ferry keeps StoredKey and
//! ServerKey from it ([`ScramCredential::from_salted_password`]). A user that does not
//! exist is created with that credential alone — no password hash, no tags, no
//! permissions — as Kafka creates it; a deletion removes one mechanism's credential and
//! leaves the user (with its other credentials and permissions) in place.
//!
//! Validation is Kafka's (its ZooKeeper-mode broker's, one result per user): an empty user
//! name or a salt or salted password that cannot make a credential is
//! `UNACCEPTABLE_CREDENTIAL`, so are iterations outside 4096..=16384; a mechanism other
//! than 1 (SCRAM-SHA-256) or 2 (SCRAM-SHA-512) is `UNSUPPORTED_SASL_MECHANISM`; a user and
//! mechanism altered twice in one request is `DUPLICATE_RESOURCE`; deleting a credential
//! the user does not have is `RESOURCE_NOT_FOUND`. Any refusal leaves all of that user's
//! alterations undone; the other users' are made, all in one store transaction. Needs
//! Alter on the cluster, else `CLUSTER_AUTHORIZATION_FAILED` for every user. Messages and
//! logs name users and mechanisms, never a salt or a key.

use super::{Session, grouped, str_bytes};
use crate::Context;
use crate::acls::Operation;
use ferry_auth::User;
use ferry_auth::scram::{MAX_ITERATIONS, MIN_ITERATIONS, Mechanism, ScramCredential};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, ResponseKind,
};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use tracing::{info, warn};

/// An error code with its message.
type Refused = (ResponseError, String);

/// One change to one user's SCRAM credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Alteration {
    /// Set the credential of its mechanism.
    Upsert(ScramCredential),
    /// Remove the credential of this mechanism.
    Delete(Mechanism),
}

impl Alteration {
    fn mechanism(&self) -> Mechanism {
        match self {
            Self::Upsert(credential) => credential.mechanism(),
            Self::Delete(mechanism) => *mechanism,
        }
    }
}

/// Makes every user's alterations that pass validation.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: AlterUserScramCredentialsRequest,
) -> ResponseKind {
    let plan = plan(&request);
    let access = session.access(ctx);
    if !access.cluster(Operation::Alter) {
        let message = "Authorization failed: altering SCRAM credentials needs Alter on the cluster";
        return respond(plan.iter().map(|(name, _)| {
            (
                name.as_str(),
                Err((
                    ResponseError::ClusterAuthorizationFailed,
                    message.to_owned(),
                )),
            )
        }));
    }
    let valid: HashMap<&str, &[Alteration]> = plan
        .iter()
        .filter_map(|(name, p)| p.as_ref().ok().map(|a| (name.as_str(), a.as_slice())))
        .collect();
    let names: Vec<&str> = plan
        .iter()
        .filter(|(_, p)| p.is_ok())
        .map(|(name, _)| name.as_str())
        .collect();
    let stored = ctx
        .users
        .store()
        .upsert_each(&names, |name, user| altered(name, user, valid[name]))
        .await;
    let mut outcomes = match stored {
        Ok(outcomes) => outcomes,
        Err(e) => {
            warn!(error = %e, "cannot alter SCRAM credentials in the user store");
            let failed = (ResponseError::UnknownServerError, e.to_string());
            names.iter().map(|_| Err(failed.clone())).collect()
        }
    }
    .into_iter();
    respond(plan.iter().map(|(name, p)| {
        let outcome = match p {
            Err(refused) => Err(refused.clone()),
            Ok(_) => outcomes
                .next()
                .expect("the store answers each user it was given"),
        };
        if let (Ok(()), Ok(alterations)) = (&outcome, p) {
            let listed = |upsert: bool| {
                alterations
                    .iter()
                    .filter(|a| matches!(a, Alteration::Upsert(_)) == upsert)
                    .map(|a| a.mechanism().name())
                    .collect::<Vec<_>>()
                    .join(",")
            };
            info!(
                principal = %access.caller().principal,
                user = %name,
                set = %listed(true),
                removed = %listed(false),
                "SCRAM credentials altered"
            );
        }
        (name.as_str(), outcome)
    }))
}

/// Each user `request` names, in the order first named, with its alterations, or the
/// refusal of them all: its first invalid alteration's, else a mechanism named twice.
fn plan(
    request: &AlterUserScramCredentialsRequest,
) -> Vec<(String, Result<Vec<Alteration>, Refused>)> {
    let deletions = request
        .deletions
        .iter()
        .map(|d| (d.name.as_str(), deletion(d)));
    let upsertions = request
        .upsertions
        .iter()
        .map(|u| (u.name.as_str(), upsertion(u)));
    grouped(deletions.chain(upsertions))
        .into_iter()
        .map(|(name, alterations)| {
            let outcome = alterations
                .into_iter()
                .collect::<Result<Vec<Alteration>, Refused>>()
                .and_then(|alterations| {
                    let mut seen = HashSet::new();
                    if !alterations.iter().all(|a| seen.insert(a.mechanism())) {
                        Err((
                            ResponseError::DuplicateResource,
                            "A user credential cannot be altered twice in the same request"
                                .to_owned(),
                        ))
                    } else {
                        Ok(alterations)
                    }
                });
            (name.to_owned(), outcome)
        })
        .collect()
}

/// The mechanism of an alteration of user `name`, if the name and mechanism are valid.
fn mechanism_of(name: &str, mechanism: i8) -> Result<Mechanism, Refused> {
    if name.is_empty() {
        return Err((
            ResponseError::UnacceptableCredential,
            "Username must not be empty".to_owned(),
        ));
    }
    Mechanism::from_kafka_number(mechanism).ok_or_else(|| {
        (
            ResponseError::UnsupportedSaslMechanism,
            format!("Unknown SCRAM mechanism {mechanism} (1 is SCRAM-SHA-256, 2 is SCRAM-SHA-512)"),
        )
    })
}

/// A deletion, validated.
fn deletion(d: &ScramCredentialDeletion) -> Result<Alteration, Refused> {
    mechanism_of(d.name.as_str(), d.mechanism).map(Alteration::Delete)
}

/// An upsertion, validated, with the credential it sets.
fn upsertion(u: &ScramCredentialUpsertion) -> Result<Alteration, Refused> {
    let mechanism = mechanism_of(u.name.as_str(), u.mechanism)?;
    let unacceptable = |message: String| (ResponseError::UnacceptableCredential, message);
    let iterations = u32::try_from(u.iterations).unwrap_or(0);
    if iterations < MIN_ITERATIONS {
        return Err(unacceptable(format!(
            "Too few iterations: {} (the minimum is {MIN_ITERATIONS})",
            u.iterations
        )));
    }
    if iterations > MAX_ITERATIONS {
        return Err(unacceptable(format!(
            "Too many iterations: {} (the maximum is {MAX_ITERATIONS})",
            u.iterations
        )));
    }
    ScramCredential::from_salted_password(
        mechanism,
        u.salt.to_vec(),
        &u.salted_password,
        iterations,
    )
    .map(Alteration::Upsert)
    .map_err(unacceptable)
}

/// User `name`, stored as `stored` (`None`: a new user with no credentials, tags or
/// permissions), with `alterations` made.
fn altered(
    name: &str,
    stored: Option<User>,
    alterations: &[Alteration],
) -> Result<(User, ()), Refused> {
    let mut user = stored.unwrap_or_else(|| User::new(name));
    for alteration in alterations {
        let replaced = match alteration {
            Alteration::Upsert(credential) => {
                user.set_scram(credential.mechanism(), Some(credential.clone()));
                continue;
            }
            Alteration::Delete(mechanism) => user.set_scram(*mechanism, None),
        };
        if replaced.is_none() {
            return Err((
                ResponseError::ResourceNotFound,
                "Attempt to delete a user credential that does not exist".to_owned(),
            ));
        }
    }
    Ok((user, ()))
}

/// The response with one result per user.
fn respond<'a>(results: impl Iterator<Item = (&'a str, Result<(), Refused>)>) -> ResponseKind {
    ResponseKind::AlterUserScramCredentials(
        AlterUserScramCredentialsResponse::default().with_results(
            results
                .map(|(name, outcome)| {
                    let result =
                        AlterUserScramCredentialsResult::default().with_user(str_bytes(name));
                    match outcome {
                        Ok(()) => result,
                        Err((error, message)) => result
                            .with_error_code(error.code())
                            .with_error_message(Some(str_bytes(message))),
                    }
                })
                .collect(),
        ),
    )
}
