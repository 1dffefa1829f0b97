//! The metrics of authentication, shared by the fronts. Labels never carry a user name or
//! anything a client sent: only the front and a fixed reason.

use super::names::{Kind, Metric};

/// Label: the front a login came through (`amqp`, `kafka`, `management`).
pub const LABEL_FRONT: &str = "front";
/// Label: why a login failed (`invalid_credentials`, `tls_required`, `loopback_only`,
/// `malformed`, `nonce_mismatch`, `mechanism`, `no_certificate_name`, `store`).
pub const LABEL_REASON: &str = "reason";

/// Logins refused, by front and reason.
pub const FAILURES_TOTAL: &str = "ferry_auth_failures_total";
/// Logins that waited before being checked because their address had failed recently.
pub const SLOWED_LOGINS_TOTAL: &str = "ferry_auth_slowed_logins_total";

/// Every metric of authentication.
pub const ALL: &[Metric] = &[
    Metric {
        name: FAILURES_TOTAL,
        kind: Kind::Counter,
        help: "Logins refused, by front and reason.",
    },
    Metric {
        name: SLOWED_LOGINS_TOTAL,
        kind: Kind::Counter,
        help: "Logins delayed because their client address failed to log in recently.",
    },
];
