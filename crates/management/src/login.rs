//! HTTP basic auth: every request carries a user's name and password, checked by the
//! [`Authenticator`](ferry_auth::Authenticator) as a front's login is (refusals counted
//! under the `management` front and slowed down per address), then the user's tags decide
//! whether it may use the API ([`Access`]), and its permissions in each vhost (read from
//! the store at each request, as every instance reads them) what it may do there, as on
//! the AMQP front.

use super::Api;
use super::access::Access;
use super::error::ApiError;
use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::header;
use axum::http::request::Parts;
use base64::Engine as _;
use ferry_auth::access::VhostAccess;
use ferry_auth::peer::{Peer, TlsPeer};
use ferry_auth::permissions::TopicVariables;
use ferry_auth::{AuthError, Front, User};
use ferry_tls::http::ClientAddr;
use std::collections::HashMap;
use std::net::SocketAddr;

/// The logged-in user of a request.
#[derive(Debug, Clone)]
pub(crate) struct Principal {
    /// The user, as the user store holds it.
    pub user: User,
    /// What its tags let it do.
    pub access: Access,
    /// Its permissions in each vhost it has any on.
    permissions: HashMap<String, VhostAccess>,
}

impl Principal {
    /// The user's permissions in `vhost`.
    ///
    /// # Errors
    /// 401 `not_authorised` when it has none there, in RabbitMQ's words.
    pub(crate) fn permissions(&self, vhost: &str) -> Result<&VhostAccess, ApiError> {
        self.permissions
            .get(vhost)
            .ok_or_else(|| ApiError::not_authorised(ApiError::VHOST_REFUSED))
    }
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
        let mut permissions = HashMap::new();
        for vhost in api.amqp.vhosts() {
            let variables = TopicVariables::new(&user.name, &vhost.name);
            match api
                .users
                .vhost_access(&user.name, &vhost.name, &variables)
                .await
            {
                Ok(access) => {
                    permissions.insert(vhost.name.clone(), access);
                }
                Err(AuthError::VhostRefused { .. }) => {}
                Err(e) => return Err(ApiError::internal(e.to_string())),
            }
        }
        let vhosts: Vec<String> = permissions.keys().cloned().collect();
        let access = Access::new(&user.name, &user.tags, &vhosts);
        if !access.is_management_user() {
            return Err(ApiError::not_authorised("Not management user"));
        }
        Ok(Self {
            user,
            access,
            permissions,
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
