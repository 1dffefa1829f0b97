//! Users and authentication, shared by every front (AMQP SASL PLAIN/AMQPLAIN, Kafka SASL
//! PLAIN).
//!
//! Passwords are stored hashed ([`crate::password`]). Like RabbitMQ's `guest`, a user can
//! be restricted to loopback connections.

use crate::config::UserConfig;
use crate::password::PasswordHash;
use std::net::IpAddr;

/// Why a login was refused; the message is safe to send to the client (it never says
/// whether the user exists).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// Unknown user or wrong password.
    #[error("login refused for user '{0}': invalid credentials")]
    InvalidCredentials(String),
    /// The user may only connect from loopback.
    #[error("user '{0}' can only connect via localhost")]
    LoopbackOnly(String),
    /// The user may not open this virtual host.
    #[error("access to vhost '{vhost}' refused for user '{user}'")]
    VhostRefused {
        /// The user.
        user: String,
        /// The virtual host asked for.
        vhost: String,
    },
}

/// A user allowed to connect.
#[derive(Debug, Clone)]
pub struct User {
    /// The login name.
    pub name: String,
    hash: PasswordHash,
    /// The virtual hosts this user may open.
    pub vhosts: Vec<String>,
    /// Whether the user may connect only from a loopback address.
    pub loopback_only: bool,
}

impl User {
    /// Whether the user may open `vhost`.
    ///
    /// # Errors
    /// [`AuthError::VhostRefused`].
    pub fn check_vhost(&self, vhost: &str) -> Result<(), AuthError> {
        if self.vhosts.iter().any(|v| v == vhost) {
            Ok(())
        } else {
            Err(AuthError::VhostRefused {
                user: self.name.clone(),
                vhost: vhost.to_owned(),
            })
        }
    }
}

/// The users of a Ferry instance.
#[derive(Debug, Clone, Default)]
pub struct Users {
    users: Vec<User>,
}

impl Users {
    /// The users `[[users]]` declares.
    ///
    /// # Errors
    /// The key path of a password hash that does not parse (validation has checked it
    /// already, so this only fails for a config that skipped validation).
    pub fn from_config(users: &[UserConfig]) -> Result<Self, String> {
        let users = users
            .iter()
            .enumerate()
            .map(|(i, u)| {
                Ok(User {
                    name: u.name.clone(),
                    hash: PasswordHash::parse(&u.password_hash)
                        .map_err(|e| format!("users[{i}].password_hash: {e}"))?,
                    vhosts: u.vhosts.clone(),
                    loopback_only: u.loopback_only,
                })
            })
            .collect::<Result<_, String>>()?;
        Ok(Self { users })
    }

    /// Checks a login from `peer`.
    ///
    /// # Errors
    /// [`AuthError::InvalidCredentials`] for an unknown user or a wrong password,
    /// [`AuthError::LoopbackOnly`] for a loopback-only user connecting from elsewhere.
    pub fn authenticate(
        &self,
        name: &str,
        password: &str,
        peer: IpAddr,
    ) -> Result<&User, AuthError> {
        let user = self
            .users
            .iter()
            .find(|u| u.name == name && u.hash.verify(password))
            .ok_or_else(|| AuthError::InvalidCredentials(name.to_owned()))?;
        if user.loopback_only && !is_loopback(peer) {
            return Err(AuthError::LoopbackOnly(name.to_owned()));
        }
        Ok(user)
    }
}

fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users() -> Users {
        Users::from_config(&[
            UserConfig {
                name: "guest".into(),
                password_hash: PasswordHash::new("guest").to_string(),
                vhosts: vec!["/".into()],
                loopback_only: true,
            },
            UserConfig {
                name: "app".into(),
                password_hash: PasswordHash::new("s3cret").to_string(),
                vhosts: vec!["/".into(), "orders".into()],
                loopback_only: false,
            },
        ])
        .unwrap()
    }

    #[test]
    fn loopback_only_user_is_refused_from_elsewhere() {
        let u = users();
        assert!(
            u.authenticate("guest", "guest", "127.0.0.1".parse().unwrap())
                .is_ok()
        );
        assert!(
            u.authenticate("guest", "guest", "::1".parse().unwrap())
                .is_ok()
        );
        assert_eq!(
            u.authenticate("guest", "guest", "10.0.0.5".parse().unwrap())
                .unwrap_err(),
            AuthError::LoopbackOnly("guest".into())
        );
        assert!(
            u.authenticate("app", "s3cret", "10.0.0.5".parse().unwrap())
                .is_ok()
        );
    }

    #[test]
    fn wrong_password_and_unknown_user_look_the_same() {
        let u = users();
        let local = "127.0.0.1".parse().unwrap();
        assert_eq!(
            u.authenticate("app", "nope", local)
                .unwrap_err()
                .to_string(),
            "login refused for user 'app': invalid credentials"
        );
        assert!(matches!(
            u.authenticate("ghost", "x", local),
            Err(AuthError::InvalidCredentials(_))
        ));
    }

    #[test]
    fn vhost_permissions() {
        let u = users();
        let app = u
            .authenticate("app", "s3cret", "127.0.0.1".parse().unwrap())
            .unwrap();
        assert!(app.check_vhost("orders").is_ok());
        assert!(app.check_vhost("billing").is_err());
    }
}
