//! A share group's settings (Kafka's group configs of KIP-932): the defaults, the checks of
//! a changed value (IncrementalAlterConfigs on a GROUP resource) and their stored form,
//! `(P,"k","g",group,"sconf")` = `(format, ((name, value), …))` — only the names set.

use foundationdb_tuple::{pack, unpack};
use std::time::Duration;

/// The stored form's format.
const FORMAT: u16 = 1;

/// `share.auto.offset.reset`.
pub(crate) const AUTO_OFFSET_RESET: &str = "share.auto.offset.reset";
/// `share.record.lock.duration.ms`.
pub(crate) const LOCK_DURATION: &str = "share.record.lock.duration.ms";
/// `share.delivery.count.limit`.
pub(crate) const DELIVERY_COUNT_LIMIT: &str = "share.delivery.count.limit";
/// `share.isolation.level`.
pub(crate) const ISOLATION_LEVEL: &str = "share.isolation.level";
/// `share.session.timeout.ms`.
pub(crate) const SESSION_TIMEOUT: &str = "share.session.timeout.ms";
/// `share.heartbeat.interval.ms`.
pub(crate) const HEARTBEAT_INTERVAL: &str = "share.heartbeat.interval.ms";
/// `errors.deadletterqueue.topic.name` (KIP-1191's name): where archived records go.
pub(crate) const DEAD_LETTER_TOPIC: &str = "errors.deadletterqueue.topic.name";

/// Every group setting, with its default, as DescribeConfigs lists them.
pub(crate) const DEFAULTS: &[(&str, &str)] = &[
    (DEAD_LETTER_TOPIC, ""),
    (AUTO_OFFSET_RESET, "latest"),
    (DELIVERY_COUNT_LIMIT, "5"),
    (HEARTBEAT_INTERVAL, "5000"),
    (ISOLATION_LEVEL, "read_uncommitted"),
    (LOCK_DURATION, "30000"),
    (SESSION_TIMEOUT, "45000"),
];

/// Where a new share-partition starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reset {
    /// At the log start offset.
    Earliest,
    /// At the high watermark: records produced before it are not consumed.
    Latest,
}

/// A share group's settings, the defaults where none is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShareConfig {
    /// The names set, with their values (what is stored).
    pub set: Vec<(String, String)>,
    /// `share.auto.offset.reset`.
    pub reset: Reset,
    /// `share.record.lock.duration.ms`.
    pub lock: Duration,
    /// `share.delivery.count.limit`.
    pub delivery_limit: u32,
    /// `share.isolation.level` is `read_committed`.
    pub read_committed: bool,
    /// `share.session.timeout.ms`.
    pub session: Duration,
    /// `share.heartbeat.interval.ms`.
    pub heartbeat: Duration,
    /// `errors.deadletterqueue.topic.name`: the topic archived records are copied to.
    pub dead_letter_topic: Option<String>,
}

impl Default for ShareConfig {
    fn default() -> Self {
        Self::from_set(Vec::new()).expect("the defaults are valid")
    }
}

/// A value that may not be set: the message names the setting.
pub(crate) type Invalid = String;

impl ShareConfig {
    /// The settings `set` makes (the defaults for the rest).
    ///
    /// # Errors
    /// A message naming the setting that is unknown or has an invalid value.
    pub(crate) fn from_set(set: Vec<(String, String)>) -> Result<Self, Invalid> {
        let mut config = Self {
            set: Vec::new(),
            reset: Reset::Latest,
            lock: Duration::from_secs(30),
            delivery_limit: 5,
            read_committed: false,
            session: Duration::from_secs(45),
            heartbeat: Duration::from_secs(5),
            dead_letter_topic: None,
        };
        for (name, value) in &set {
            config.apply(name, value)?;
        }
        config.set = set;
        Ok(config)
    }

