//! The stage registry: stages by name, their settings, the schema version, and the stage
//! metrics.

use super::error::StageError;
use super::keys::{Counter, RootKeys, SCHEMA_VERSION};
use super::record::{StageMeta, decode_counter, decode_u64, encode_u64};
use super::spill::{self, Spills};
use super::{DeadLetterTarget, Stage};
use crate::incarnation::Owner;
use ferry_store::{Database, RangeOption, StoreError, Transaction};
use ferry_telemetry::names;
use std::sync::Arc;

/// Settings for a new stage.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StageOptions {
    /// The highest priority the stage distinguishes (AMQP `x-max-priority`); 0: one lane.
    pub max_priority: u8,
    /// Deliveries after which a returned message is dead-lettered; 0: no limit.
    pub max_deliveries: u32,
    /// The stage dead-lettered messages move to (it must exist); `None`: they are dropped.
    pub dead_letter: Option<String>,
}

/// Every stage in one store; cheap to clone.
#[derive(Clone)]
pub struct Stages {
    db: Database,
    root: RootKeys,
    /// The instance incarnation the lease holders registered through this handle belong to.
    owner: Option<Owner>,
}

impl Stages {
    /// The stages under the key prefix `prefix`, their lease holders registered without an
    /// owner (freed at a start only in a store of one instance).
    pub fn new(db: Database, prefix: &str) -> Self {
        Self {
            db,
            root: RootKeys::new(prefix),
            owner: None,
        }
    }

    /// The same stages, lease holders registered through them belonging to `owner`, so a
    /// later incarnation of the same instance frees them at its start.
    pub fn owned_by(self, owner: Owner) -> Self {
        Self {
            owner: Some(owner),
            ..self
        }
    }

    /// The incarnation lease holders registered through this handle belong to.
    pub fn owner(&self) -> Option<Owner> {
        self.owner
    }

    /// The keyspace root.
    pub fn root(&self) -> &RootKeys {
        &self.root
    }

    /// The store.
    pub fn db(&self) -> &Database {
        &self.db
    }

    /// The spills of large messages in these stages.
    pub fn spills(&self) -> Spills {
        Spills::new(self.db.clone(), self.root.clone())
    }

    /// Records the schema version in a new keyspace, or checks an existing one: a keyspace
    /// of this schema is opened (and this Ferry's version recorded as its last writer),
    /// one of a newer schema refused naming both versions and the Ferry that wrote it.
    /// Record formats change within a schema by versioned values every reader decodes
    /// (docs/keyspace.md); the schema version changes only for a layout an older Ferry
    /// would misread.
    ///
    /// # Errors
    /// [`StageError::NewerSchema`]; [`StageError::Corrupt`] for an older schema, which
    /// no Ferry since 0.1.0 writes.
    pub async fn ensure_schema(&self) -> Result<(), StageError> {
        let (key, writer) = (self.root.schema(), self.root.schema_writer());
        let this = env!("CARGO_PKG_VERSION");
        self.db
            .run(|tx| {
                let (key, writer) = (key.clone(), writer.clone());
                async move {
                    let found = match tx.get(&key, false).await? {
                        None => SCHEMA_VERSION as u64,
                        Some(v) => decode_u64(&v)?,
                    };
                    if found > SCHEMA_VERSION as u64 {
                        let written_by = tx.get(&writer, true).await?.map_or_else(
                            || "of an unknown version".to_owned(),
                            |v| String::from_utf8_lossy(&v).into_owned(),
                        );
                        return Err(StageError::NewerSchema {
                            found,
                            written_by,
                            reads: SCHEMA_VERSION as u64,
                            this,
                        });
                    }
                    if found < SCHEMA_VERSION as u64 {
                        return Err(StageError::Corrupt(format!(
                            "keyspace schema version {found} (this ferry uses {SCHEMA_VERSION})"
                        )));
                    }
                    tx.set(&key, encode_u64(SCHEMA_VERSION as u64));
                    tx.set(&writer, this.as_bytes().to_vec());
                    Ok(())
                }
            })
            .await
    }

