//! Messages into queues: a channel's publishes, group-committed with confirms and
//! transactions ([`publish`]); storing into queues with their TTL, priority and length
//! rules, inside a caller's transaction ([`enqueue`]); `x-delayed-message` exchanges
//! ([`delayed`]); the dead-letter router ([`dead_letter`]); confirms held until the
//! connection's own consumers delivered what they confirm ([`confirm_order`]).

pub(crate) mod confirm_order;
pub(crate) mod dead_letter;
pub(crate) mod delayed;
pub(crate) mod enqueue;
pub(crate) mod publish;
