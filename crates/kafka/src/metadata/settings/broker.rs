//! Dynamic broker settings: what AlterConfigs and IncrementalAlterConfigs of a BROKER
//! resource set at runtime, kept in the store (`(P,"k","bconf",…)`, `docs/keyspace.md`) so
//! that every instance over it sees them, as Kafka keeps dynamic broker configs in its
//! metadata.
//!
//! Two scopes, as Kafka's: resource name `""` is the cluster (every instance), a node id
//! is that instance alone, over the cluster's. Any instance may set either; each instance
//! applies the cluster's and its own, refreshed when the change counter moves (at once
//! after a change made here, after the watch fires for one made elsewhere).
//!
//! What a setting does: the broker defaults of topic settings (the `broker` column of
//! [`SETTINGS`]: `log.retention.ms` for `retention.ms`, …) take effect for every topic that
//! does not set its own, over `ferry.toml`'s `[kafka]` values and Kafka's defaults
//! ([`TopicDefaults`]); their values are checked as the topic setting's are. Kafka's
//! dynamic broker settings Ferry has no counterpart of (the inert broker settings of
//! `table`: thread pools, SASL Kerberos, segments, flushing, …) are checked,
//! stored and described with no effect. Any other name is `INVALID_CONFIG`.

use super::table::{self, Kind, SETTINGS, Setting};
use super::{InvalidSetting, TopicConfig, TopicDefaults};
use crate::keys::KafkaKeys;
use ferry_store::{ChangeCounter, Database, RangeOption, StoreError, TransactionError};
use foundationdb_tuple::{pack, unpack};
use parking_lot::RwLock;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// Format version of stored settings.
const FORMAT: u16 = 1;
/// How long the follower waits after a failed watch before watching again.
const RETRY: Duration = Duration::from_secs(1);

/// Whom a dynamic broker setting applies to: a BROKER resource's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// `""`: every instance.
    Cluster,
    /// A node id: that instance alone.
    Broker(i32),
}

impl Scope {
    /// The node id of a broker's scope.
    fn node(self) -> Option<i32> {
        match self {
            Self::Cluster => None,
            Self::Broker(node) => Some(node),
        }
    }
}

/// One scope's settings, by Kafka's name, with their values as checked.
pub(crate) type Settings = BTreeMap<String, String>;

/// What a broker setting Ferry takes is to it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Meaning {
    /// The default of a topic setting (Kafka's synonym): the setting's row.
    TopicDefault(&'static Setting),
    /// A setting taken with no effect: its name and type.
    Inert(&'static str, Kind),
}

impl Meaning {
    /// The setting's name, as Kafka spells it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::TopicDefault(s) => s.broker,
            Self::Inert(name, _) => name,
        }
    }

    /// How Kafka types the setting.
    pub(crate) fn kind(self) -> Kind {
        match self {
            Self::TopicDefault(s) => s.kind,
            Self::Inert(_, kind) => kind,
        }
    }
}

/// What broker setting `key` is to Ferry; `None` for a setting Ferry does not take.
pub(crate) fn meaning(key: &str) -> Option<Meaning> {
    table::synonym(key)
        .map(Meaning::TopicDefault)
        .or_else(|| table::broker_setting(key).map(|(name, kind)| Meaning::Inert(name, kind)))
}

/// Why broker settings could not be changed or read; each maps to a Kafka error code.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BrokerSettingsError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A setting is unknown or its value is invalid.
    #[error("{key}: {message}")]
    InvalidConfig {
        /// The setting.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// A stored value does not decode.
    #[error("the store holds broker settings this ferry cannot decode ({0})")]
    Corrupt(String),
}

impl TransactionError for BrokerSettingsError {
    fn store_error(&self) -> Option<&StoreError> {
        match self {
            Self::Store(e) => Some(e),
            _ => None,
        }
    }
}

impl BrokerSettingsError {
    /// The Kafka error code for an answer.
    pub fn code(&self) -> i16 {
        use kafka_protocol::ResponseError as E;
        match self {
            Self::Store(_) | Self::Corrupt(_) => E::UnknownServerError.code(),
            Self::InvalidConfig { .. } => E::InvalidConfig.code(),
        }
    }

    fn invalid(key: &str, message: impl Into<String>) -> Self {
        Self::InvalidConfig {
            key: key.to_owned(),
            message: message.into(),
        }
    }

    /// A topic setting's refusal, said of broker setting `key`.
    fn of_topic(key: &str, e: InvalidSetting) -> Self {
        Self::invalid(key, e.message)
    }

