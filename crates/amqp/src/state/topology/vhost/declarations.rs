//! Many declarations — exchanges, queues, bindings — applied to a virtual host inside a
//! store transaction the caller owns, so they commit together with the caller's other
//! records (a definitions import: users, permissions and several virtual hosts in one
//! transaction) or not at all.
//!
//! The order is the virtual host's usual one, stretched over the caller's transaction:
//! [`VHost::plan_declarations`] takes the change lock and checks every declaration against
//! the topology (what exists must be equivalent, what is new must be creatable, every
//! binding's ends must exist or be declared too); [`PlannedDeclarations::write_in`] writes
//! what is new in the caller's transaction (and may run again if it retries);
//! [`PlannedDeclarations::finish`], after the commit, reloads the topology from the store
//! and releases the lock. Dropping a plan without finishing it (the transaction failed)
//! only releases the lock: memory changes only after a commit.

use super::{VHost, records};
use crate::state::topology::exchange::RESERVED_PREFIX;
use crate::state::topology::{Binding, Destination, Exchange, QueueSpec};
use crate::wire::errors::{AmqpError, TxError};
use ferry_store::Transaction;
use std::collections::HashMap;
use tokio::sync::MutexGuard;

/// What to declare in one virtual host; a declaration of something that exists is a check
/// of equivalence, as a redeclare by a client is.
#[derive(Debug, Default)]
pub struct Declarations {
    /// Exchanges.
    pub exchanges: Vec<Exchange>,
    /// Queues, by name (shared: never exclusive to a connection).
    pub queues: Vec<(String, QueueSpec)>,
    /// Bindings.
    pub bindings: Vec<Binding>,
}

/// The new part of some declarations, checked under the virtual host's change lock (held
/// until [`PlannedDeclarations::finish`] or drop).
pub struct PlannedDeclarations<'a> {
    vhost: &'a VHost,
    _changes: MutexGuard<'a, ()>,
    exchanges: Vec<Exchange>,
    queues: Vec<(String, QueueSpec)>,
    bindings: Vec<Binding>,
}

impl VHost {
    /// Takes the change lock and checks `declarations` against the topology; returns what
    /// is new. A caller planning several virtual hosts plans them in name order, so two
    /// callers never wait for each other's locks.
    ///
    /// # Errors
    /// As the single declarations: 403 for the default exchange or a new `amq.*` name,
    /// 404 for a binding whose source or destination is neither there nor declared, 405
    /// for a queue exclusive to a connection, 406 for an inequivalent redeclare.
    pub async fn plan_declarations(
        &self,
        declarations: Declarations,
    ) -> Result<PlannedDeclarations<'_>, AmqpError> {
        let changes = self.changes.lock().await;
        let state = self.state.read();
        let mut exchanges: HashMap<String, Exchange> = HashMap::new();
        for wanted in declarations.exchanges {
            if wanted.name.is_empty() {
                return Err(Self::default_exchange_refused());
            }
            match state
                .exchanges
                .get(&wanted.name)
                .or_else(|| exchanges.get(&wanted.name))
            {
                Some(current) => current.check_equivalent(&wanted, &self.name)?,
                None if wanted.name.starts_with(RESERVED_PREFIX) => {
                    return Err(AmqpError::access_refused(format!(
                        "exchange name '{}' contains reserved prefix '{RESERVED_PREFIX}*'",
                        wanted.name
                    )));
                }
                None => {
                    exchanges.insert(wanted.name.clone(), wanted);
                }
            }
        }
        let mut queues: HashMap<String, QueueSpec> = HashMap::new();
        for (name, wanted) in declarations.queues {
            if let Some(current) = state.queues.get(&name) {
                if !current.accessible_by(0) {
                    return Err(self.locked(&name));
                }
                self.check_equivalent(current, &wanted)?;
            } else if let Some(planned) = queues.get(&name) {
                if *planned != wanted {
                    return Err(AmqpError::precondition_failed(format!(
                        "queue '{name}' in vhost '{}' is declared twice, differently",
                        self.name
                    )));
                }
            } else if name.starts_with(RESERVED_PREFIX) || name.is_empty() {
                return Err(AmqpError::access_refused(format!(
                    "queue name '{name}' contains reserved prefix '{RESERVED_PREFIX}*' or is empty"
                )));
            } else {
                self.check_creatable(&name, &wanted)?;
                queues.insert(name, wanted);
            }
        }
        let mut bindings = Vec::new();
        for binding in declarations.bindings {
            if binding.source.is_empty()
                || binding.destination == Destination::Exchange(String::new())
            {
                return Err(Self::default_exchange_refused());
            }
            let exchange_known =
                |name: &str| state.exchanges.contains_key(name) || exchanges.contains_key(name);
            if !exchange_known(&binding.source) {
                return Err(self.not_found_exchange(&binding.source));
            }
            match &binding.destination {
                Destination::Queue(q) => match state.queues.get(q) {
                    Some(queue) if !queue.accessible_by(0) => return Err(self.locked(q)),
                    Some(_) => {}
                    None if queues.contains_key(q) => {}
                    None => return Err(self.not_found_queue(q)),
                },
                Destination::Exchange(x) if !exchange_known(x) => {
                    return Err(self.not_found_exchange(x));
                }
                Destination::Exchange(_) => {}
            }
            if !state.has_binding(&binding) && !bindings.contains(&binding) {
                bindings.push(binding);
            }
        }
        drop(state);
        let mut exchanges: Vec<Exchange> = exchanges.into_values().collect();
        exchanges.sort_by(|a, b| a.name.cmp(&b.name));
        let mut queues: Vec<(String, QueueSpec)> = queues.into_iter().collect();
        queues.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(PlannedDeclarations {
            vhost: self,
            _changes: changes,
            exchanges,
            queues,
            bindings,
        })
    }
}

