//! `/api/users`: list, show, create or change (PUT), delete and bulk-delete users, and
//! the users without permissions — administrators only, as in RabbitMQ (which answers
//! anyone else 401 "Not administrator user").
//!
//! A user is shown as RabbitMQ shows it to administrators: name, RabbitMQ-format
//! `password_hash` ("" without a password), `hashing_algorithm`, `tags`, `limits` (always
//! empty); SCRAM credentials are never shown.
//!
//! PUT takes `tags` (required: a list or a comma-separated string) and at most one of
//! `password` and `password_hash`:
//! - `password`: the password hash and both SCRAM credentials (Kafka's SCRAM-SHA-256 and
//!   -512) are derived from it, so one password works on every front;
//! - `password_hash` (with `hashing_algorithm` `rabbit_password_hashing_sha256`, or none):
//!   the hash only — SCRAM cannot be derived from a hash, so that user logs in to Kafka
//!   with SASL PLAIN; `""` removes the password;
//! - neither: a new user has no password; an existing user KEEPS its credentials (only its
//!   tags change). RabbitMQ 3.10 clears the password here; Ferry keeps it, as a user
//!   changing tags expects (send `"password_hash": ""` to clear it).
//!
//! `loopback_only` and `require_tls` of an existing user stay as they are.

use super::Api;
use super::administrator::{administrator, store_failed};
use super::body::Body;
use super::error::{ApiError, ApiResult};
use super::login::Principal;
use super::reply::{Json, put_status};
use crate::definitions::import::HASHING_ALGORITHM;
use crate::definitions::model::Tags;
use crate::definitions::user_definition;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use bytes::Bytes;
use ferry_auth::User;
use ferry_auth::password::PasswordHash;
use ferry_auth::scram::{DEFAULT_ITERATIONS, Mechanism, ScramCredential};
use std::collections::HashSet;

/// The fields a user PUT takes (`name` and `vhost` are accepted as `rabbitmqadmin` sends
/// them, and ignored; `limits` as RabbitMQ's own listing has it, and ignored).
const PUT_FIELDS: &[&str] = &[
    "password",
    "password_hash",
    "hashing_algorithm",
    "tags",
    "name",
    "vhost",
    "limits",
];

/// The routes of this family.
pub(crate) fn routes() -> Router<Api> {
    Router::new()
        .route("/api/users", get(list))
        .route("/api/users/without-permissions", get(without_permissions))
        .route("/api/users/bulk-delete", post(bulk_delete))
        .route("/api/users/{name}", get(show).put(put).delete(delete))
}

/// `GET /api/users`.
async fn list(
    State(api): State<Api>,
    principal: Principal,
) -> ApiResult<Json<Vec<crate::definitions::model::UserDefinition>>> {
    administrator(&principal)?;
    let users = api.users.store().list().await.map_err(store_failed)?;
    Ok(Json(users.iter().map(user_definition).collect()))
}

/// `GET /api/users/without-permissions`.
async fn without_permissions(
    State(api): State<Api>,
    principal: Principal,
) -> ApiResult<Json<Vec<crate::definitions::model::UserDefinition>>> {
    administrator(&principal)?;
    let store = api.users.store();
    let granted: HashSet<String> = store
        .list_permissions(ferry_auth::store::Scope::All)
        .await
        .map_err(store_failed)?
        .into_iter()
        .map(|p| p.user)
        .collect();
    let users = store.list().await.map_err(store_failed)?;
    Ok(Json(
        users
            .iter()
            .filter(|u| !granted.contains(&u.name))
            .map(user_definition)
            .collect(),
    ))
}

/// `GET /api/users/{name}`.
async fn show(
    State(api): State<Api>,
    principal: Principal,
    Path(name): Path<String>,
) -> ApiResult<Json<crate::definitions::model::UserDefinition>> {
    administrator(&principal)?;
    let user = api.users.store().get(&name).await.map_err(store_failed)?;
    user.map(|u| Json(user_definition(&u)))
        .ok_or_else(ApiError::not_found)
}