    /// Creates stage `name`, or opens it if it exists with the same settings.
    ///
    /// # Errors
    /// [`StageError::Inequivalent`] when it exists with other settings,
    /// [`StageError::NoDeadLetterStage`] when the dead-letter stage does not exist.
    pub async fn create(&self, name: &str, options: &StageOptions) -> Result<Stage, StageError> {
        let (id, meta) = self
            .db
            .run(|tx| async move { self.create_in(&tx, name, options).await })
            .await?;
        self.load(id, meta).await
    }

    /// [`Stages::create`] within `tx`, so a layer above can create stages together with
    /// its own records; returns the stage's id and settings ([`Stages::open`] it after
    /// the commit).
    ///
    /// # Errors
    /// As [`Stages::create`].
    pub async fn create_in(
        &self,
        tx: &Transaction,
        name: &str,
        options: &StageOptions,
    ) -> Result<(u64, StageMeta), StageError> {
        let dead_letter = match &options.dead_letter {
            None => None,
            Some(dl) => Some(
                self.id_in(tx, dl)
                    .await?
                    .ok_or_else(|| StageError::NoDeadLetterStage(dl.clone()))?,
            ),
        };
        let wanted = StageMeta {
            name: name.to_owned(),
            max_priority: options.max_priority,
            max_deliveries: options.max_deliveries,
            dead_letter,
        };
        if let Some(id) = self.id_in(tx, name).await? {
            let existing = self.meta_in(tx, id).await?;
            if existing != wanted {
                return Err(StageError::Inequivalent {
                    name: name.to_owned(),
                    existing: format!(
                        "max_priority {}, max_deliveries {}, dead_letter {:?}",
                        existing.max_priority, existing.max_deliveries, existing.dead_letter
                    ),
                });
            }
            return Ok((id, existing));
        }
        let next_key = self.root.next_stage_id();
        let id = match tx.get(&next_key, false).await? {
            Some(v) => decode_u64(&v)?,
            None => 1,
        };
        tx.set(&next_key, encode_u64(id + 1));
        tx.set(&self.root.stage_by_name(name), encode_u64(id));
        tx.set(&self.root.stage_meta(id), wanted.encode());
        Ok((id, wanted))
    }

    /// Opens stage `name`.
    ///
    /// # Errors
    /// [`StageError::NotFound`] when there is no such stage.
    pub async fn open(&self, name: &str) -> Result<Stage, StageError> {
        let tx = self.db.begin()?;
        let id = self
            .id_in(&tx, name)
            .await?
            .ok_or_else(|| StageError::NotFound(name.to_owned()))?;
        let meta = self.meta_in(&tx, id).await?;
        self.load(id, meta).await
    }

    /// Sets stage `name`'s delivery limit (0: none): messages returned after that many
    /// deliveries are dead-lettered from now on. Handles opened before keep the limit they
    /// read; open the stage again to apply it.
    ///
    /// # Errors
    /// [`StageError::NotFound`] when there is no such stage; the store's error.
    pub async fn set_max_deliveries(&self, name: &str, max: u32) -> Result<(), StageError> {
        self.db
            .run(|tx| async move {
                let id = self
                    .id_in(&tx, name)
                    .await?
                    .ok_or_else(|| StageError::NotFound(name.to_owned()))?;
                let meta = StageMeta {
                    max_deliveries: max,
                    ..self.meta_in(&tx, id).await?
                };
                tx.set(&self.root.stage_meta(id), meta.encode());
                Ok::<_, StageError>(())
            })
            .await
    }

    /// Opens the stage with id `id`, if it exists.
    ///
    /// # Errors
    /// The store's error.
    pub async fn open_id(&self, id: u64) -> Result<Option<Stage>, StageError> {
        let tx = self.db.begin()?;
        match tx.get(&self.root.stage_meta(id), true).await? {
            Some(v) => Ok(Some(self.load(id, StageMeta::decode(&v)?).await?)),
            None => Ok(None),
        }
    }

    /// Deletes stage `name` and every message in it. Returns whether it existed.
    ///
    /// # Errors
    /// The store's error.
    pub async fn delete(&self, name: &str) -> Result<bool, StageError> {
        self.db
            .run(|tx| async move { self.delete_in(&tx, name).await })
            .await
    }

