//! HTTP basic auth: every request carries a user's name and password, checked by the
//! [`Authenticator`](crate::auth::Authenticator) as a front's login is (refusals counted
//! under the `management` front and slowed down per address), then the user's tags decide
//! whether it may use the API ([`Access`]).

use super::Api;
use super::access::Access;
use super::error::ApiError;
use crate::auth::{Front, User};
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
        let tags = tags_of(&user);
        let access = Access::new(&user.name, &tags, &user.vhosts);
        if !access.is_management_user() {
            return Err(ApiError::not_authorized("Not management user"));
        }
        Ok(Self { user, tags, access })
    }
}

/// The tags of `user`. Until users carry tags (branch `perms`), every user who may log in
/// is an administrator of the API, as every user may do anything on the fronts.
fn tags_of(_user: &User) -> Vec<String> {
    vec!["administrator".to_owned()]
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
