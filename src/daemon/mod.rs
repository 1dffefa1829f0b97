//! The daemon (skeleton).
