//! The coordinators: consumer groups of both protocols ([`groups`]), transactions
//! ([`transactions`]) and idempotent producers' ids and sequences ([`producers`]).

pub mod groups;
pub mod producers;
pub mod transactions;
