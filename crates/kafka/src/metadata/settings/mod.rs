//! The settings of topics and brokers: one table of the topic settings Ferry implements
//! ([`SETTINGS`], beside the settings taken with no effect: `table`), what a topic sets
//! ([`TopicConfig`]) and how Kafka's (name, value) pairs set it (`apply`, refusing with an
//! [`InvalidSetting`]), the values of settings (`value`, `choices`), their layered defaults
//! ([`TopicDefaults`]) and the dynamic broker settings kept in the store ([`broker`]).
//! Below `topics`: a refused setting is an [`InvalidSetting`], which a topic operation
//! reports as its `TopicError::InvalidConfig`.
//!
//! Everything about a setting but what it does is derived from its row: how a value is
//! parsed and checked (and the refusal's wording), the list of supported settings in
//! `INVALID_CONFIG`, its broker synonym (taken by AlterConfigs of a broker, checked as the
//! topic setting, applied as the topic's default), the layering, and DescribeConfigs.
//!
//! Adding a topic setting takes:
//! 1. its field in [`TopicConfig`], an `Option` (`None`: unset);
//! 2. its row in [`SETTINGS`]: Kafka's name, the broker synonym, the `[kafka]` key if
//!    `ferry.toml` sets its default (then [`TopicDefaults::from_config`] reads that key, a
//!    test checks both agree), its [`Kind`] for describing it, and its [`Value`]: the type
//!    (an integer's range), the field (`at: |c| &mut c.the_field`) and Kafka's default.
//!    A value of a new type (a new word list, say) needs a variant of [`Value`] and the
//!    type beside those of `choices`;
//! 3. to keep it across restarts, a new format of the topic's stored value
//!    ([`crate::metadata::topics::TopicMeta`]: a fixed tuple per format, the older
//!    formats still decoded);
//! 4. and what it does: the partition log reads the field (through an accessor on
//!    [`TopicConfig`] that applies Kafka's default, or [`TopicDefaults`] for the value
//!    layered over the broker's).

mod apply;
pub(crate) mod broker;
mod choices;
mod defaults;
mod table;
mod topic_config;
mod value;

pub use apply::InvalidSetting;
pub(crate) use choices::CleanupPolicy;
pub use choices::{CompressionType, TimestampType};
pub(crate) use defaults::{Layer, TopicDefaults};
pub(crate) use table::{Kind, SETTINGS, Setting};
pub use topic_config::TopicConfig;
