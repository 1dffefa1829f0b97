//! Topology: the exchanges, queues and bindings of each virtual host.
//!
//! Every declaration is stored under the front's own subspace ([`records`]) and kept in
//! memory ([`Topology`]) for routing, which reads memory only. Changes go through
//! [`VHost`], one at a time per virtual host: the store transaction commits first, then
//! memory changes, so what a client was told (declare-ok, bind-ok) is durable and routes
//! at once. Each change bumps the virtual host's version key; every instance watches it
//! and reloads, so instances sharing a FoundationDB cluster converge.
//!
//! Modules: [`args`] (queue arguments and equivalence), [`exchange`], [`queue`],
//! [`routing`] (matching and routing), [`records`] (keys and stored values), [`vhost`]
//! (the operations).

pub(crate) mod args;
pub(crate) mod exchange;
pub(crate) mod queue;
pub(crate) mod records;
pub(crate) mod routing;
pub(crate) mod vhost;

pub use exchange::{Exchange, ExchangeKind};
pub use queue::{Queue, QueueSpec};
pub use routing::{Binding, Destination};
pub use vhost::{Declarations, PlannedDeclarations, VHost};

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// One virtual host's topology in memory.
#[derive(Debug, Default)]
pub struct Topology {
    /// Exchanges by name, the built-in ones included.
    pub exchanges: HashMap<String, Exchange>,
    /// Queues by name.
    pub queues: HashMap<String, Arc<Queue>>,
    /// Bindings by source exchange.
    pub bindings: HashMap<String, Vec<Binding>>,
}

/// What removing some entities takes with it.
#[derive(Debug, Default)]
pub(crate) struct Removal {
    /// Exchanges removed (asked for, or auto-deleted after losing their last binding).
    pub(crate) exchanges: BTreeSet<String>,
    /// Queues removed.
    pub(crate) queues: Vec<Arc<Queue>>,
    /// Bindings removed.
    pub(crate) bindings: Vec<Binding>,
}

impl Topology {
    /// Every binding whose destination is `destination`.
    pub(crate) fn bindings_to<'a>(
        &'a self,
        destination: &'a Destination,
    ) -> impl Iterator<Item = &'a Binding> {
        self.bindings
            .values()
            .flatten()
            .filter(move |b| b.destination == *destination)
    }

    /// Whether `binding` exists.
    pub(crate) fn has_binding(&self, binding: &Binding) -> bool {
        self.bindings
            .get(&binding.source)
            .is_some_and(|bs| bs.contains(binding))
    }

    /// Plans removing `exchanges`, `queues` and `bindings`: every binding to or from a
    /// removed entity goes too, and so does every auto-delete exchange left without
    /// bindings as a source (repeatedly, since its own removal removes more bindings).
    pub(crate) fn plan_removal(
        &self,
        exchanges: &[String],
        queues: &[String],
        bindings: Vec<Binding>,
    ) -> Removal {
        let mut removal = Removal {
            queues: queues
                .iter()
                .filter_map(|q| self.queues.get(q).cloned())
                .collect(),
            bindings,
            ..Removal::default()
        };
        for q in queues {
            let dest = Destination::Queue(q.clone());
            removal.bindings.extend(self.bindings_to(&dest).cloned());
        }
        let mut doomed: Vec<String> = exchanges.to_vec();
        doomed.extend(self.orphaned_auto_delete(&removal));
        // Each round removes one more exchange or none, so this ends.
        while let Some(x) = doomed.pop() {
            if !removal.exchanges.insert(x.clone()) {
                continue;
            }
            removal
                .bindings
                .extend(self.bindings.get(&x).into_iter().flatten().cloned());
            let dest = Destination::Exchange(x.clone());
            removal.bindings.extend(self.bindings_to(&dest).cloned());
            doomed.extend(self.orphaned_auto_delete(&removal));
        }
        let mut unique: Vec<Binding> = Vec::with_capacity(removal.bindings.len());
        for b in removal.bindings.drain(..) {
            if !unique.contains(&b) {
                unique.push(b);
            }
        }
        removal.bindings = unique;
        removal
    }

    /// Auto-delete exchanges, not yet in `removal`, all of whose bindings as a source
    /// `removal` removes (and that had some).
    fn orphaned_auto_delete(&self, removal: &Removal) -> Vec<String> {
        let sources: BTreeSet<&str> = removal.bindings.iter().map(|b| b.source.as_str()).collect();
        sources
            .into_iter()
            .filter(|s| !removal.exchanges.contains(*s))
            .filter(|s| {
                self.exchanges
                    .get(*s)
                    .is_some_and(|x| x.auto_delete && !x.builtin)
            })
            .filter(|s| {
                self.bindings
                    .get(*s)
                    .into_iter()
                    .flatten()
                    .all(|b| removal.bindings.contains(b))
            })
            .map(str::to_owned)
            .collect()
    }

    /// Applies a committed removal.
    pub(crate) fn apply_removal(&mut self, removal: &Removal) {
        for b in &removal.bindings {
            if let Some(list) = self.bindings.get_mut(&b.source) {
                list.retain(|x| x != b);
            }
        }
        self.bindings.retain(|_, list| !list.is_empty());
        for x in &removal.exchanges {
            self.exchanges.remove(x);
            self.bindings.remove(x);
        }
        for q in &removal.queues {
            if self
                .queues
                .get(&q.name)
                .is_some_and(|current| Arc::ptr_eq(current, q))
            {
                self.queues.remove(&q.name);
            }
            q.deleted.cancel();
        }
    }

    /// Adds a binding (once).
    pub(crate) fn add_binding(&mut self, binding: Binding) {
        let list = self.bindings.entry(binding.source.clone()).or_default();
        if !list.contains(&binding) {
            list.push(binding);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use amq_protocol::types::FieldTable;

    fn binding(source: &str, to: Destination) -> Binding {
        Binding {
            source: source.into(),
            destination: to,
            routing_key: "k".into(),
            arguments: FieldTable::default(),
        }
    }

    #[test]
    fn removing_the_last_binding_of_an_auto_delete_exchange_removes_it_in_cascade() {
        let mut t = Topology::default();
        for (name, auto_delete) in [("upstream", true), ("middle", true), ("kept", false)] {
            let mut x = Exchange::builtins().remove(1);
            x.name = name.into();
            x.auto_delete = auto_delete;
            x.builtin = false;
            t.exchanges.insert(name.into(), x);
        }
        t.add_binding(binding("upstream", Destination::Exchange("middle".into())));
        t.add_binding(binding("middle", Destination::Queue("q".into())));
        t.add_binding(binding("kept", Destination::Queue("q".into())));
        let removal = t.plan_removal(&[], &["q".to_owned()], Vec::new());
        assert_eq!(
            removal
                .exchanges
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
            ["middle", "upstream"]
        );
        assert_eq!(removal.bindings.len(), 3);
        t.apply_removal(&removal);
        assert!(t.exchanges.contains_key("kept"));
        assert!(t.bindings.is_empty());
    }
}
