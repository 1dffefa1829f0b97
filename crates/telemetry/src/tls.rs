//! The metrics of Ferry's TLS listeners (every front's, and the HTTPS endpoint's).

use super::names::{Kind, Metric};

/// Label: the server a connection came to (`amqp`, `kafka`, `metrics`).
pub const LABEL_FRONT: &str = "front";
/// Label: why a handshake failed (see [`HANDSHAKE_FAILURES_TOTAL`]).
pub const LABEL_REASON: &str = "reason";
/// Label: how a reload ended (`ok`, `failed`).
pub const LABEL_OUTCOME: &str = "outcome";

/// TLS handshakes completed, by front.
pub const HANDSHAKES_TOTAL: &str = "ferry_tls_handshakes_total";
/// Connections closed because their TLS handshake failed, by front and reason:
/// `not_tls` (plaintext bytes on a TLS port), `timeout`, `closed` (the client left
/// mid-handshake, e.g. a truncated ClientHello), `malformed`, `incompatible` (no common
/// version or cipher suite), `no_certificate`, `untrusted_certificate`,
/// `expired_certificate`, `bad_certificate`, `protocol`; and `client_hello_on_plaintext`
/// (a TLS client on a plaintext port).
pub const HANDSHAKE_FAILURES_TOTAL: &str = "ferry_tls_handshake_failures_total";
/// Loads of the certificate files after the first, by outcome.
pub const RELOADS_TOTAL: &str = "ferry_tls_reloads_total";
/// When the served certificate expires, in seconds since the Unix epoch.
pub const CERTIFICATE_NOT_AFTER: &str = "ferry_tls_certificate_not_after_seconds";

/// Every metric of the TLS listeners.
pub const ALL: &[Metric] = &[
    Metric {
        name: HANDSHAKES_TOTAL,
        kind: Kind::Counter,
        help: "TLS handshakes completed, by front.",
    },
    Metric {
        name: HANDSHAKE_FAILURES_TOTAL,
        kind: Kind::Counter,
        help: "Connections closed because their TLS handshake failed, by front and reason.",
    },
    Metric {
        name: RELOADS_TOTAL,
        kind: Kind::Counter,
        help: "Reloads of the TLS certificate files, by outcome.",
    },
    Metric {
        name: CERTIFICATE_NOT_AFTER,
        kind: Kind::Gauge,
        help: "Expiry of the served TLS certificate, seconds since the Unix epoch.",
    },
];
