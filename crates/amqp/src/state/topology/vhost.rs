//! A virtual host: its topology in memory and the operations that change it.
//!
//! Changes are serialized by one lock per virtual host and follow one order: check
//! against the current topology (and the user's permissions, in RabbitMQ's order, through
//! [`Authorize`]), commit to the store, then change memory. A reload from
//! the store (at startup, and whenever the version key changes) takes the same lock.

use super::args::{QueueArgs, decode_table, encode_table};
use super::exchange::{Exchange, RESERVED_PREFIX};
use super::queue::{Queue, QueueSpec};
use super::records::{self, QueueRecord, TopologyKeys};
use super::routing::{Binding, Destination};
use super::{Removal, Topology};
use crate::authorize::Authorize;
use crate::wire::errors::{AmqpError, TxError};
use base64::Engine as _;
use ferry_auth::access::Resource;
use ferry_auth::permissions::Access;
use ferry_stage::{Holders, Spills, StageError, StageOptions, Stages, now_ms};
use ferry_store::{Database, RangeOption, Transaction};
use ferry_telemetry::amqp as metric;
use ferry_telemetry::compat::rabbitmq::state as rabbitmq;
use parking_lot::{RwLock, RwLockReadGuard};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use tokio::sync::mpsc::UnboundedSender;
use tracing::warn;

mod declarations;

pub use declarations::{Declarations, PlannedDeclarations};

/// One virtual host.
pub struct VHost {
    /// Its name.
    pub name: String,
    /// The store.
    db: Database,
    /// The stages queues live in.
    stages: Stages,
    /// The front's keys.
    keys: TopologyKeys,
    /// The topology routing reads.
    state: RwLock<Topology>,
    /// Serializes changes and reloads.
    changes: tokio::sync::Mutex<()>,
    /// Told of every queue this instance opens, so its background tasks (dead-letter
    /// router, `x-expires`) start.
    opened: UnboundedSender<Arc<Queue>>,
}

impl std::fmt::Debug for VHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VHost").field("name", &self.name).finish()
    }
}

/// The stage names of queue `queue` in `vhost`: its messages and its dead-letter stage.
/// The vhost's length makes the names unambiguous whatever the names contain.
fn stage_names(vhost: &str, queue: &str) -> (String, String) {
    (
        format!("amqp/{}/{vhost}/{queue}", vhost.len()),
        format!("amqp-dl/{}/{vhost}/{queue}", vhost.len()),
    )
}

