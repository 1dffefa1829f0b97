//! The coordinators: consumer groups of both protocols ([`groups`]) and transactions
//! ([`transactions`]).

pub(crate) mod groups;
pub(crate) mod transactions;
