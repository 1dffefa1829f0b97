//! The size limits the configuration is validated against, in one place: the layers that
//! enforce them (the fronts, the bridge) take them from here. The stage's own limit is
//! `ferry_stage::MAX_BODY_SIZE`.

/// The largest message body `amqp.max_message_size` may allow: 128 MiB, RabbitMQ 3's
/// default. A body this large does not fit one transaction; the front keeps it in a spill
/// written in several ([`ferry_stage::spill`]).
pub const MAX_MESSAGE_SIZE_LIMIT: u32 = 128 * 1024 * 1024;
