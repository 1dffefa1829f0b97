//! Authentication, shared by every front: a login — a password (AMQP PLAIN and AMQPLAIN,
//! Kafka SASL PLAIN), a SCRAM exchange (Kafka SCRAM-SHA-256/512), a client certificate
//! (AMQP SASL EXTERNAL) — becomes a [`User`] read from the user store, or a refusal that
//! is logged, counted by front and reason, and slows the next logins from that address.
//!
//! - [`user`]: a user record, its credentials and tags, from its `[[users]]` entry
//!   ([`UserConfig`], this crate's own section of `ferry.toml`);
//! - [`password`]: RabbitMQ's password hashes; [`scram`]: SCRAM credentials as Kafka stores
//!   them, and the server side of a SCRAM exchange;
//! - [`permissions`]: RabbitMQ's permissions and topic permissions, and how they match;
//! - [`access`]: the authorizer — what one user may do in one virtual host;
//! - [`store`]: users and their permissions in the store, seeded from `[[users]]`, read
//!   afresh at every login (permissions: when a connection opens a virtual host, and again
//!   whenever they change);
//! - [`throttle`]: the growing delay for addresses whose logins fail;
//! - [`certificate`]: the user name SASL EXTERNAL takes from a client certificate;
//! - [`peer`]: who is at the other end of a connection, as the listener saw it;
//! - [`principal`]: Kafka's rules that turn a certificate's subject into a principal.
//!
//! After the credentials are checked, a user's restrictions apply: `loopback_only` (like
//! RabbitMQ's `guest`) and `require_tls` (refused on plaintext listeners). Refusals never
//! say whether the user exists, and no secret reaches a log line or an error.
//!
//! Built on `ferry-store` (the user store) and `ferry-telemetry`; the daemon's configuration
//! validates `[[users]]` with this crate's parsers.

pub mod access;
mod certificate;
mod config;
pub mod password;
pub mod peer;
pub mod permissions;
pub mod principal;
pub mod scram;
pub mod store;
mod throttle;
mod user;

pub use certificate::{CertLoginFrom, SanType, login_name};
pub use config::{
    DEFAULT_VHOST, GUEST_PASSWORD_HASH, GUEST_SCRAM_SHA_256, GUEST_SCRAM_SHA_512, PermissionConfig,
    TopicPermissionConfig, UserConfig, default_users,
};
pub use user::User;

use crate::peer::Peer;
use crate::scram::Mechanism;
use ferry_store::Database;
use ferry_telemetry::auth as m;
use scram::exchange::{ClientFirst, Finish, ScramError, ScramExchange};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;
use store::{UserStore, UserStoreError};
use throttle::Throttle;
use tracing::{info, warn};

/// The front a login came through (the `front` label of the login metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Front {
    /// The AMQP 0-9-1 front.
    Amqp,
    /// The Kafka front.
    Kafka,
    /// The management HTTP API (basic auth).
    Management,
}

impl Front {
    /// Every front.
    pub const ALL: [Self; 3] = [Self::Amqp, Self::Kafka, Self::Management];

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Amqp => "amqp",
            Self::Kafka => "kafka",
            Self::Management => "management",
        }
    }
}

/// Why a login was refused; the message is safe to send to the client (it never says
/// whether the user exists, and carries no secret).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// Unknown user, wrong password or wrong SCRAM proof.
    #[error("login refused for user '{0}': invalid credentials")]
    InvalidCredentials(String),
    /// The user may only connect from loopback.
    #[error("user '{0}' can only connect via localhost")]
    LoopbackOnly(String),
    /// The user may only log in over TLS and the listener is plaintext.
    #[error("user '{0}' must connect over TLS (its require_tls is set)")]
    TlsRequired(String),
    /// The user has no permissions on this virtual host.
    #[error("access to vhost '{vhost}' refused for user '{user}'")]
    VhostRefused {
        /// The user.
        user: String,
        /// The virtual host asked for.
        vhost: String,
    },
    /// A SCRAM message was malformed or its nonce did not match.
    #[error("{0}")]
    Scram(#[from] ScramError),
    /// A SASL mechanism that is not offered (EXTERNAL without a verified client
    /// certificate is not).
    #[error("{0}")]
    Mechanism(String),
    /// A SASL response that does not have its mechanism's form.
    #[error("{0}")]
    Malformed(String),
    /// SASL EXTERNAL with a certificate that does not carry the configured name.
    #[error("{0}")]
    Certificate(String),
    /// The user store could not be read.
    #[error("the login cannot be checked now (the user store failed); try again")]
    Store,
}

