//! The value column of the settings table ([`Value`]): how a setting's value is read from
//! Kafka's text and checked, where [`TopicConfig`] keeps it ([`Field`]), and how
//! DescribeConfigs spells it. A refusal is the sentence `'<value>' must be <what>`, which
//! the caller prefixes with the setting's name.

use super::choices::{CleanupPolicy, CompressionType, TimestampType};
use super::topic_config::{RATIO_ONE, TopicConfig, ratio};

/// Where [`TopicConfig`] keeps a setting's value, and Kafka's default of it.
#[derive(Debug, Clone, Copy)]
pub struct Field<T: 'static> {
    /// The field of [`TopicConfig`] that holds the value (`None`: unset).
    pub at: fn(&mut TopicConfig) -> &mut Option<T>,
    /// Kafka's default: the value when neither the topic, the dynamic broker settings nor
    /// `[kafka]` set it.
    pub default: T,
}

impl<T: Copy> Field<T> {
    /// The value `config` sets, if it does.
    fn get(self, config: &TopicConfig) -> Option<T> {
        let mut config = *config;
        *(self.at)(&mut config)
    }

    /// The value `config` sets, else Kafka's default.
    fn value(self, config: &TopicConfig) -> T {
        self.get(config).unwrap_or(self.default)
    }

    /// Takes `from`'s value into `config` when `config` does not set one.
    fn inherit(self, config: &mut TopicConfig, from: &TopicConfig) {
        let from = self.get(from);
        let slot = (self.at)(config);
        if slot.is_none() {
            *slot = from;
        }
    }

    /// Sets `config`'s value to `text` as `parse` reads it (`None`: unset).
    ///
    /// # Errors
    /// `'<text>' must be <expected>` when `parse` refuses it.
    fn set(
        self,
        config: &mut TopicConfig,
        text: Option<&str>,
        parse: impl Fn(&str) -> Option<T>,
        expected: impl FnOnce() -> String,
    ) -> Result<(), String> {
        *(self.at)(config) = match text {
            Some(v) => Some(parse(v).ok_or_else(|| format!("'{v}' must be {}", expected()))?),
            None => None,
        };
        Ok(())
    }
}

/// How a setting's values are read, checked, kept and spelled: one variant per type of
/// value, each with the [`Field`] that keeps it.
#[derive(Debug, Clone, Copy)]
pub enum Value {
    /// An integer from `min` to `max`.
    Integer {
        /// The least value taken.
        min: i64,
        /// The greatest value taken.
        max: i64,
        /// Where it is kept.
        field: Field<i64>,
    },
    /// A share from 0 to 1, kept in ten-thousandths (0.5 is 5000).
    Ratio(Field<u16>),
    /// `delete`, `compact`, or both: [`CleanupPolicy`].
    CleanupPolicy(Field<CleanupPolicy>),
    /// `CreateTime` or `LogAppendTime`: [`TimestampType`].
    TimestampType(Field<TimestampType>),
    /// A codec, or `producer`: [`CompressionType`].
    CompressionType(Field<CompressionType>),
}

/// `$body` with `$field` bound to `$value`'s [`Field`], whatever the type it keeps.
macro_rules! with_field {
    ($value:expr, $field:ident => $body:expr) => {
        match $value {
            Value::Integer { field: $field, .. } => $body,
            Value::Ratio($field) => $body,
            Value::CleanupPolicy($field) => $body,
            Value::TimestampType($field) => $body,
            Value::CompressionType($field) => $body,
        }
    };
}

impl Value {
    /// Sets the setting in `config` to `text`, checked (`None`: unset, its default).
    ///
    /// # Errors
    /// What the value must be, without the setting's name.
    pub fn set(self, config: &mut TopicConfig, text: Option<&str>) -> Result<(), String> {
        match self {
            Self::Integer { min, max, field } => field.set(
                config,
                text,
                |v| v.trim().parse().ok().filter(|n| (min..=max).contains(n)),
                || format!("an integer from {min} to {max}"),
            ),
            Self::Ratio(field) => field.set(
                config,
                text,
                |v| {
                    v.trim()
                        .parse::<f64>()
                        .ok()
                        .filter(|r| (0.0..=1.0).contains(r))
                        .map(|r| (r * f64::from(RATIO_ONE)).round() as u16)
                },
                || "a number from 0 to 1".into(),
            ),
            Self::CleanupPolicy(field) => field.set(config, text, CleanupPolicy::parse, || {
                "delete, compact, or compact,delete".into()
            }),
            Self::TimestampType(field) => field.set(config, text, TimestampType::parse, || {
                "CreateTime or LogAppendTime".into()
            }),
            Self::CompressionType(field) => field.set(config, text, CompressionType::parse, || {
                "producer, uncompressed, gzip, snappy, lz4 or zstd".into()
            }),
        }
    }

    /// Whether `config` sets the setting.
    pub fn is_set(self, config: &TopicConfig) -> bool {
        with_field!(self, field => field.get(config).is_some())
    }

    /// Takes `from`'s value of the setting into `config` when `config` does not set it.
    pub fn inherit(self, config: &mut TopicConfig, from: &TopicConfig) {
        with_field!(self, field => field.inherit(config, from));
    }

    /// The setting's value in `config` (else Kafka's default), as Kafka spells it.
    pub fn describe(self, config: &TopicConfig) -> String {
        match self {
            Self::Integer { field, .. } => field.value(config).to_string(),
            Self::Ratio(field) => ratio(field.value(config)).to_string(),
            Self::CleanupPolicy(field) => field.value(config).as_str().into(),
            Self::TimestampType(field) => field.value(config).as_str().into(),
            Self::CompressionType(field) => field.value(config).as_str().into(),
        }
    }
}
