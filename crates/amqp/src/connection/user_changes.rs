//! Users and permissions changed in the store reach the open connections of this instance,
//! as RabbitMQ applies them: a connection whose user was deleted is closed with 320
//! CONNECTION_FORCED "user 'NAME' is deleted"; every other connection's permissions are
//! read again, so its next check follows the change (permissions cleared: every check
//! refused with 403, the connection stays open, as RabbitMQ's does).
//!
//! One task per front sleeps on the user store's version watch, so a change made through
//! any instance's management API (or a definitions import) reaches every instance at once.

use crate::state::broker::Broker;
use crate::state::registry::LiveConnection;
use ferry_auth::AuthError;
use ferry_auth::access::VhostAccess;
use ferry_auth::permissions::TopicVariables;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// How long the task waits before watching again after the store failed.
const STORE_RETRY: Duration = Duration::from_secs(1);

/// Applies every change of users and permissions to this instance's connections until
/// `shutdown`.
pub(crate) async fn run(broker: Arc<Broker>, shutdown: CancellationToken) {
    let store = broker.users.store().clone();
    let mut seen = match store.version().await {
        Ok(v) => v,
        Err(e) => {
            warn!(error = %e, "cannot read the user store's version; connections follow user changes once it answers");
            -1
        }
    };
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            changed = store.changed_since(seen) => if let Err(e) = changed {
                warn!(error = %e, "cannot watch the user store");
                tokio::time::sleep(STORE_RETRY).await;
                continue;
            },
        }
        match store.version().await {
            Ok(v) => seen = v,
            Err(_) => continue,
        }
        for connection in broker.connections.list() {
            apply(&broker, &connection).await;
        }
    }
}

/// Applies to `connection`, just registered, a change made since its permissions were read
/// at user store version `read_at`: the watch may have run before the connection was
/// listed.
pub(crate) async fn catch_up(broker: &Broker, connection: &LiveConnection, read_at: i64) {
    if broker.users.store().version().await.unwrap_or(read_at) != read_at {
        apply(broker, connection).await;
    }
}

/// Closes `connection` if its user is gone, or gives it its user's permissions as stored.
async fn apply(broker: &Broker, connection: &LiveConnection) {
    let (user, vhost) = (&connection.info.user, &connection.info.vhost);
    match broker.users.store().get(user).await {
        Ok(None) => {
            info!(%user, connection = %connection.name, "closing the connection of a deleted user");
            connection.close(&format!("user '{user}' is deleted"));
        }
        Ok(Some(_)) => {
            // RabbitMQ gives AMQP 0-9-1 connections no `{client_id}` for topic permissions.
            let variables = TopicVariables::new(user, vhost);
            match broker.users.vhost_access(user, vhost, &variables).await {
                Ok(access) => connection.access.replace(access),
                Err(AuthError::VhostRefused { .. }) => connection
                    .access
                    .replace(VhostAccess::refusing(user, vhost)),
                Err(_) => {} // logged by the authenticator; the next change tries again
            }
        }
        Err(e) => warn!(%user, error = %e, "cannot read a connection's user"),
    }
}