    /// [`Stages::delete`] within `tx`, so a layer above can delete a stage together with
    /// its own records.
    ///
    /// # Errors
    /// The store's error.
    pub async fn delete_in(&self, tx: &Transaction, name: &str) -> Result<bool, StageError> {
        let Some(id) = self.id_in(tx, name).await? else {
            return Ok(false);
        };
        let keys = self.root.stage(id);
        // Its messages' references to spills go with them.
        let (b, e) = keys.spill_refs();
        for kv in tx.get_range(&RangeOption::new(b, e), false).await? {
            spill::drop_ref_in(tx, &self.root, decode_u64(&kv.value)?);
        }
        let (b, e) = keys.all();
        tx.clear_range(&b, &e);
        tx.clear(&self.root.stage_meta(id));
        tx.clear(&self.root.stage_by_name(name));
        Ok(true)
    }

    /// The names of every stage, sorted.
    ///
    /// # Errors
    /// The store's error.
    pub async fn list(&self) -> Result<Vec<(String, u64)>, StageError> {
        let tx = self.db.begin()?;
        let (b, e) = self.root.stage_names();
        let kvs = tx.get_range(&RangeOption::new(b, e), true).await?;
        let mut out = Vec::with_capacity(kvs.len());
        for kv in kvs {
            let id = decode_u64(&kv.value)?;
            out.push((self.meta_in(&tx, id).await?.name, id));
        }
        Ok(out)
    }

    /// Reads every stage's counters and sets the `ferry_stage_*` metrics.
    ///
    /// # Errors
    /// The store's error when the counters cannot be read.
    pub async fn publish_metrics(&self) -> Result<(), StoreError> {
        let stages = self.list().await.map_err(into_store_error)?;
        let tx = self.db.begin()?;
        for (name, id) in stages {
            let keys = self.root.stage(id);
            let read = |c| {
                let key = keys.counter(c);
                let tx = tx.clone();
                async move { Ok::<_, StoreError>(decode_counter(tx.get(&key, true).await?.as_deref())) }
            };
            let pushed = read(Counter::Push).await?;
            let popped = read(Counter::Pop).await?;
            let in_flight = read(Counter::InFlight).await?;
            let dead = read(Counter::DeadLettered).await?;
            let dups = read(Counter::Duplicates).await?;
            let label = || [(names::LABEL_STAGE, name.clone())];
            metrics::gauge!(names::STAGE_READY, &label()).set((pushed - popped - in_flight) as f64);
            metrics::gauge!(names::STAGE_IN_FLIGHT, &label()).set(in_flight as f64);
            metrics::counter!(names::STAGE_PUSHED_TOTAL, &label()).absolute(pushed as u64);
            metrics::counter!(names::STAGE_POPPED_TOTAL, &label()).absolute(popped as u64);
            metrics::counter!(names::STAGE_DEAD_LETTERED_TOTAL, &label()).absolute(dead as u64);
            metrics::counter!(names::STAGE_DUPLICATES_TOTAL, &label()).absolute(dups as u64);
        }
        Ok(())
    }

    async fn id_in(&self, tx: &Transaction, name: &str) -> Result<Option<u64>, StageError> {
        match tx.get(&self.root.stage_by_name(name), false).await? {
            Some(v) => Ok(Some(decode_u64(&v)?)),
            None => Ok(None),
        }
    }

    async fn meta_in(&self, tx: &Transaction, id: u64) -> Result<StageMeta, StageError> {
        let v = tx
            .get(&self.root.stage_meta(id), false)
            .await?
            .ok_or_else(|| StageError::Corrupt(format!("stage {id} has a name but no metadata")))?;
        StageMeta::decode(&v)
    }

    /// Builds a [`Stage`], resolving its dead-letter stage.
    async fn load(&self, id: u64, meta: StageMeta) -> Result<Stage, StageError> {
        let dead_letter = match meta.dead_letter {
            None => None,
            Some(dl) => {
                let tx = self.db.begin()?;
                let dl_meta = self.meta_in(&tx, dl).await?;
                Some(DeadLetterTarget {
                    keys: self.root.stage(dl),
                    max_priority: dl_meta.max_priority,
                })
            }
        };
        Ok(Stage {
            db: self.db.clone(),
            root: self.root.clone(),
            keys: self.root.stage(id),
            meta: Arc::new(meta),
            dead_letter,
        })
    }
}

fn into_store_error(e: StageError) -> StoreError {
    match e {
        StageError::Store(s) => s,
        other => StoreError::Storage(other.to_string()),
    }
}
