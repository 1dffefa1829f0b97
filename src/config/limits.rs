//! The size limits the configuration is validated against, in one place: the layers that
//! enforce them (the stage, the fronts, the bridge) take them from here, so `config`
//! needs nothing from those layers.

/// The largest body a stage holds: one append must fit FoundationDB's 10 MB transaction.
pub const MAX_BODY_SIZE: usize = 8 * 1024 * 1024;

/// The largest message body `amqp.max_message_size` may allow: 128 MiB, RabbitMQ 3's
/// default. A body this large does not fit one transaction; the front keeps it in a spill
/// written in several ([`crate::stage::spill`]).
pub const MAX_MESSAGE_SIZE_LIMIT: u32 = 128 * 1024 * 1024;