    /// The refusal of a setting Ferry does not take.
    fn unsupported(key: &str) -> Self {
        let defaults: Vec<&str> = SETTINGS.iter().map(|s| s.broker).collect();
        Self::invalid(
            key,
            format!(
                "is not a broker setting Ferry changes at runtime; it takes {} (the defaults of topics' settings), and Kafka's thread pool, SASL Kerberos, log segment, index, flush, cleaner and replication settings with no effect; the others come from ferry.toml",
                defaults.join(", ")
            ),
        )
    }
}

/// Checks `value` for broker setting `key` as Kafka would.
///
/// # Errors
/// [`BrokerSettingsError::InvalidConfig`] for a setting Ferry does not take or a bad value.
fn check(key: &str, value: &str) -> Result<(), BrokerSettingsError> {
    match meaning(key) {
        Some(Meaning::TopicDefault(s)) => TopicConfig::parse([(s.name, Some(value))])
            .map(drop)
            .map_err(|e| BrokerSettingsError::of_topic(key, e)),
        Some(Meaning::Inert(_, kind)) => kind
            .check(value)
            .map_err(|message| BrokerSettingsError::invalid(key, message)),
        None => Err(BrokerSettingsError::unsupported(key)),
    }
}

/// `settings` with `key` set to `value`, checked (SET; AlterConfigs' pairs).
///
/// # Errors
/// As [`check`].
pub(crate) fn set(
    mut settings: Settings,
    key: &str,
    value: &str,
) -> Result<Settings, BrokerSettingsError> {
    check(key, value)?;
    settings.insert(key.to_owned(), value.trim().to_owned());
    Ok(settings)
}

/// `settings` without `key`, which returns to its default (DELETE).
///
/// # Errors
/// [`BrokerSettingsError::InvalidConfig`] for a setting Ferry does not take.
pub(crate) fn delete(mut settings: Settings, key: &str) -> Result<Settings, BrokerSettingsError> {
    if meaning(key).is_none() {
        return Err(BrokerSettingsError::unsupported(key));
    }
    settings.remove(key);
    Ok(settings)
}

/// `settings` with the items of `items` added to (`append`: APPEND) or taken from
/// (SUBTRACT) list setting `key`, `log.cleanup.policy`; unset, the list is Kafka's default
/// (`delete`), as Kafka edits it.
///
/// # Errors
/// [`BrokerSettingsError::InvalidConfig`] for another setting, an unknown item, or a list
/// left empty.
pub(crate) fn edit_list(
    mut settings: Settings,
    key: &str,
    items: &str,
    append: bool,
) -> Result<Settings, BrokerSettingsError> {
    let Some(list) = table::lists().find(|s| s.broker == key) else {
        let lists: Vec<&str> = table::lists().map(|s| s.broker).collect();
        return Err(BrokerSettingsError::invalid(
            key,
            format!(
                "APPEND and SUBTRACT apply to list settings only ({})",
                lists.join(", ")
            ),
        ));
    };
    let current = settings.get(key).map(String::as_str);
    let policy = TopicConfig::parse([(list.name, current)])
        .and_then(|c| c.edit_list(list.name, items, append))
        .map_err(|e| BrokerSettingsError::of_topic(key, e))?
        .cleanup_policy();
    settings.insert(key.to_owned(), policy.as_str().to_owned());
    Ok(settings)
}

/// The topic settings that `settings` default; a stored value that no longer checks (set
/// by another version of Ferry) is left out.
fn as_topic_config(settings: Option<&Settings>) -> TopicConfig {
    settings
        .into_iter()
        .flatten()
        .filter_map(|(key, value)| match meaning(key)? {
            Meaning::TopicDefault(s) => Some((s.name, value.as_str())),
            Meaning::Inert(..) => None,
        })
        .fold(TopicConfig::default(), |config, (key, value)| {
            config.with([(key, Some(value))]).unwrap_or(config)
        })
}

fn encode(settings: &Settings) -> Vec<u8> {
    let pairs: Vec<(&str, &str)> = settings
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    pack(&(FORMAT, pairs))
}

fn decode(bytes: &[u8]) -> Result<Settings, BrokerSettingsError> {
    let (_, pairs) = unpack::<(u16, Vec<(String, String)>)>(bytes)
        .map_err(|e| BrokerSettingsError::Corrupt(format!("{e:?}")))?;
    Ok(pairs.into_iter().collect())
}

/// The dynamic broker settings as read at one version of their counter.
struct Cached {
    /// The counter when read.
    version: i64,
    /// Every scope's settings.
    by_scope: HashMap<Scope, Settings>,
    /// The topic defaults this instance applies.
    defaults: TopicDefaults,
}

