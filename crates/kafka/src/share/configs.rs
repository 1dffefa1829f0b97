//! A share group's settings (its group configs, [`super::config`]): loaded once by the
//! instance that uses the group, stored by IncrementalAlterConfigs with a bump of a change
//! counter, and reloaded by every instance when that counter moves — so a changed lock
//! duration, delivery limit or isolation level applies on every instance over the store,
//! and a group deleted on one is forgotten by the others.

use super::Group;
use super::ShareGroups;
use super::config::ShareConfig;
use super::partition::ShareError;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// How long to wait before watching the counter again after a failure.
const RETRY: Duration = Duration::from_secs(1);

impl ShareGroups {
    /// `group`'s settings, without making the group one this instance knows, as
    /// [`ShareGroups::config`] does: ShareGroupDescribe to an instance not serving the
    /// group would then describe an empty group rather than answer `GROUP_ID_NOT_FOUND`.
    pub(crate) async fn stored_config(&self, group: &str) -> Result<ShareConfig, ShareError> {
        if let Some(g) = self.inner.groups.lock().get(group) {
            return Ok(g.config.clone());
        }
        let key = self.inner.keys.group(group).share_config();
        let stored = self.stored(&key).await?;
        Ok(stored.map(|v| ShareConfig::decode(&v)).unwrap_or_default())
    }

    /// Makes `group` one this instance knows, its settings loaded from the store the first
    /// time; returns them.
    ///
    /// # Errors
    /// The store's error.
    pub(crate) async fn config(&self, group: &str) -> Result<ShareConfig, ShareError> {
        let stored = self.stored_config(group).await?;
        Ok(self.known(group, stored).config.clone())
    }

    /// `group` as this instance knows it, made known with `config` when it is not (again:
    /// [`Self::reload_configs`] forgets a member-less group deleted meanwhile, at any
    /// moment between a caller's load and its use).
    pub(super) fn known(
        &self,
        group: &str,
        config: ShareConfig,
    ) -> parking_lot::MappedMutexGuard<'_, Group> {
        parking_lot::MutexGuard::map(self.inner.groups.lock(), |groups| {
            groups.entry(group.to_owned()).or_insert_with(|| Group {
                config,
                ..Group::default()
            })
        })
    }

    /// Stores `config` as `group`'s settings.
    ///
    /// # Errors
    /// The store's error.
    pub(crate) async fn set_config(
        &self,
        group: &str,
        config: ShareConfig,
    ) -> Result<(), ShareError> {
        let (key, value) = (self.inner.keys.group(group).share_config(), config.encode());
        self.inner
            .db
            .run(|tx| {
                let (key, value) = (&key, &value);
                async move {
                    tx.set(key, value.clone());
                    self.inner.configs_version.bump(&tx);
                    Ok::<_, ShareError>(())
                }
            })
            .await?;
        // Read back as every instance reads a change (not set here: a reload that read
        // the store before this change could otherwise finish after it and undo it).
        drop(self.known(group, config));
        if let Err(e) = self.reload_configs().await {
            // Stored all the same: the follower reads it on its next round.
            warn!(group, error = %e, "cannot read back a share group's new settings");
        }
        // Opened again on next use, with the delivery limit as now set.
        self.inner.partitions.lock().retain(|(g, _), _| g != group);
        Ok(())
    }

    /// Reloads the settings of every group this instance knows whenever any instance
    /// changes a group's settings or deletes a group, until `shutdown`.
    pub(crate) async fn follow_configs(self, shutdown: CancellationToken) {
        let mut seen = 0;
        loop {
            let outcome = tokio::select! {
                () = shutdown.cancelled() => return,
                changed = self.inner.configs_version.changed_since(&self.inner.db, seen) => changed,
            };
            let outcome = match outcome {
                Ok(()) => self.reload_configs().await,
                Err(e) => Err(e.into()),
            };
            match outcome {
                Ok(version) => seen = version,
                Err(e) => {
                    warn!(error = %e, "following the share groups' settings failed; retrying");
                    tokio::select! {
                        () = shutdown.cancelled() => return,
                        () = tokio::time::sleep(RETRY) => {}
                    }
                }
            }
        }
    }

    /// Reads the settings of every group this instance knows: a changed group's
    /// share-partitions are opened again (with the delivery limit as now set); a group
    /// deleted meanwhile (no longer recorded) with no members here is forgotten. Returns
    /// the counter it read them at.
    async fn reload_configs(&self) -> Result<i64, ShareError> {
        let _one_at_a_time = self.inner.reloading.lock().await;
        let tx = self.inner.db.begin()?;
        let version = self.inner.configs_version.read_in(&tx).await?;
        let names: Vec<String> = self.inner.groups.lock().keys().cloned().collect();
        for group in names {
            let keys = self.inner.keys.group(&group);
            let recorded = tx.get(&keys.share_meta(), true).await?.is_some();
            let stored = tx.get(&keys.share_config(), true).await?;
            let config = stored.map(|v| ShareConfig::decode(&v)).unwrap_or_default();
            let reopen = {
                let mut groups = self.inner.groups.lock();
                let Some(g) = groups.get_mut(&group) else {
                    continue;
                };
                if !recorded && g.members.members.is_empty() {
                    groups.remove(&group);
                    true
                } else if g.config == config {
                    false
                } else {
                    g.config = config;
                    true
                }
            };
            if reopen {
                self.inner.partitions.lock().retain(|(g, _), _| *g != group);
            }
        }
        Ok(version)
    }
}