/// How a PUT sets the user's credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Credentials {
    /// From a password: its hash and both SCRAM credentials.
    Password(String),
    /// A given hash (`None`: no password).
    Hash(Option<PasswordHash>),
    /// Unchanged (a new user has none).
    Keep,
}

impl Credentials {
    /// The credentials `body` asks for.
    fn of(body: &Body) -> ApiResult<Self> {
        let password = body.string("password")?;
        let hash = body.string("password_hash")?;
        if let Some(algorithm) = body.string("hashing_algorithm")?
            && algorithm != HASHING_ALGORITHM
        {
            return Err(ApiError::bad_request(format!(
                "field 'hashing_algorithm': '{algorithm}' is not supported; Ferry reads {HASHING_ALGORITHM} hashes"
            )));
        }
        match (password, hash) {
            (Some(_), Some(_)) => Err(ApiError::bad_request(
                "give either field 'password' or field 'password_hash', not both",
            )),
            (Some(password), None) => Ok(Self::Password(password)),
            (None, Some(hash)) if hash.is_empty() => Ok(Self::Hash(None)),
            (None, Some(hash)) => PasswordHash::parse(&hash)
                .map(|h| Self::Hash(Some(h)))
                .map_err(|reason| {
                    ApiError::bad_request(format!("field 'password_hash': {reason}"))
                }),
            (None, None) => Ok(Self::Keep),
        }
    }

    /// Sets them on `user`.
    fn apply(&self, user: &mut User) {
        match self {
            Self::Password(password) => {
                user.password_hash = Some(PasswordHash::new(password));
                user.scram_sha_256 = Some(ScramCredential::new(
                    Mechanism::Sha256,
                    password,
                    DEFAULT_ITERATIONS,
                ));
                user.scram_sha_512 = Some(ScramCredential::new(
                    Mechanism::Sha512,
                    password,
                    DEFAULT_ITERATIONS,
                ));
            }
            Self::Hash(hash) => {
                user.password_hash = hash.clone();
                user.scram_sha_256 = None;
                user.scram_sha_512 = None;
            }
            Self::Keep => {}
        }
    }
}

/// The tags of `body`, which must have them (RabbitMQ: `tags_not_present`).
fn tags_of(body: &Body) -> ApiResult<Vec<String>> {
    if !body.has("tags") {
        return Err(ApiError::bad_request("field 'tags' is missing"));
    }
    tags_in(body.value("tags"))
}

/// Tags given as RabbitMQ takes them: a list of strings or a comma-separated string
/// (absent or null: none).
///
/// # Errors
/// 400 naming field `tags` for anything else.
pub(crate) fn tags_in(value: Option<&serde_json::Value>) -> ApiResult<Vec<String>> {
    let value = value.cloned().unwrap_or_default();
    if value.is_null() {
        return Ok(Vec::new());
    }
    let tags: Tags = serde_json::from_value(value).map_err(|_| {
        ApiError::bad_request("field 'tags' must be a list of strings or a comma-separated string")
    })?;
    Ok(tags.0)
}

/// `PUT /api/users/{name}`: 201 for a new user, 204 for a changed one.
async fn put(
    State(api): State<Api>,
    principal: Principal,
    Path(name): Path<String>,
    body: Bytes,
) -> ApiResult<StatusCode> {
    administrator(&principal)?;
    let body = Body::parse(&body, PUT_FIELDS)?;
    let tags = tags_of(&body)?;
    let credentials = Credentials::of(&body)?;
    if name.is_empty() {
        return Err(ApiError::bad_request("a user needs a name"));
    }
    // The PBKDF2 work of a password is done once, outside the transaction.
    let mut template = User::new(&name);
    credentials.apply(&mut template);
    let created = api
        .users
        .store()
        .upsert(&name, |stored| {
            let mut user = match (&credentials, stored) {
                (Credentials::Keep, Some(stored)) => stored,
                (_, Some(stored)) => User {
                    loopback_only: stored.loopback_only,
                    require_tls: stored.require_tls,
                    ..template.clone()
                },
                (_, None) => template.clone(),
            };
            user.set_tags(tags.iter().cloned());
            user
        })
        .await
        .map_err(store_failed)?;
    Ok(put_status(!created))
}