/// A server-generated queue name, RabbitMQ's form: `amq.gen-` and 22 random characters.
fn generated_name() -> String {
    let bytes: [u8; 16] = std::array::from_fn(|_| fastrand::u8(..));
    format!(
        "amq.gen-{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

impl VHost {
    /// An empty virtual host (call [`VHost::load`] before use).
    pub fn new(
        name: String,
        db: Database,
        stages: Stages,
        keys: TopologyKeys,
        opened: UnboundedSender<Arc<Queue>>,
    ) -> Self {
        // At 0 from the start, so a dashboard's rate sees the first confirm and return.
        for outcome in ["ack", "nack"] {
            metrics::counter!(metric::CONFIRMS_TOTAL, metric::LABEL_VHOST => name.clone(), metric::LABEL_OUTCOME => outcome)
                .increment(0);
        }
        metrics::counter!(metric::RETURNS_TOTAL, metric::LABEL_VHOST => name.clone()).increment(0);
        Self {
            name,
            db,
            stages,
            keys,
            state: RwLock::new(Topology::default()),
            changes: tokio::sync::Mutex::new(()),
            opened,
        }
    }

    /// The topology, for routing.
    pub fn topology(&self) -> RwLockReadGuard<'_, Topology> {
        self.state.read()
    }

    /// The store keys of the front.
    pub fn keys(&self) -> &TopologyKeys {
        &self.keys
    }

    /// The spills of the vhost's large messages.
    pub fn spills(&self) -> Spills {
        self.stages.spills()
    }

    /// The store.
    pub fn db(&self) -> &Database {
        &self.db
    }

    fn not_found_queue(&self, name: &str) -> AmqpError {
        AmqpError::not_found(format!("no queue '{name}' in vhost '{}'", self.name))
    }

    fn not_found_exchange(&self, name: &str) -> AmqpError {
        AmqpError::not_found(format!("no exchange '{name}' in vhost '{}'", self.name))
    }

    fn locked(&self, name: &str) -> AmqpError {
        AmqpError::resource_locked(format!(
            "cannot obtain exclusive access to locked queue '{name}' in vhost '{}'. It could be originally declared on another connection or the exclusive property value does not match that of the original declaration.",
            self.name
        ))
    }

    fn default_exchange_refused() -> AmqpError {
        AmqpError::access_refused("operation not permitted on the default exchange")
    }

    /// The queue `name`, for `connection` to consume from, get from, purge or bind.
    ///
    /// # Errors
    /// 404 when it does not exist, 405 when it is exclusive to another connection.
    pub fn queue(&self, name: &str, connection: u64) -> Result<Arc<Queue>, AmqpError> {
        let queue = self
            .state
            .read()
            .queues
            .get(name)
            .cloned()
            .ok_or_else(|| self.not_found_queue(name))?;
        if !queue.accessible_by(connection) {
            return Err(self.locked(name));
        }
        Ok(queue)
    }

    /// (Re)reads the whole topology from the store, keeping the in-memory state of queues
    /// that did not change.
    ///
    /// # Errors
    /// 541 when the store fails or holds records this ferry cannot read.
    pub async fn load(&self) -> Result<(), AmqpError> {
        let _guard = self.changes.lock().await;
        self.load_locked().await
    }

    /// [`VHost::load`] for a caller that holds the change lock.
    async fn load_locked(&self) -> Result<(), AmqpError> {
        let tx = self.db.begin()?;
        let range = |(b, e): (Vec<u8>, Vec<u8>)| RangeOption::new(b, e);
        let exchanges = tx
            .get_range(&range(self.keys.exchanges(&self.name)), true)
            .await?;
        let queues = tx
            .get_range(&range(self.keys.queues(&self.name)), true)
            .await?;
        let bindings = tx
            .get_range(&range(self.keys.bindings(&self.name)), true)
            .await?;
        drop(tx);

        let mut next = Topology::default();
        for x in Exchange::builtins() {
            next.exchanges.insert(x.name.clone(), x);
        }
        for kv in exchanges {
            let name = records::entity_name(&self.keys, &kv.key).unwrap_or_default();
            let x = records::decode_exchange(&name, &kv.value)
                .map_err(|e| AmqpError::internal(e.to_string()))?;
            next.exchanges.insert(name, x);
        }
        let current: HashMap<String, Arc<Queue>> = self.state.read().queues.clone();
        let mut fresh = Vec::new();
        for kv in queues {
            let name = records::entity_name(&self.keys, &kv.key).unwrap_or_default();
            let record =
                QueueRecord::decode(&kv.value).map_err(|e| AmqpError::internal(e.to_string()))?;
            let queue = match current.get(&name) {
                Some(q) if q.stage.id() == record.stage_id => q.clone(),
                _ => match self.open_queue(&name, &record).await {
                    Ok(q) => {
                        fresh.push(q.clone());
                        q
                    }
                    Err(e) => {
                        warn!(vhost = %self.name, queue = %name, error = %e, "cannot open a stored queue; skipping it");
                        continue;
                    }
                },
            };
            next.queues.insert(name, queue);
        }
        for kv in bindings {
            if let Some(b) = self.keys.binding_of(&kv.key) {
                next.add_binding(b);
            }
        }
        let mut state = self.state.write();
        for (name, q) in &state.queues {
            if !next.queues.get(name).is_some_and(|n| Arc::ptr_eq(n, q)) {
                q.deleted.cancel();
            }
        }
        *state = next;
        drop(state);
        for q in fresh {
            let _ = self.opened.send(q);
        }
        Ok(())
    }

    /// Builds a queue from its record, opening its stages.
    async fn open_queue(&self, name: &str, record: &QueueRecord) -> Result<Arc<Queue>, AmqpError> {
        let table = decode_table(&record.arguments).ok_or_else(|| {
            AmqpError::internal(format!("queue '{name}' has unreadable arguments"))
        })?;
        let spec = QueueSpec {
            durable: record.durable,
            exclusive_owner: (record.exclusive_owner != 0).then_some(record.exclusive_owner),
            auto_delete: record.auto_delete,
            args: QueueArgs::parse(&table)?,
            owner: record.owner,
        };
        let stage = self.stages.open(&record.stage).await?;
        if stage.id() != record.stage_id {
            return Err(AmqpError::internal(format!(
                "queue '{name}' names stage {} but '{}' is stage {}",
                record.stage_id,
                record.stage,
                stage.id()
            )));
        }
        let dead_letter_stage = match record.dead_letter_stage.as_str() {
            "" => None,
            dl => Some(self.stages.open(dl).await?),
        };
        Ok(Arc::new(Queue::new(
            name.to_owned(),
            self.name.clone(),
            spec,
            stage,
            dead_letter_stage,
        )))
    }

    /// Checks that the exchange `name` exists: a passive `exchange.declare`, which, as
    /// RabbitMQ's, looks at nothing but the name (type, flags and arguments are ignored).
    ///
    /// # Errors
    /// 403 for the default exchange, 404 for a missing exchange.
    pub(crate) fn check_exchange(&self, name: &str) -> Result<(), AmqpError> {
        if name.is_empty() {
            return Err(Self::default_exchange_refused());
        }
        if self.state.read().exchanges.contains_key(name) {
            Ok(())
        } else {
            Err(self.not_found_exchange(name))
        }
    }

    /// Declares an exchange: configure on it; a new one with an alternate exchange also
    /// read on it and write on the alternate (RabbitMQ's checks).
    ///
    /// # Errors
    /// 403 for the default exchange, a new `amq.*` name or a refused permission, 406 for
    /// an inequivalent redeclare, 541 when the store fails.
    pub async fn declare_exchange(
        &self,
        wanted: Exchange,
        auth: &dyn Authorize,
    ) -> Result<(), AmqpError> {
        let _guard = self.changes.lock().await;
        if wanted.name.is_empty() {
            return Err(Self::default_exchange_refused());
        }
        auth.check(Access::Configure, Resource::Exchange(&wanted.name))?;
        let existing = self.state.read().exchanges.get(&wanted.name).cloned();
        match existing {
            Some(current) => current.check_equivalent(&wanted, &self.name),
            None if wanted.name.starts_with(RESERVED_PREFIX) => {
                Err(AmqpError::access_refused(format!(
                    "exchange name '{}' contains reserved prefix '{RESERVED_PREFIX}*'",
                    wanted.name
                )))
            }
            None => {
                if let Some(alternate) = wanted.alternate() {
                    auth.check(Access::Read, Resource::Exchange(&wanted.name))?;
                    auth.check(Access::Write, Resource::Exchange(&alternate))?;
                }
                let (key, value) = (
                    self.keys.exchange(&self.name, &wanted.name),
                    records::encode_exchange(&wanted),
                );
                self.commit(|tx| {
                    tx.set(&key, &value);
                })
                .await?;
                self.state
                    .write()
                    .exchanges
                    .insert(wanted.name.clone(), wanted);
                Ok(())
            }
        }
    }

    /// Deletes an exchange with its bindings (configure on it); deleting a missing one
    /// succeeds.
    ///
    /// # Errors
    /// 403 for the default and `amq.*` exchanges or a refused permission, 406 when
    /// `if_unused` and it has bindings, 541 when the store fails.
    pub async fn delete_exchange(
        &self,
        name: &str,
        if_unused: bool,
        auth: &dyn Authorize,
    ) -> Result<(), AmqpError> {
        let _guard = self.changes.lock().await;
        if name.is_empty() {
            return Err(Self::default_exchange_refused());
        }
        // As RabbitMQ's check_exchange_deletion: every `amq.` name, existing or not.
        if name.starts_with(RESERVED_PREFIX) {
            return Err(AmqpError::access_refused(format!(
                "deletion of system exchange '{name}' in vhost '{}' not allowed",
                self.name
            )));
        }
        // Whether it exists, and whether it is the source of a binding.
        let found = {
            let state = self.state.read();
            state
                .exchanges
                .get(name)
                .map(|_| state.bindings.get(name).is_some_and(|b| !b.is_empty()))
        };
        auth.check(Access::Configure, Resource::Exchange(name))?;
        let Some(in_use) = found else {
            return Ok(());
        };
        if if_unused && in_use {
            return Err(AmqpError::precondition_failed(format!(
                "exchange '{name}' in vhost '{}' in use",
                self.name
            )));
        }
        self.remove_locked(&[name.to_owned()], &[], Vec::new())
            .await
    }

    /// Adds a binding (an existing one is left as it is): write on the destination, read
    /// on the source and, on a topic exchange, topic read on the binding key.
    ///
    /// # Errors
    /// 403 for the default exchange or a refused permission, 404 for a missing source or destination, 405 for a
    /// queue exclusive to another connection, 541 when the store fails.
    pub async fn bind(
        &self,
        binding: Binding,
        connection: u64,
        auth: &dyn Authorize,
    ) -> Result<(), AmqpError> {
        let _guard = self.changes.lock().await;
        self.check_binding(&binding, connection, auth)?;
        if self.state.read().has_binding(&binding) {
            return Ok(());
        }
        let key = self.keys.binding(&self.name, &binding);
        self.commit(|tx| tx.set(&key, b"")).await?;
        self.state.write().add_binding(binding);
        Ok(())
    }

    /// Removes a binding (a missing one is no error), and any auto-delete exchange it
    /// leaves without bindings.
    ///
    /// # Errors
    /// As [`VHost::bind`].
    pub async fn unbind(
        &self,
        binding: Binding,
        connection: u64,
        auth: &dyn Authorize,
    ) -> Result<(), AmqpError> {
        let _guard = self.changes.lock().await;
        self.check_binding(&binding, connection, auth)?;
        if !self.state.read().has_binding(&binding) {
            return Ok(());
        }
        self.remove_locked(&[], &[], vec![binding]).await
    }

    /// The checks of a bind or unbind, in RabbitMQ's order.
    fn check_binding(
        &self,
        binding: &Binding,
        connection: u64,
        auth: &dyn Authorize,
    ) -> Result<(), AmqpError> {
        let destination = match &binding.destination {
            Destination::Queue(q) => Resource::Queue(q),
            Destination::Exchange(x) => Resource::Exchange(x),
        };
        auth.check(Access::Write, destination)?;
        if binding.source.is_empty() || binding.destination == Destination::Exchange(String::new())
        {
            return Err(Self::default_exchange_refused());
        }
        auth.check(Access::Read, Resource::Exchange(&binding.source))?;
        let state = self.state.read();
        if state
            .exchanges
            .get(&binding.source)
            .is_some_and(|x| x.kind == super::ExchangeKind::Topic)
        {
            auth.check_topic(Access::Read, &binding.source, &binding.routing_key)?;
        }
        match &binding.destination {
            Destination::Queue(q) => match state.queues.get(q) {
                None => return Err(self.not_found_queue(q)),
                Some(queue) if !queue.accessible_by(connection) => return Err(self.locked(q)),
                Some(_) => {}
            },
            Destination::Exchange(x) if !state.exchanges.contains_key(x) => {
                return Err(self.not_found_exchange(x));
            }
            Destination::Exchange(_) => {}
        }
        if !state.exchanges.contains_key(&binding.source) {
            return Err(self.not_found_exchange(&binding.source));
        }
        Ok(())
    }

    /// Declares a queue (or, `passive`, finds it); `name` "" makes a server-named queue.
    /// Configure on the queue (not for a passive declare); a new queue with a dead-letter
    /// exchange also read on the queue and write on that exchange (RabbitMQ's checks).
    ///
    /// # Errors
    /// 403 for a new `amq.*` name or a refused permission, 404 for a passive declare of a
    /// missing queue, 405 for a queue exclusive to another connection or a redeclare whose
    /// `exclusive` differs, 406 for an inequivalent redeclare, 541 when the store fails.
    pub async fn declare_queue(
        &self,
        name: &str,
        wanted: QueueSpec,
        passive: bool,
        connection: u64,
        auth: &dyn Authorize,
    ) -> Result<Arc<Queue>, AmqpError> {
        let _guard = self.changes.lock().await;
        // As RabbitMQ: a reserved name the client gives is refused before permissions are
        // looked at, and a passive declare needs no permission.
        let name = match (name.is_empty(), passive) {
            (true, false) => generated_name(),
            (false, false) => {
                Self::check_queue_name(name)?;
                name.to_owned()
            }
            (_, true) => name.to_owned(),
        };
        if !passive {
            auth.check(Access::Configure, Resource::Queue(&name))?;
        }
        let stored = self
            .db
            .begin()?
            .get(&self.keys.queue(&self.name, &name), true)
            .await?;
        if let Some(bytes) = stored {
            let record =
                QueueRecord::decode(&bytes).map_err(|e| AmqpError::internal(e.to_string()))?;
            let queue = self.queue_for(&name, &record).await?;
            if !queue.accessible_by(connection) {
                return Err(self.locked(&name));
            }
            if !passive {
                self.check_equivalent(&queue, &wanted)?;
                // A redeclare counts as use for `x-expires`; a passive check does not.
                queue.touch();
            }
            rabbitmq::queue_declared(false);
            return Ok(queue);
        }
        if passive {
            return Err(self.not_found_queue(&name));
        }
        if let Some(dead_letter_exchange) = &wanted.args.dead_letter_exchange {
            auth.check(Access::Read, Resource::Queue(&name))?;
            auth.check(Access::Write, Resource::Exchange(dead_letter_exchange))?;
        }
        let queue = self.create_queue(name, wanted).await?;
        rabbitmq::queue_declared(true);
        Ok(queue)
    }

    /// Refuses a queue name a client gives with the reserved `amq.` prefix, a server
    /// generated `amq.gen-` one included (RabbitMQ's `check_name`: such a queue is used by
    /// its name, never declared by it).
    fn check_queue_name(name: &str) -> Result<(), AmqpError> {
        if name.starts_with(RESERVED_PREFIX) {
            return Err(AmqpError::access_refused(format!(
                "queue name '{name}' contains reserved prefix '{RESERVED_PREFIX}*'"
            )));
        }
        Ok(())
    }

    /// The in-memory queue for a stored record: the current one if it is this incarnation,
    /// otherwise opened from the record.
    async fn queue_for(&self, name: &str, record: &QueueRecord) -> Result<Arc<Queue>, AmqpError> {
        if let Some(q) = self.state.read().queues.get(name)
            && q.stage.id() == record.stage_id
        {
            return Ok(q.clone());
        }
        let queue = self.open_queue(name, record).await?;
        if let Some(old) = self
            .state
            .write()
            .queues
            .insert(name.to_owned(), queue.clone())
        {
            old.deleted.cancel();
        }
        let _ = self.opened.send(queue.clone());
        Ok(queue)
    }

    fn check_equivalent(&self, queue: &Queue, wanted: &QueueSpec) -> Result<(), AmqpError> {
        let current = &queue.spec;
        let differ = |arg: &str, received: bool, now: bool| {
            Err(AmqpError::precondition_failed(format!(
                "inequivalent arg '{arg}' for queue '{}' in vhost '{}': received '{received}' but current is '{now}'",
                queue.name, self.name
            )))
        };
        // As RabbitMQ: exclusivity is checked first, and a redeclare whose `exclusive` flag
        // differs from the queue's is refused as a locked queue (405), not as an
        // inequivalent argument.
        if wanted.exclusive_owner.is_some() != current.exclusive_owner.is_some() {
            return Err(self.locked(&queue.name));
        }
        if current.durable != wanted.durable {
            return differ("durable", wanted.durable, current.durable);
        }
        if current.auto_delete != wanted.auto_delete {
            return differ("auto_delete", wanted.auto_delete, current.auto_delete);
        }
        current
            .args
            .check_equivalent(&wanted.args, &queue.name, &self.name)
    }

    async fn create_queue(&self, name: String, spec: QueueSpec) -> Result<Arc<Queue>, AmqpError> {
        self.check_creatable(&name, &spec)?;
        let (key, version) = (
            self.keys.queue(&self.name, &name),
            self.keys.version(&self.name),
        );
        let (name_ref, spec_ref, key, version) = (&name, &spec, &key, &version);
        let record = self
            .db
            .run(|tx| async move {
                let record = self.queue_record_in(&tx, name_ref, spec_ref).await?;
                tx.set(key, record.encode());
                tx.atomic_add(version, 1);
                Ok::<_, TxError>(record)
            })
            .await?;
        let queue = self.open_queue(&name, &record).await?;
        self.state.write().queues.insert(name, queue.clone());
        let _ = self.opened.send(queue.clone());
        Ok(queue)
    }

    /// Refuses a queue that cannot be created as `spec` says (a quorum queue must be
    /// durable, shared and not auto-delete).
    fn check_creatable(&self, name: &str, spec: &QueueSpec) -> Result<(), AmqpError> {
        if spec.args.queue_type == super::args::QueueType::Quorum
            && (!spec.durable || spec.exclusive_owner.is_some() || spec.auto_delete)
        {
            return Err(AmqpError::precondition_failed(format!(
                "invalid property for quorum queue '{name}' in vhost '{}': it must be durable, not exclusive and not auto-delete",
                self.name
            )));
        }
        Ok(())
    }

    /// Creates, in `tx`, the stages of queue `name` declared as `spec` (its dead-letter
    /// stage first when it has a dead-letter exchange) and returns the queue's record, for
    /// the caller to write in the same transaction: a queue and its stages appear
    /// together or not at all.
    async fn queue_record_in(
        &self,
        tx: &Transaction,
        name: &str,
        spec: &QueueSpec,
    ) -> Result<QueueRecord, TxError> {
        let (stage_name, dl_name) = stage_names(&self.name, name);
        let dead_letter = spec.args.dead_letter_exchange.is_some();
        if dead_letter {
            self.create_stage_in(tx, &dl_name, &StageOptions::default())
                .await?;
        }
        let options = StageOptions {
            max_priority: spec.args.stage_max_priority(),
            max_deliveries: spec.args.stage_delivery_limit(),
            dead_letter: dead_letter.then(|| dl_name.clone()),
        };
        let stage_id = self.create_stage_in(tx, &stage_name, &options).await?;
        let mut arguments = amq_protocol::types::FieldTable::default();
        spec.args.write_into(&mut arguments);
        Ok(QueueRecord {
            durable: spec.durable,
            auto_delete: spec.auto_delete,
            exclusive_owner: spec.exclusive_owner.unwrap_or(0),
            owner: spec.owner,
            arguments: encode_table(&arguments),
            stage: stage_name,
            dead_letter_stage: if dead_letter { dl_name } else { String::new() },
            stage_id,
        })
    }

    /// Creates, in `tx`, a stage, replacing one of the same name left with other settings
    /// by a declare whose queue record is gone; returns its id.
    async fn create_stage_in(
        &self,
        tx: &Transaction,
        name: &str,
        options: &StageOptions,
    ) -> Result<u64, StageError> {
        match self.stages.create_in(tx, name, options).await {
            Err(StageError::Inequivalent { .. }) => {
                self.stages.delete_in(tx, name).await?;
                Ok(self.stages.create_in(tx, name, options).await?.0)
            }
            other => Ok(other?.0),
        }
    }

    /// Deletes a queue with its messages and bindings; returns how many ready messages it
    /// held. Deleting a missing queue returns 0.
    ///
    /// # Errors
    /// 405 for a queue exclusive to another connection, 406 when `if_unused` and it has
    /// consumers or `if_empty` and it holds messages, 541 when the store fails.
    pub async fn delete_queue(
        &self,
        name: &str,
        if_unused: bool,
        if_empty: bool,
        connection: u64,
    ) -> Result<u32, AmqpError> {
        let _guard = self.changes.lock().await;
        let Some(queue) = self.state.read().queues.get(name).cloned() else {
            return Ok(0);
        };
        if !queue.accessible_by(connection) {
            return Err(self.locked(name));
        }
        if if_unused && queue.consumers() > 0 {
            return Err(AmqpError::precondition_failed(format!(
                "queue '{name}' in vhost '{}' in use",
                self.name
            )));
        }
        let ready = queue.stage.depth().await?.ready.max(0) as u32;
        if if_empty && ready > 0 {
            return Err(AmqpError::precondition_failed(format!(
                "queue '{name}' in vhost '{}' not empty",
                self.name
            )));
        }
        self.remove_locked(&[], &[name.to_owned()], Vec::new())
            .await?;
        Ok(ready)
    }

    /// Removes queues without checks (exclusive queues of a closed connection, an
    /// auto-delete queue after its last consumer, an expired queue), if they are still the
    /// incarnations given.
    ///
    /// # Errors
    /// 541 when the store fails.
    pub(crate) async fn remove_queues(&self, queues: &[Arc<Queue>]) -> Result<(), AmqpError> {
        let _guard = self.changes.lock().await;
        let names: Vec<String> = {
            let state = self.state.read();
            queues
                .iter()
                .filter(|q| state.queues.get(&q.name).is_some_and(|c| Arc::ptr_eq(c, q)))
                .map(|q| q.name.clone())
                .collect()
        };
        if names.is_empty() {
            return Ok(());
        }
        self.remove_locked(&[], &names, Vec::new()).await
    }

    /// The queues exclusive to `connection`.
    pub(crate) fn exclusive_queues_of(&self, connection: u64) -> Vec<Arc<Queue>> {
        self.state
            .read()
            .queues
            .values()
            .filter(|q| q.spec.exclusive_owner == Some(connection))
            .cloned()
            .collect()
    }

    /// Removes the transient exchanges and queues whose owner (a connection or a Ferry
    /// instance) is no longer alive: they belonged to a process that died.
    ///
    /// # Errors
    /// 541 when the store fails.
    pub(crate) async fn reap_orphans(&self, holders: &Holders) -> Result<(), AmqpError> {
        let owned: Vec<(bool, String, u64)> = {
            let state = self.state.read();
            let exchanges = state
                .exchanges
                .values()
                .filter(|x| x.owner != 0)
                .map(|x| (true, x.name.clone(), x.owner));
            let queues = state
                .queues
                .values()
                .filter(|q| q.spec.owner != 0)
                .map(|q| (false, q.name.clone(), q.spec.owner));
            exchanges.chain(queues).collect()
        };
        if owned.is_empty() {
            return Ok(());
        }
        let tx = self.db.begin()?;
        let now = now_ms();
        let (mut exchanges, mut queues) = (Vec::new(), Vec::new());
        for (is_exchange, name, owner) in owned {
            if !holders.is_alive_in(&tx, owner, now).await? {
                if is_exchange {
                    exchanges.push(name);
                } else {
                    queues.push(name);
                }
            }
        }
        drop(tx);
        if exchanges.is_empty() && queues.is_empty() {
            return Ok(());
        }
        let _guard = self.changes.lock().await;
        self.remove_locked(&exchanges, &queues, Vec::new()).await
    }

    /// Removes every queue (with its messages), exchange and binding: the virtual host is
    /// being deleted.
    ///
    /// # Errors
    /// 541 when the store fails.
    pub(crate) async fn remove_all(&self) -> Result<(), AmqpError> {
        let _guard = self.changes.lock().await;
        let (exchanges, queues): (Vec<String>, Vec<String>) = {
            let state = self.state.read();
            let builtins: HashSet<String> =
                Exchange::builtins().into_iter().map(|x| x.name).collect();
            (
                state
                    .exchanges
                    .keys()
                    .filter(|x| !builtins.contains(*x))
                    .cloned()
                    .collect(),
                state.queues.keys().cloned().collect(),
            )
        };
        self.remove_locked(&exchanges, &queues, Vec::new()).await
    }

    /// Commits the removal of entities with everything they take along (bindings,
    /// auto-delete exchanges, stages), then applies it to memory. The caller holds the
    /// change lock.
    async fn remove_locked(
        &self,
        exchanges: &[String],
        queues: &[String],
        bindings: Vec<Binding>,
    ) -> Result<(), AmqpError> {
        let removal: Removal = self.state.read().plan_removal(exchanges, queues, bindings);
        let (vhost, keys, stages) = (&self.name, &self.keys, &self.stages);
        let removal_ref = &removal;
        self.db
            .run(|tx| async move {
                for x in &removal_ref.exchanges {
                    tx.clear(&keys.exchange(vhost, x));
                    // What it held as a delayed-message exchange goes with it.
                    records::drop_delayed_in(&tx, keys, &stages.spills(), vhost, x).await?;
                }
                for q in &removal_ref.queues {
                    tx.clear(&keys.queue(vhost, &q.name));
                    tx.clear(&keys.active_consumer(q.stage.id()));
                    stages.delete_in(&tx, q.stage.name()).await?;
                    if let Some(dl) = &q.dead_letter_stage {
                        stages.delete_in(&tx, dl.name()).await?;
                    }
                }
                for b in &removal_ref.bindings {
                    tx.clear(&keys.binding(vhost, b));
                }
                tx.atomic_add(&keys.version(vhost), 1);
                Ok::<_, TxError>(())
            })
            .await?;
        self.state.write().apply_removal(&removal);
        rabbitmq::queues_deleted(removal.queues.len());
        Ok(())
    }

    /// Runs `change` in a transaction that also bumps the version key.
    async fn commit(&self, change: impl Fn(&ferry_store::Transaction)) -> Result<(), AmqpError> {
        let version = self.keys.version(&self.name);
        let change = &change;
        let version = &version;
        self.db
            .run(|tx| async move {
                change(&tx);
                tx.atomic_add(version, 1);
                Ok::<_, TxError>(())
            })
            .await?;
        Ok(())
    }

    /// Registers a consumer on `queue`.
    ///
    /// # Errors
    /// 403 when `exclusive` and the queue has consumers, or it has an exclusive consumer.
    pub(crate) fn add_consumer(&self, queue: &Queue, exclusive: bool) -> Result<(), AmqpError> {
        let consumers = {
            let mut local = queue.local.lock();
            if local.exclusive_consumer || (exclusive && local.consumers > 0) {
                return Err(AmqpError::access_refused(format!(
                    "queue '{}' in vhost '{}' in exclusive use",
                    queue.name, self.name
                )));
            }
            local.consumers += 1;
            local.had_consumer = true;
            local.exclusive_consumer |= exclusive;
            local.consumers
        };
        queue.touch();
        queue.publish_consumers(consumers);
        Ok(())
    }

    /// Unregisters a consumer; deletes an auto-delete queue whose last consumer this was.
    ///
    /// # Errors
    /// 541 when the store fails while deleting the queue.
    pub(crate) async fn remove_consumer(
        &self,
        queue: &Arc<Queue>,
        exclusive: bool,
    ) -> Result<(), AmqpError> {
        let (consumers, delete) = {
            let mut local = queue.local.lock();
            local.consumers = local.consumers.saturating_sub(1);
            if exclusive {
                local.exclusive_consumer = false;
            }
            local.last_used = std::time::Instant::now();
            (
                local.consumers,
                local.consumers == 0 && local.had_consumer && queue.spec.auto_delete,
            )
        };
        queue.publish_consumers(consumers);
        if delete {
            self.remove_queues(std::slice::from_ref(queue)).await?;
        }
        Ok(())
    }

    /// Every queue, for the depth metrics and resource checks.
    pub fn queues(&self) -> Vec<Arc<Queue>> {
        self.state.read().queues.values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_names_are_unambiguous() {
        assert_ne!(stage_names("a/b", "c"), stage_names("a", "b/c"));
        assert_eq!(stage_names("/", "q").0, "amqp/1///q");
    }

    #[test]
    fn generated_names_look_like_rabbitmqs() {
        let name = generated_name();
        assert!(name.starts_with("amq.gen-"));
        assert_eq!(name.len(), "amq.gen-".len() + 22);
    }

    #[test]
    fn written_arguments_parse_back_to_the_same() {
        let args = QueueArgs {
            max_priority: Some(9),
            message_ttl: Some(1000),
            dead_letter_exchange: Some("dlx".into()),
            overflow: crate::state::topology::args::Overflow::RejectPublish,
            single_active_consumer: true,
            ..QueueArgs::default()
        };
        let mut table = amq_protocol::types::FieldTable::default();
        args.write_into(&mut table);
        assert_eq!(QueueArgs::parse(&table).unwrap(), args);
    }
}
