//! Binding listen sockets with errors an operator can act on.
//!
//! Every server Ferry runs (the metrics endpoint now, the AMQP and Kafka fronts later) binds
//! through [`bind`], so a busy port always reads the same way and says which setting moves it:
//! `metrics.listen: 0.0.0.0:9464 is in use; set FERRY__METRICS__LISTEN`.

use std::io;
use tokio::net::TcpListener;

/// Why a listen socket could not be bound.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// Another process holds the port.
    #[error("{key}: {addr} is in use; set {env_var}")]
    InUse {
        /// The config key that chose the address (`metrics.listen`).
        key: String,
        /// The address as configured.
        addr: String,
        /// The environment variable that overrides the key, to pick another port.
        env_var: String,
    },
    /// Any other failure: an address not on this host, a privileged port, a name that does
    /// not resolve.
    #[error("{key}: cannot listen on {addr}: {reason}; set {env_var}")]
    Other {
        /// The config key that chose the address.
        key: String,
        /// The address as configured.
        addr: String,
        /// The environment variable that overrides the key.
        env_var: String,
        /// What the operating system said.
        reason: String,
    },
}

/// Binds a TCP listener on `addr` (`host:port`, resolved here), the value of config key
/// `key` which `env_var` overrides.
///
/// # Errors
/// [`ListenError::InUse`] when the port is taken, [`ListenError::Other`] for anything else;
/// both name `key` and `env_var`.
pub async fn bind(key: &str, env_var: &str, addr: &str) -> Result<TcpListener, ListenError> {
    TcpListener::bind(addr).await.map_err(|e| {
        let (key, addr, env_var) = (key.to_owned(), addr.to_owned(), env_var.to_owned());
        match e.kind() {
            io::ErrorKind::AddrInUse => ListenError::InUse { key, addr, env_var },
            _ => ListenError::Other {
                key,
                addr,
                env_var,
                reason: e.to_string(),
            },
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn taken_port_names_key_and_variable() {
        let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = held.local_addr().unwrap().to_string();
        let err = bind("metrics.listen", "FERRY__METRICS__LISTEN", &addr)
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("metrics.listen: {addr} is in use; set FERRY__METRICS__LISTEN")
        );
    }

    #[tokio::test]
    async fn foreign_address_names_key_and_variable() {
        // 192.0.2.0/24 is TEST-NET-1: never assigned to a local interface.
        let err = bind("metrics.listen", "FERRY__METRICS__LISTEN", "192.0.2.1:9464")
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("metrics.listen: cannot listen on 192.0.2.1:9464: "),
            "{err}"
        );
        assert!(err.ends_with("; set FERRY__METRICS__LISTEN"), "{err}");
    }

    #[tokio::test]
    async fn free_port_binds() {
        let listener = bind("metrics.listen", "FERRY__METRICS__LISTEN", "127.0.0.1:0")
            .await
            .unwrap();
        assert_ne!(listener.local_addr().unwrap().port(), 0);
    }
}