/// `DELETE /api/users/{name}`: the user with its permissions and topic permissions.
async fn delete(
    State(api): State<Api>,
    principal: Principal,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    administrator(&principal)?;
    match api
        .users
        .store()
        .delete(&name)
        .await
        .map_err(store_failed)?
    {
        true => Ok(StatusCode::NO_CONTENT),
        false => Err(ApiError::not_found()),
    }
}

/// `POST /api/users/bulk-delete` with `{"users": [name, ...]}`: each is deleted (a
/// missing one is skipped), as in RabbitMQ.
async fn bulk_delete(
    State(api): State<Api>,
    principal: Principal,
    body: Bytes,
) -> ApiResult<StatusCode> {
    administrator(&principal)?;
    let body = Body::parse(&body, &["users"])?;
    let names: Vec<String> =
        serde_json::from_value(body.value("users").cloned().unwrap_or_default())
            .map_err(|_| ApiError::bad_request("field 'users' must be a list of user names"))?;
    for name in names {
        api.users
            .store()
            .delete(&name)
            .await
            .map_err(store_failed)?;
    }
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(json: &str) -> Body {
        Body::parse(json.as_bytes(), PUT_FIELDS).unwrap()
    }

    #[test]
    fn credentials_are_read_as_rabbitmq_takes_them() {
        assert_eq!(
            Credentials::of(&body(r#"{"password":"pw"}"#)).unwrap(),
            Credentials::Password("pw".into())
        );
        assert_eq!(
            Credentials::of(&body(r#"{"password_hash":""}"#)).unwrap(),
            Credentials::Hash(None)
        );
        assert_eq!(Credentials::of(&body("{}")).unwrap(), Credentials::Keep);
        let refused = |json: &str| Credentials::of(&body(json)).unwrap_err().reason;
        assert_eq!(
            refused(r#"{"password":"a","password_hash":"b"}"#),
            "give either field 'password' or field 'password_hash', not both"
        );
        assert!(refused(r#"{"password_hash":"abc"}"#).starts_with("field 'password_hash': "));
        assert!(
            refused(r#"{"password_hash":"","hashing_algorithm":"rabbit_password_hashing_md5"}"#)
                .starts_with(
                    "field 'hashing_algorithm': 'rabbit_password_hashing_md5' is not supported"
                )
        );
    }

    #[test]
    fn a_password_gives_every_credential_and_a_hash_removes_scram() {
        let mut user = User::new("u");
        Credentials::Password("pw".into()).apply(&mut user);
        assert!(user.verify_password("pw"));
        assert!(user.scram(Mechanism::Sha256).is_some() && user.scram(Mechanism::Sha512).is_some());
        Credentials::Hash(Some(PasswordHash::new("other"))).apply(&mut user);
        assert!(!user.verify_password("pw") && user.verify_password("other"));
        assert!(user.scram(Mechanism::Sha256).is_none());
    }

    #[test]
    fn tags_are_required_and_taken_as_a_list_or_a_string() {
        assert_eq!(
            tags_of(&body(r#"{"tags":"administrator,monitoring"}"#)).unwrap(),
            ["administrator", "monitoring"]
        );
        assert_eq!(
            tags_of(&body(r#"{"tags":["management"]}"#)).unwrap(),
            ["management"]
        );
        assert_eq!(
            tags_of(&body("{}")).unwrap_err().reason,
            "field 'tags' is missing"
        );
    }
}