    fn apply(&mut self, name: &str, value: &str) -> Result<(), Invalid> {
        let millis = |min: u64, max: u64| -> Result<Duration, Invalid> {
            match value.parse::<u64>() {
                Ok(ms) if (min..=max).contains(&ms) => Ok(Duration::from_millis(ms)),
                _ => Err(format!(
                    "Invalid value {value} for configuration {name}: must be a number of milliseconds from {min} to {max}"
                )),
            }
        };
        match name {
            AUTO_OFFSET_RESET => {
                self.reset = match value {
                    "earliest" => Reset::Earliest,
                    "latest" => Reset::Latest,
                    _ => {
                        return Err(format!(
                            "Invalid value {value} for configuration {name}: must be earliest or latest"
                        ));
                    }
                };
            }
            LOCK_DURATION => self.lock = millis(1_000, 3_600_000)?,
            SESSION_TIMEOUT => self.session = millis(1_000, 3_600_000)?,
            HEARTBEAT_INTERVAL => self.heartbeat = millis(100, 3_600_000)?,
            DELIVERY_COUNT_LIMIT => {
                self.delivery_limit = match value.parse::<u32>() {
                    Ok(n) if (2..=10).contains(&n) => n,
                    _ => {
                        return Err(format!(
                            "Invalid value {value} for configuration {name}: must be from 2 to 10"
                        ));
                    }
                };
            }
            ISOLATION_LEVEL => {
                self.read_committed = match value {
                    "read_committed" => true,
                    "read_uncommitted" => false,
                    _ => {
                        return Err(format!(
                            "Invalid value {value} for configuration {name}: must be read_committed or read_uncommitted"
                        ));
                    }
                };
            }
            DEAD_LETTER_TOPIC => {
                self.dead_letter_topic = (!value.is_empty()).then(|| value.to_owned());
            }
            _ => return Err(format!("Unknown group config name: {name}")),
        }
        Ok(())
    }

    /// These settings with `name` set to `value` (`None`: back to its default).
    ///
    /// # Errors
    /// As [`Self::from_set`].
    pub(crate) fn with(&self, name: &str, value: Option<&str>) -> Result<Self, Invalid> {
        let mut set: Vec<(String, String)> = self
            .set
            .iter()
            .filter(|(n, _)| n != name)
            .cloned()
            .collect();
        if !DEFAULTS.iter().any(|(n, _)| *n == name) {
            return Err(format!("Unknown group config name: {name}"));
        }
        if let Some(value) = value {
            set.push((name.to_owned(), value.to_owned()));
        }
        Self::from_set(set)
    }

    /// Every setting with its value and whether it is the default, sorted by name.
    pub(crate) fn describe(&self) -> Vec<(&'static str, String, bool)> {
        DEFAULTS
            .iter()
            .map(
                |(name, default)| match self.set.iter().find(|(n, _)| n == name) {
                    Some((_, v)) => (*name, v.clone(), false),
                    None => (*name, (*default).to_owned(), true),
                },
            )
            .collect()
    }

    /// The stored form.
    pub(crate) fn encode(&self) -> Vec<u8> {
        pack(&(FORMAT, self.set.clone()))
    }

    /// Decodes the stored form (the defaults for what does not decode: the group still
    /// works).
    pub(crate) fn decode(bytes: &[u8]) -> Self {
        unpack::<(u16, Vec<(String, String)>)>(bytes)
            .ok()
            .and_then(|(_, set)| Self::from_set(set).ok())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_checked_and_kept() {
        let c = ShareConfig::default()
            .with(AUTO_OFFSET_RESET, Some("earliest"))
            .unwrap()
            .with(LOCK_DURATION, Some("2000"))
            .unwrap();
        assert_eq!(c.reset, Reset::Earliest);
        assert_eq!(c.lock, Duration::from_secs(2));
        assert_eq!(ShareConfig::decode(&c.encode()), c);
        let back = c.with(LOCK_DURATION, None).unwrap();
        assert_eq!(back.lock, Duration::from_secs(30));
        assert!(
            c.with(DELIVERY_COUNT_LIMIT, Some("1"))
                .unwrap_err()
                .contains(DELIVERY_COUNT_LIMIT)
        );
        assert!(c.with("share.nope", Some("1")).is_err());
        let described = back.describe();
        assert!(described.contains(&(AUTO_OFFSET_RESET, "earliest".to_owned(), false)));
        assert!(described.contains(&(LOCK_DURATION, "30000".to_owned(), true)));
    }
}
