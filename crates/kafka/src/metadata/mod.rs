//! What the cluster knows of itself: topics with their settings and cache ([`topics`]),
//! the settings' stored values ([`format_settings`]) and those accepted without effect
//! ([`inert_settings`]), manual replica assignments ([`replica_assignment`]), the live
//! brokers ([`brokers`]) and the dynamic broker settings ([`broker_settings`]).

pub mod broker_settings;
pub mod brokers;
pub mod format_settings;
pub mod inert_settings;
pub mod replica_assignment;
pub mod topics;
