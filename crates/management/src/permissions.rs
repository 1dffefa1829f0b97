//! `/api/permissions` and `/api/topic-permissions`: list, show, set (PUT) and clear
//! (DELETE) users' permissions and topic permissions, also per user
//! (`/api/users/{name}/permissions`, `.../topic-permissions`) and per virtual host
//! (`/api/vhosts/{vhost}/permissions`, `.../topic-permissions`) — administrators only, as
//! in RabbitMQ.
//!
//! A PUT names the virtual host (one of `amqp.vhosts`) and an existing user, else 400; a
//! pattern that does not compile is a 400 naming its field; nothing changes then. The
//! patterns are RabbitMQ's, matched as `docs/security.md` says.

use super::Api;
use super::administrator::{administrator, store_failed};
use super::body::Body;
use super::error::{ApiError, ApiResult};
use super::login::Principal;
use super::reply::{Json, put_status};
use crate::definitions::model::{PermissionDefinition, TopicPermissionDefinition};
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use bytes::Bytes;
use ferry_auth::permissions::{Permissions, TopicPermission, VhostPermissions};
use ferry_auth::store::{Scope, UserStoreError};

/// The routes of this family.
pub(crate) fn routes() -> Router<Api> {
    Router::new()
        .route("/api/permissions", get(list_all))
        .route(
            "/api/permissions/{vhost}/{user}",
            get(show).put(put).delete(clear),
        )
        .route("/api/users/{user}/permissions", get(list_user))
        .route("/api/vhosts/{vhost}/permissions", get(list_vhost))
        .route("/api/topic-permissions", get(list_all_topics))
        .route(
            "/api/topic-permissions/{vhost}/{user}",
            get(show_topics).put(put_topic).delete(clear_topics),
        )
        .route("/api/users/{user}/topic-permissions", get(list_user_topics))
        .route(
            "/api/vhosts/{vhost}/topic-permissions",
            get(list_vhost_topics),
        )
}

fn permission_json(p: VhostPermissions) -> PermissionDefinition {
    PermissionDefinition {
        user: p.user,
        vhost: p.vhost,
        configure: p.permissions.configure,
        write: p.permissions.write,
        read: p.permissions.read,
    }
}

fn topic_json(t: TopicPermission) -> TopicPermissionDefinition {
    TopicPermissionDefinition {
        user: t.user,
        vhost: t.vhost,
        exchange: t.exchange,
        write: t.write,
        read: t.read,
    }
}

/// Refuses a virtual host that is not configured.
fn existing_vhost(api: &Api, vhost: &str) -> ApiResult<()> {
    match api.amqp.vhost(vhost) {
        Some(_) => Ok(()),
        None => Err(ApiError::bad_request(format!(
            "vhost '{vhost}' does not exist (Ferry's vhosts are amqp.vhosts in the config)"
        ))),
    }
}

/// A refused set as a 400 naming the field or the missing user; a store failure as 500.
fn set_failed(e: UserStoreError) -> ApiError {
    match e {
        UserStoreError::NoSuchUser(_) | UserStoreError::BadPattern(_) => {
            ApiError::bad_request(e.to_string())
        }
        other => store_failed(other),
    }
}

async fn listed(api: &Api, scope: Scope<'_>) -> ApiResult<Json<Vec<PermissionDefinition>>> {
    let all = api
        .users
        .store()
        .list_permissions(scope)
        .await
        .map_err(store_failed)?;
    Ok(Json(all.into_iter().map(permission_json).collect()))
}

async fn listed_topics(
    api: &Api,
    scope: Scope<'_>,
) -> ApiResult<Json<Vec<TopicPermissionDefinition>>> {
    let all = api
        .users
        .store()
        .list_topic_permissions(scope)
        .await
        .map_err(store_failed)?;
    Ok(Json(all.into_iter().map(topic_json).collect()))
}

/// `GET /api/permissions`.
async fn list_all(
    State(api): State<Api>,
    principal: Principal,
) -> ApiResult<Json<Vec<PermissionDefinition>>> {
    administrator(&principal)?;
    listed(&api, Scope::All).await
}

/// `GET /api/users/{user}/permissions`.
async fn list_user(
    State(api): State<Api>,
    principal: Principal,
    Path(user): Path<String>,
) -> ApiResult<Json<Vec<PermissionDefinition>>> {
    administrator(&principal)?;
    listed(&api, Scope::User(&user)).await
}

/// `GET /api/vhosts/{vhost}/permissions`.
async fn list_vhost(
    State(api): State<Api>,
    principal: Principal,
    Path(vhost): Path<String>,
) -> ApiResult<Json<Vec<PermissionDefinition>>> {
    administrator(&principal)?;
    api.amqp.vhost(&vhost).ok_or_else(ApiError::not_found)?;
    listed(&api, Scope::Vhost(&vhost)).await
}

