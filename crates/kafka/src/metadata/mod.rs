//! What the cluster knows of itself: the topics, stored and cached ([`topics`]), the
//! settings of topics and brokers in one table, with the dynamic broker settings
//! ([`settings`]), manual replica assignments ([`replica_assignment`]), the live
//! brokers ([`brokers`]) and this instance's one log directory ([`log_dir`]).

pub(crate) mod brokers;
pub(crate) mod log_dir;
pub(crate) mod replica_assignment;
pub(crate) mod settings;
pub(crate) mod topics;