impl AuthError {
    /// Every `reason` label [`AuthError::reason`] gives.
    pub const REASONS: [&'static str; 9] = [
        "invalid_credentials",
        "loopback_only",
        "tls_required",
        "vhost_refused",
        "nonce_mismatch",
        "malformed",
        "mechanism",
        "no_certificate_name",
        "store",
    ];

    /// The `reason` label of the failure metric.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::InvalidCredentials(_) => "invalid_credentials",
            Self::LoopbackOnly(_) => "loopback_only",
            Self::TlsRequired(_) => "tls_required",
            Self::VhostRefused { .. } => "vhost_refused",
            Self::Scram(ScramError::NonceMismatch) => "nonce_mismatch",
            Self::Scram(ScramError::Malformed { .. }) => "malformed",
            Self::Mechanism(_) => "mechanism",
            Self::Malformed(_) => "malformed",
            Self::Certificate(_) => "no_certificate_name",
            Self::Store => "store",
        }
    }
}

/// Exports the login metrics at 0 for every front and reason, so an alert on their
/// increase sees the first failure after a start.
fn export_counters() {
    for front in Front::ALL {
        metrics::counter!(m::SLOWED_LOGINS_TOTAL, m::LABEL_FRONT => front.label()).increment(0);
        for reason in AuthError::REASONS {
            metrics::counter!(
                m::FAILURES_TOTAL,
                m::LABEL_FRONT => front.label(),
                m::LABEL_REASON => reason
            )
            .increment(0);
        }
    }
}

