//! What the fuzz targets (`fuzz/`, see `docs/fuzzing.md`) drive that is not public API:
//! each crate's hidden `fuzzing` module (pure decoders and state machines of private
//! modules), gathered here so the targets name one path. Not for Ferry's own code; hidden
//! from the docs.

pub use ferry_amqp::fuzzing::*;
pub use ferry_auth::fuzzing::{user_permissions, user_topic_permission};
pub use ferry_config::fuzzing::config_from_toml;
pub use ferry_kafka::fuzzing::*;
pub use ferry_stage::fuzzing::{DequeueRequest, decode_counter, decode_u64};
