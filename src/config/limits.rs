//! The size limits the configuration is validated against, in one place: the layers that
//! enforce them (the stage, the fronts, the bridge) take them from here, so `config`
//! needs nothing from those layers.

/// The largest body a stage holds: one append must fit FoundationDB's 10 MB transaction.
pub const MAX_BODY_SIZE: usize = 8 * 1024 * 1024;

/// The largest message body the AMQP front accepts at most: the stage holds up to 8 MiB
/// per message, and the front keeps 256 KiB of that for the exchange, routing key and
/// properties it stores with the body.
pub const MAX_MESSAGE_SIZE_LIMIT: u32 = (MAX_BODY_SIZE - 256 * 1024) as u32;