impl PlannedDeclarations<'_> {
    /// Whether nothing is new.
    pub fn is_empty(&self) -> bool {
        self.exchanges.is_empty() && self.queues.is_empty() && self.bindings.is_empty()
    }

    /// How many exchanges, queues and bindings are new.
    pub fn counts(&self) -> (usize, usize, usize) {
        (self.exchanges.len(), self.queues.len(), self.bindings.len())
    }

    /// Writes what is new in `tx`: records, the queues' stages, the version bump. An
    /// exchange or queue that another instance created since the plan was made is read
    /// with a conflict, and refused.
    ///
    /// # Errors
    /// 406 when another instance declared one of the new names meanwhile, or the store's.
    pub async fn write_in(&self, tx: &Transaction) -> Result<(), TxError> {
        if self.is_empty() {
            return Ok(());
        }
        let (vhost, keys) = (&self.vhost.name, &self.vhost.keys);
        let meanwhile = |what: &str, name: &str| {
            TxError::Amqp(AmqpError::precondition_failed(format!(
                "{what} '{name}' in vhost '{vhost}' was declared by another client meanwhile; nothing was changed, try again"
            )))
        };
        for x in &self.exchanges {
            let key = keys.exchange(vhost, &x.name);
            if tx.get(&key, false).await?.is_some() {
                return Err(meanwhile("exchange", &x.name));
            }
            tx.set(&key, records::encode_exchange(x));
        }
        for (name, spec) in &self.queues {
            let key = keys.queue(vhost, name);
            if tx.get(&key, false).await?.is_some() {
                return Err(meanwhile("queue", name));
            }
            let record = self.vhost.queue_record_in(tx, name, spec).await?;
            tx.set(&key, record.encode());
        }
        for b in &self.bindings {
            tx.set(&keys.binding(vhost, b), b"");
        }
        tx.atomic_add(&keys.version(vhost), 1);
        Ok(())
    }

    /// After the commit: reloads the topology from the store (opening the new queues)
    /// and releases the change lock.
    ///
    /// # Errors
    /// 541 when the store cannot be read; what was committed stays, and the next reload
    /// (the version key changed) shows it.
    pub async fn finish(self) -> Result<(), AmqpError> {
        self.vhost.load_locked().await
    }
}
