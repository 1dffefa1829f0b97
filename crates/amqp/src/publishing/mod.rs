//! Messages into queues: a channel's publishes, group-committed with confirms and
//! transactions ([`publish`]); storing into queues with their TTL, priority and length
//! rules, inside a caller's transaction ([`enqueue`]); `x-delayed-message` exchanges
//! ([`delayed`]); the dead-letter router ([`dead_letter`]).

pub mod dead_letter;
pub mod delayed;
pub mod enqueue;
pub mod publish;
