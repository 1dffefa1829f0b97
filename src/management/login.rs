//! HTTP basic auth: every request carries a user's name and password, checked by the
//! [`Authenticator`](crate::auth::Authenticator) as a front's login is (refusals counted
//! under the `management` front and slowed down per address), then the user's tags decide
//! whether it may use the API ([`Access`]).

use super::Api;
use super::access::Access;
use super::error::ApiError;
use crate::auth::access::VhostAccess;
use crate::auth::permissions::TopicVariables;
use crate::auth::store::Scope;
use crate::auth::{AuthError, Front, User};
use crate::daemon::http::ClientAddr;
use crate::peer::{Peer, TlsPeer};
use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::header;
use axum::http::request::Parts;
use base64::Engine as _;
use std::net::SocketAddr;

/// The logged-in user of a request.
#[derive(Debug, Clone)]
pub struct Principal {
    /// The user, as the user store holds it.
    pub user: User,
    /// Its tags.
    pub tags: Vec<String>,
    /// What it may do.
    pub access: Access,
}

impl FromRequestParts<Api> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, api: &Api) -> Result<Self, ApiError> {
        let (name, password) = credentials(parts).ok_or_else(ApiError::no_credentials)?;
        let addr = parts
            .extensions
            .get::<ConnectInfo<ClientAddr>>()
            .map_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)), |c| c.0.0);
        let peer = Peer {
            addr,
            tls: api.https.then(TlsPeer::default),
        };
        let user = api
            .users
            .password(Front::Management, &peer, &name, &password)
            .await
            .map_err(|_| ApiError::not_authorized("Login failed"))?;
        let tags = user.tags.clone();
        let vhosts: Vec<String> = api
            .users
            .store()
            .list_permissions(Scope::User(&user.name))
            .await
            .map_err(|e| ApiError::internal(e.to_string()))?
            .into_iter()
            .map(|p| p.vhost)
            .collect();
        let access = Access::new(&user.name, &tags, &vhosts);
        if !access.is_management_user() {
            return Err(ApiError::not_authorized("Not management user"));
        }
        Ok(Self { user, tags, access })
    }
}

impl Principal {
    /// What the user may do to the objects of `vhost`, read from the store now: the API
    /// declares, deletes and binds under the user's permissions, as RabbitMQ's does.
    ///
    /// # Errors
    /// 403 when the user has no permissions on `vhost`, 500 when the store fails.
    pub async fn vhost_access(&self, api: &Api, vhost: &str) -> Result<VhostAccess, ApiError> {
        let variables = TopicVariables::new(&self.user.name, vhost);
        api.users
            .vhost_access(&self.user.name, vhost, &variables)
            .await
            .map_err(|e| match e {
                AuthError::VhostRefused { .. } => ApiError::access_refused(e.to_string()),
                other => ApiError::internal(other.to_string()),
            })
    }
}

/// The name and password of an `Authorization: Basic` header.
fn credentials(parts: &Parts) -> Option<(String, String)> {
    let value = parts.headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (name, password) = text.split_once(':')?;
    Some((name.to_owned(), password.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Request;

    fn parts(authorization: &str) -> Parts {
        Request::builder()
            .header(header::AUTHORIZATION, authorization)
            .body(())
            .unwrap()
            .into_parts()
            .0
    }

    #[test]
    fn basic_credentials_are_decoded() {
        // "guest:gu:est" — a password may hold a colon.
        assert_eq!(
            credentials(&parts("Basic Z3Vlc3Q6Z3U6ZXN0")),
            Some(("guest".into(), "gu:est".into()))
        );
        assert_eq!(credentials(&parts("Bearer abc")), None);
        assert_eq!(credentials(&parts("Basic !!!")), None);
    }
}