/// Why the authenticator cannot start.
#[derive(Debug, thiserror::Error)]
pub enum AuthSetupError {
    /// A `[[users]]` entry is unusable.
    #[error("{0}")]
    BadUser(#[from] user::BadUser),
    /// The users could not be written to the store.
    #[error("{0}")]
    Store(#[from] UserStoreError),
}

/// A SCRAM login between client-first and client-final.
#[derive(Debug, Clone)]
pub struct ScramLogin {
    exchange: ScramExchange,
    /// The user as read at client-first (`None`: no such user).
    user: Option<User>,
}

impl ScramLogin {
    /// The SCRAM mechanism of this login.
    pub fn mechanism(&self) -> crate::scram::Mechanism {
        self.exchange.mechanism()
    }
}

/// Checks logins for every front of one Ferry instance; cheap to clone.
#[derive(Clone)]
pub struct Authenticator {
    inner: Arc<Inner>,
}

struct Inner {
    store: UserStore,
    throttle: Throttle,
    /// The key fake SCRAM salts of unknown users are derived from (kept in the store).
    fake_salt_key: Vec<u8>,
}

impl Authenticator {
    /// Seeds the user store under `prefix` with `users` (see [`UserStore::seed`]: the
    /// configuration is authoritative for the users it lists) and checks logins against it.
    ///
    /// # Errors
    /// [`AuthSetupError`] for an unusable user or a store that fails.
    pub async fn start(
        db: Database,
        prefix: &str,
        users: &[UserConfig],
    ) -> Result<Self, AuthSetupError> {
        let users = users
            .iter()
            .enumerate()
            .map(|(i, u)| store::SeedUser::from_config(i, u))
            .collect::<Result<Vec<_>, _>>()?;
        let store = UserStore::new(db, prefix);
        let fake_salt_key = store.seed(&users).await?;
        export_counters();
        Ok(Self {
            inner: Arc::new(Inner {
                store,
                throttle: Throttle::default(),
                fake_salt_key,
            }),
        })
    }

    /// The user store (the management API changes users through it).
    pub fn store(&self) -> &UserStore {
        &self.inner.store
    }

    /// Checks a password login (SASL PLAIN, AMQPLAIN) from `peer`: any credential the
    /// user has may verify the password.
    ///
    /// # Errors
    /// [`AuthError`], logged and counted.
    pub async fn password(
        &self,
        front: Front,
        peer: &Peer,
        name: &str,
        password: &str,
    ) -> Result<User, AuthError> {
        self.admit(front, peer).await;
        let outcome = async {
            match self.read(name).await? {
                Some(user) if user.verify_password(password) => restrict(user, peer),
                Some(_) => Err(AuthError::InvalidCredentials(name.to_owned())),
                None => {
                    // As long as checking a real user's SCRAM credential, so the time taken
                    // does not say whether the user exists.
                    let fake = scram::exchange::fake_credential(
                        Mechanism::Sha256,
                        name,
                        &self.inner.fake_salt_key,
                    );
                    let _ = fake.verify_password(password);
                    Err(AuthError::InvalidCredentials(name.to_owned()))
                }
            }
        }
        .await;
        self.settle(front, peer, name, outcome)
    }

    /// Checks a login by client certificate (SASL EXTERNAL) as `name`, taken from the
    /// certificate: the user must exist; its restrictions apply.
    ///
    /// # Errors
    /// [`AuthError`], logged and counted.
    pub async fn certificate(
        &self,
        front: Front,
        peer: &Peer,
        name: &str,
    ) -> Result<User, AuthError> {
        self.admit(front, peer).await;
        let outcome = match self.read(name).await {
            Ok(Some(user)) => restrict(user, peer),
            Ok(None) => Err(AuthError::InvalidCredentials(name.to_owned())),
            Err(e) => Err(e),
        };
        self.settle(front, peer, name, outcome)
    }

    /// Answers a SCRAM client-first message with server-first.
    ///
    /// # Errors
    /// [`AuthError`] for a malformed message (logged and counted); an unknown user is not
    /// refused here, but at client-final.
    pub async fn scram_first(
        &self,
        front: Front,
        peer: &Peer,
        mechanism: Mechanism,
        message: &[u8],
    ) -> Result<(ScramLogin, Vec<u8>), AuthError> {
        self.admit(front, peer).await;
        let first = match ClientFirst::parse(message) {
            Ok(first) => first,
            Err(e) => return self.settle(front, peer, "", Err(e.into())),
        };
        let user = match self.read(&first.user).await {
            Ok(user) => user,
            Err(e) => return self.settle(front, peer, &first.user, Err(e)),
        };
        let credential = user.as_ref().and_then(|u| u.scram(mechanism));
        let (exchange, server_first) =
            ScramExchange::start(mechanism, first, credential, &self.inner.fake_salt_key);
        Ok((ScramLogin { exchange, user }, server_first))
    }

    /// Checks a SCRAM client-final message; answers server-final when the proof is right.
    ///
    /// # Errors
    /// [`AuthError`], logged and counted: malformed, nonce mismatch, wrong proof or
    /// unknown user (both `InvalidCredentials`), then the user's restrictions.
    pub fn scram_final(
        &self,
        front: Front,
        peer: &Peer,
        login: ScramLogin,
        message: &[u8],
    ) -> Result<(User, Vec<u8>), AuthError> {
        let name = login.exchange.user().to_owned();
        let outcome = match login.exchange.finish(message) {
            Err(e) => Err(e.into()),
            Ok(Finish::WrongProof) => Err(AuthError::InvalidCredentials(name.clone())),
            Ok(Finish::Proved(server_final)) => match login.user {
                Some(user) => restrict(user, peer).map(|u| (u, server_final)),
                None => Err(AuthError::InvalidCredentials(name.clone())),
            },
        };
        self.settle(front, peer, &name, outcome)
    }

    /// What `user` may do in `vhost`, read from the store now (a connection keeps it until
    /// the user store changes); topic patterns get `variables`.
    ///
    /// # Errors
    /// [`AuthError::VhostRefused`] when the user has no permissions on `vhost` (RabbitMQ's
    /// refusal), [`AuthError::Store`] when the store fails (logged).
    pub async fn vhost_access(
        &self,
        user: &str,
        vhost: &str,
        variables: &crate::permissions::TopicVariables,
    ) -> Result<access::VhostAccess, AuthError> {
        let grants = self.inner.store.grants(vhost, user).await.map_err(|e| {
            warn!(error = %e, "the user store could not be read for a connection's permissions");
            AuthError::Store
        })?;
        access::VhostAccess::new(user, vhost, &grants, variables).ok_or_else(|| {
            AuthError::VhostRefused {
                user: user.to_owned(),
                vhost: vhost.to_owned(),
            }
        })
    }

    /// Records a refusal decided outside the authenticator (an unsupported mechanism, a
    /// malformed PLAIN message), so it is logged, counted and slowed like the others.
    pub fn refused(&self, front: Front, peer: &Peer, error: &AuthError) {
        self.fail(front, peer, "", error);
    }

    /// Waits while `peer`'s address is being slowed down.
    async fn admit(&self, front: Front, peer: &Peer) {
        let wait = self.inner.throttle.wait(peer.addr.ip(), Instant::now());
        if !wait.is_zero() {
            metrics::counter!(m::SLOWED_LOGINS_TOTAL, m::LABEL_FRONT => front.label()).increment(1);
            tokio::time::sleep(wait).await;
        }
    }

    /// Reads user `name`, mapping a store failure to [`AuthError::Store`] (logged).
    async fn read(&self, name: &str) -> Result<Option<User>, AuthError> {
        self.inner.store.get(name).await.map_err(|e| {
            warn!(error = %e, "the user store could not be read for a login");
            AuthError::Store
        })
    }

    /// Passes a success through; logs, counts and slows a failure.
    fn settle<T>(
        &self,
        front: Front,
        peer: &Peer,
        name: &str,
        outcome: Result<T, AuthError>,
    ) -> Result<T, AuthError> {
        if let Err(e) = &outcome {
            self.fail(front, peer, name, e);
        }
        outcome
    }

    fn fail(&self, front: Front, peer: &Peer, name: &str, error: &AuthError) {
        metrics::counter!(
            m::FAILURES_TOTAL,
            m::LABEL_FRONT => front.label(),
            m::LABEL_REASON => error.reason()
        )
        .increment(1);
        let delay = if matches!(error, AuthError::Store) {
            std::time::Duration::ZERO
        } else {
            self.inner.throttle.failed(peer.addr.ip(), Instant::now())
        };
        info!(
            front = front.label(),
            peer = %peer.addr,
            user = name,
            reason = error.reason(),
            error = %error,
            next_login_delay_ms = delay.as_millis() as u64,
            "login refused"
        );
    }
}

/// Applies `user`'s restrictions to a login from `peer` whose credentials were right.
fn restrict(user: User, peer: &Peer) -> Result<User, AuthError> {
    if user.loopback_only && !is_loopback(peer.addr.ip()) {
        return Err(AuthError::LoopbackOnly(user.name));
    }
    if user.require_tls && !peer.is_tls() {
        return Err(AuthError::TlsRequired(user.name));
    }
    Ok(user)
}

fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// What the fuzz targets (`fuzz/`, through `ferry::fuzzing`) decode of the user store's
/// records; not for Ferry's own code.
#[doc(hidden)]
pub mod fuzzing {
    /// Decodes a user's stored permissions on a virtual host.
    ///
    /// # Errors
    /// The user store's error for an unreadable record.
    pub fn user_permissions(
        bytes: &[u8],
    ) -> Result<crate::permissions::Permissions, crate::store::UserStoreError> {
        crate::store::permissions::decode_permissions("/", "fuzz", bytes)
    }

    /// Decodes a user's stored topic permissions on an exchange.
    ///
    /// # Errors
    /// The user store's error for an unreadable record.
    pub fn user_topic_permission(
        bytes: &[u8],
    ) -> Result<crate::permissions::TopicPermission, crate::store::UserStoreError> {
        crate::store::permissions::decode_topic("/", "fuzz", "amq.topic", bytes)
    }
}

#[cfg(test)]
mod tests;