/// The dynamic broker settings of one store, cached, as this instance applies them; cheap
/// to clone.
#[derive(Clone)]
pub struct BrokerSettings {
    /// The store.
    db: Database,
    /// The Kafka keyspace.
    keys: KafkaKeys,
    /// Bumped by every change.
    version: ChangeCounter,
    /// This instance's node id: whose per-broker settings apply here.
    node: i32,
    /// `[kafka]`'s defaults, which the dynamic settings override.
    base: TopicDefaults,
    /// The settings at the newest version read.
    cache: Arc<RwLock<Cached>>,
}

impl BrokerSettings {
    /// The settings of `db` as instance `node` applies them over `base`, read now.
    ///
    /// # Errors
    /// The store's error, or a stored value that does not decode.
    pub async fn start(
        db: Database,
        keys: KafkaKeys,
        node: i32,
        base: TopicDefaults,
    ) -> Result<Self, BrokerSettingsError> {
        let settings = Self {
            db,
            version: ChangeCounter::new(keys.broker_settings_version()),
            keys,
            node,
            base,
            cache: Arc::new(RwLock::new(Cached {
                version: -1,
                by_scope: HashMap::new(),
                defaults: base,
            })),
        };
        settings.refresh().await?;
        Ok(settings)
    }

    /// The topic defaults this instance applies now.
    pub fn topic_defaults(&self) -> TopicDefaults {
        self.cache.read().defaults
    }

    /// The settings of `scope`, as cached.
    pub fn of(&self, scope: Scope) -> Settings {
        self.cache
            .read()
            .by_scope
            .get(&scope)
            .cloned()
            .unwrap_or_default()
    }

    /// Replaces the settings of `scope` with what `change` makes of them, in one store
    /// transaction (only checked when `validate_only`), then reloads the cache so this
    /// instance applies them at once.
    ///
    /// # Errors
    /// `change`'s error, the store's, or a stored value that does not decode.
    pub async fn alter(
        &self,
        scope: Scope,
        change: impl Fn(Settings) -> Result<Settings, BrokerSettingsError>,
        validate_only: bool,
    ) -> Result<(), BrokerSettingsError> {
        let key = &self.keys.broker_settings(scope.node());
        let change = &change;
        self.db
            .run(|tx| async move {
                let current = match tx.get(key, false).await? {
                    Some(bytes) => decode(&bytes)?,
                    None => Settings::new(),
                };
                let changed = change(current)?;
                if !validate_only {
                    if changed.is_empty() {
                        tx.clear(key);
                    } else {
                        tx.set(key, encode(&changed));
                    }
                    self.version.bump(&tx);
                }
                Ok::<_, BrokerSettingsError>(())
            })
            .await?;
        self.refresh().await
    }