/// `GET /api/permissions/{vhost}/{user}`.
async fn show(
    State(api): State<Api>,
    principal: Principal,
    Path((vhost, user)): Path<(String, String)>,
) -> ApiResult<Json<PermissionDefinition>> {
    administrator(&principal)?;
    let permissions = api
        .users
        .store()
        .permissions(&vhost, &user)
        .await
        .map_err(store_failed)?
        .ok_or_else(ApiError::not_found)?;
    Ok(Json(permission_json(VhostPermissions {
        vhost,
        user,
        permissions,
    })))
}

/// `PUT /api/permissions/{vhost}/{user}` with `{configure, write, read}`: 201 when the
/// user had none there, 204 when they were replaced.
async fn put(
    State(api): State<Api>,
    principal: Principal,
    Path((vhost, user)): Path<(String, String)>,
    body: Bytes,
) -> ApiResult<StatusCode> {
    administrator(&principal)?;
    let body = Body::parse(&body, &["configure", "write", "read", "user", "vhost"])?;
    let permissions = Permissions {
        configure: body.required_string("configure")?,
        write: body.required_string("write")?,
        read: body.required_string("read")?,
    };
    existing_vhost(&api, &vhost)?;
    let store = api.users.store();
    let existed = store
        .permissions(&vhost, &user)
        .await
        .map_err(store_failed)?
        .is_some();
    store
        .set_permissions(&VhostPermissions {
            vhost,
            user,
            permissions,
        })
        .await
        .map_err(set_failed)?;
    Ok(put_status(existed))
}

/// `DELETE /api/permissions/{vhost}/{user}`.
async fn clear(
    State(api): State<Api>,
    principal: Principal,
    Path((vhost, user)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    administrator(&principal)?;
    match api
        .users
        .store()
        .clear_permissions(&vhost, &user)
        .await
        .map_err(store_failed)?
    {
        true => Ok(StatusCode::NO_CONTENT),
        false => Err(ApiError::not_found()),
    }
}

/// `GET /api/topic-permissions`.
async fn list_all_topics(
    State(api): State<Api>,
    principal: Principal,
) -> ApiResult<Json<Vec<TopicPermissionDefinition>>> {
    administrator(&principal)?;
    listed_topics(&api, Scope::All).await
}

/// `GET /api/users/{user}/topic-permissions`.
async fn list_user_topics(
    State(api): State<Api>,
    principal: Principal,
    Path(user): Path<String>,
) -> ApiResult<Json<Vec<TopicPermissionDefinition>>> {
    administrator(&principal)?;
    listed_topics(&api, Scope::User(&user)).await
}

/// `GET /api/vhosts/{vhost}/topic-permissions`.
async fn list_vhost_topics(
    State(api): State<Api>,
    principal: Principal,
    Path(vhost): Path<String>,
) -> ApiResult<Json<Vec<TopicPermissionDefinition>>> {
    administrator(&principal)?;
    api.amqp.vhost(&vhost).ok_or_else(ApiError::not_found)?;
    listed_topics(&api, Scope::Vhost(&vhost)).await
}

/// `GET /api/topic-permissions/{vhost}/{user}`: one per exchange; 404 when there is none.
async fn show_topics(
    State(api): State<Api>,
    principal: Principal,
    Path((vhost, user)): Path<(String, String)>,
) -> ApiResult<Json<Vec<TopicPermissionDefinition>>> {
    administrator(&principal)?;
    let topics = api
        .users
        .store()
        .topic_permissions(&vhost, &user)
        .await
        .map_err(store_failed)?;
    if topics.is_empty() {
        return Err(ApiError::not_found());
    }
    Ok(Json(topics.into_iter().map(topic_json).collect()))
}

/// `PUT /api/topic-permissions/{vhost}/{user}` with `{exchange, write, read}`.
async fn put_topic(
    State(api): State<Api>,
    principal: Principal,
    Path((vhost, user)): Path<(String, String)>,
    body: Bytes,
) -> ApiResult<StatusCode> {
    administrator(&principal)?;
    let body = Body::parse(&body, &["exchange", "write", "read", "user", "vhost"])?;
    let topic = TopicPermission {
        vhost,
        user,
        exchange: body.required_string("exchange")?,
        write: body.required_string("write")?,
        read: body.required_string("read")?,
    };
    existing_vhost(&api, &topic.vhost)?;
    api.users
        .store()
        .set_topic_permission(&topic)
        .await
        .map_err(set_failed)?;
    Ok(StatusCode::CREATED)
}

/// `DELETE /api/topic-permissions/{vhost}/{user}`: every exchange's.
async fn clear_topics(
    State(api): State<Api>,
    principal: Principal,
    Path((vhost, user)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    administrator(&principal)?;
    match api
        .users
        .store()
        .clear_topic_permissions(&vhost, &user, None)
        .await
        .map_err(store_failed)?
    {
        true => Ok(StatusCode::NO_CONTENT),
        false => Err(ApiError::not_found()),
    }
}
