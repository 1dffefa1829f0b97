//! The coordinators: consumer groups of both protocols ([`groups`]) and transactions
//! ([`transactions`]).

pub mod groups;
pub mod transactions;
