//! What the cluster knows of itself: the topics, stored and cached ([`topics`]), the
//! settings of topics and brokers in one table, with the dynamic broker settings
//! ([`settings`]), manual replica assignments ([`replica_assignment`]) and the live
//! brokers ([`brokers`]).

pub(crate) mod brokers;
pub(crate) mod replica_assignment;
pub(crate) mod settings;
pub(crate) mod topics;