    /// Reloads the cache whenever the change counter moves, until `shutdown`.
    pub async fn follow_changes(self, shutdown: CancellationToken) {
        loop {
            let seen = self.cache.read().version;
            let outcome = tokio::select! {
                () = shutdown.cancelled() => return,
                changed = self.version.changed_since(&self.db, seen) => changed,
            };
            let outcome = match outcome {
                Ok(()) => self.refresh().await,
                Err(e) => Err(e.into()),
            };
            if let Err(e) = outcome {
                warn!(error = %e, "following the dynamic broker settings failed; retrying");
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(RETRY) => {}
                }
            }
        }
    }

    /// Reads every scope's settings and makes them the cache, unless the cache holds a
    /// newer version.
    async fn refresh(&self) -> Result<(), BrokerSettingsError> {
        let tx = self.db.begin()?;
        let version = self.version.read_in(&tx).await?;
        let mut by_scope = HashMap::new();
        if let Some(bytes) = tx.get(&self.keys.broker_settings(None), true).await? {
            by_scope.insert(Scope::Cluster, decode(&bytes)?);
        }
        let (b, e) = self.keys.node_settings();
        for kv in tx.get_range(&RangeOption::new(b, e), true).await? {
            let node = self
                .keys
                .node_settings_of(&kv.key)
                .ok_or_else(|| BrokerSettingsError::Corrupt("a broker settings key".into()))?;
            by_scope.insert(Scope::Broker(node), decode(&kv.value)?);
        }
        let defaults = TopicDefaults {
            broker: as_topic_config(by_scope.get(&Scope::Broker(self.node))),
            cluster: as_topic_config(by_scope.get(&Scope::Cluster)),
            ..self.base
        };
        let mut cache = self.cache.write();
        if version >= cache.version {
            *cache = Cached {
                version,
                by_scope,
                defaults,
            };
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_checked_as_the_topic_settings_they_default_and_named_by_their_key() {
        let s = set(Settings::new(), "log.retention.ms", " 5000 ").unwrap();
        assert_eq!(s.get("log.retention.ms").map(String::as_str), Some("5000"));
        assert_eq!(
            set(Settings::new(), "log.retention.ms", "soon")
                .unwrap_err()
                .to_string(),
            "log.retention.ms: 'soon' must be an integer from -1 to 9223372036854775807"
        );
        assert_eq!(
            set(Settings::new(), "log.cleaner.min.cleanable.ratio", "2")
                .unwrap_err()
                .to_string(),
            "log.cleaner.min.cleanable.ratio: '2' must be a number from 0 to 1"
        );
        assert_eq!(
            set(Settings::new(), "background.threads", "0")
                .unwrap_err()
                .to_string(),
            "background.threads: '0' must be an integer of at least 1"
        );
        let refused = set(Settings::new(), "num.partitions", "3").unwrap_err();
        assert_eq!(
            refused.code(),
            kafka_protocol::ResponseError::InvalidConfig.code()
        );
        assert!(
            refused
                .to_string()
                .starts_with("num.partitions: is not a broker setting Ferry changes at runtime; it takes log.retention.ms, "),
            "{refused}"
        );
        assert!(delete(Settings::new(), "num.partitions").is_err());
    }

    #[test]
    fn the_cleanup_policy_list_is_edited_from_kafkas_default() {
        let s = edit_list(Settings::new(), "log.cleanup.policy", "compact", true).unwrap();
        assert_eq!(s["log.cleanup.policy"], "compact,delete");
        let s = edit_list(s, "log.cleanup.policy", "compact", false).unwrap();
        assert_eq!(s["log.cleanup.policy"], "delete");
        assert_eq!(
            edit_list(s.clone(), "log.cleanup.policy", "delete", false)
                .unwrap_err()
                .to_string(),
            "log.cleanup.policy: the items must be delete or compact, and leave at least one"
        );
        assert_eq!(
            edit_list(s, "background.threads", "1", true)
                .unwrap_err()
                .to_string(),
            "background.threads: APPEND and SUBTRACT apply to list settings only (log.cleanup.policy)"
        );
    }

    #[test]
    fn only_the_topic_defaults_become_topic_settings() {
        let s = set(Settings::new(), "log.retention.bytes", "100").unwrap();
        let s = set(s, "log.cleanup.policy", "compact").unwrap();
        let s = set(s, "background.threads", "9").unwrap();
        let config = as_topic_config(Some(&s));
        assert_eq!(config.retention_bytes, Some(100));
        assert_eq!(
            config.cleanup_policy(),
            super::super::CleanupPolicy::Compact
        );
        assert_eq!(config.retention_ms, None);
        assert_eq!(decode(&encode(&s)).unwrap(), s);
    }

    #[tokio::test]
    async fn a_change_made_on_one_instance_reaches_the_other_with_its_scope() {
        let (_dir, db, _) = crate::metadata::topics::tests::fresh_topics().await;
        let keys = KafkaKeys::new("t");
        let base = TopicDefaults::from_config(&ferry_config::KafkaConfig::default());
        let a = BrokerSettings::start(db.clone(), keys.clone(), 0, base)
            .await
            .unwrap();
        let b = BrokerSettings::start(db.clone(), keys, 1, base)
            .await
            .unwrap();
        let following = tokio::spawn(b.clone().follow_changes(CancellationToken::new()));
        let set_to = |value: &'static str| move |s| set(s, "log.retention.ms", value);
        a.alter(Scope::Cluster, set_to("1000"), false)
            .await
            .unwrap();
        a.alter(Scope::Broker(0), set_to("2000"), false)
            .await
            .unwrap();
        a.alter(Scope::Broker(1), set_to("3000"), true)
            .await
            .unwrap();
        let retention =
            |s: &BrokerSettings| s.topic_defaults().retention_ms(&TopicConfig::default());
        assert_eq!(retention(&a), 2000, "its own over the cluster's");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while retention(&b) != 1000 || b.of(Scope::Broker(0)).is_empty() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "b never saw the change"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            b.of(Scope::Broker(1)).is_empty(),
            "validate_only stored nothing"
        );
        assert_eq!(b.of(Scope::Broker(0))["log.retention.ms"], "2000");
        following.abort();
        db.close().await;
    }
}
