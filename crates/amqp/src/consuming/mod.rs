//! Messages out of queues: a channel's consumers, basic.get, direct reply-to consumers,
//! consumer timeouts and batched acknowledgements ([`consumers`]); settling deliveries in
//! a store transaction ([`settle`]); single active consumer ([`sac`]).

pub(crate) mod consumers;
pub(crate) mod sac;
pub(crate) mod settle;
