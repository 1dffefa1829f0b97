//! Routing: which queues a message published to an exchange reaches, through bindings of
//! every exchange kind, exchange-to-exchange bindings and alternate exchanges.

use super::Topology;
use super::args::{integer, text};
use super::exchange::{ExchangeKind, delay_of};
use super::queue::Queue;
use crate::wire::errors::AmqpError;
use amq_protocol::types::{AMQPValue, FieldTable};
use std::collections::HashSet;
use std::sync::Arc;

/// What a binding leads to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Destination {
    /// A queue, by name.
    Queue(String),
    /// An exchange, by name (an exchange-to-exchange binding).
    Exchange(String),
}

impl Destination {
    /// The destination's name.
    pub fn name(&self) -> &str {
        match self {
            Self::Queue(n) | Self::Exchange(n) => n,
        }
    }
}

/// A binding from a source exchange to a destination.
#[derive(Debug, Clone, PartialEq)]
pub struct Binding {
    /// The exchange messages come from.
    pub source: String,
    /// Where matching messages go.
    pub destination: Destination,
    /// The binding key.
    pub routing_key: String,
    /// The binding arguments (headers exchanges match on them).
    pub arguments: FieldTable,
}

/// Most exchanges one publish may pass through (exchange-to-exchange bindings and alternate
/// exchanges), so a pathological topology cannot make routing unbounded.
const MAX_EXCHANGES_PER_ROUTE: usize = 1024;

/// Where a message goes.
#[derive(Debug, Clone, Default)]
pub struct Routes {
    /// The queues it is stored in now, each once.
    pub queues: Vec<Arc<Queue>>,
    /// The delayed-message exchanges that hold it for its `x-delay` first, each routing it
    /// on when it is due ([`crate::publishing::delayed`]).
    pub delayed: Vec<String>,
}

impl Routes {
    /// Whether it goes nowhere (unroutable).
    pub fn is_empty(&self) -> bool {
        self.queues.is_empty() && self.delayed.is_empty()
    }

    /// How many copies of the message one transaction stores: one per queue and per
    /// delayed-message exchange.
    pub fn copies(&self) -> usize {
        self.queues.len() + self.delayed.len()
    }
}

impl Topology {
    /// Where a message published to `exchange` with `routing_key` and `headers` goes.
    ///
    /// # Errors
    /// 404 when `exchange` does not exist, 403 when it is internal.
    pub fn route(
        &self,
        vhost: &str,
        exchange: &str,
        routing_key: &str,
        headers: Option<&FieldTable>,
    ) -> Result<Routes, AmqpError> {
        let Some(start) = self.exchanges.get(exchange) else {
            return Err(AmqpError::not_found(format!(
                "no exchange '{exchange}' in vhost '{vhost}'"
            )));
        };
        if start.internal {
            return Err(AmqpError::access_refused(format!(
                "cannot publish to internal exchange '{exchange}' in vhost '{vhost}'"
            )));
        }
        Ok(self.route_from(exchange, routing_key, headers))
    }

    /// Where a message reaching the exchange `exchange` goes (nowhere when it does not
    /// exist): through its bindings, exchange-to-exchange bindings and alternate exchanges.
    /// A delayed-message exchange holds a message with a positive `x-delay` instead of
    /// routing it.
    pub(crate) fn route_from(
        &self,
        exchange: &str,
        routing_key: &str,
        headers: Option<&FieldTable>,
    ) -> Routes {
        let mut routes = Routes::default();
        if exchange.is_empty() {
            routes.queues.extend(self.queues.get(routing_key).cloned());
            return routes;
        }
        let delays = delay_of(headers).is_some();
        let mut seen_queues = HashSet::new();
        let mut visited = HashSet::from([exchange.to_owned()]);
        let mut pending = vec![exchange.to_owned()];
        let mut alternate_from = Some(exchange.to_owned());
        while let Some(name) = pending.pop() {
            let Some(source) = self.exchanges.get(&name) else {
                continue;
            };
            if delays && source.delayed {
                routes.delayed.push(name);
                continue;
            }
            for binding in self.bindings.get(&name).into_iter().flatten() {
                if !matches(source.kind, binding, routing_key, headers) {
                    continue;
                }
                match &binding.destination {
                    Destination::Queue(q) => {
                        if let Some(queue) = self.queues.get(q)
                            && seen_queues.insert(q.clone())
                        {
                            routes.queues.push(queue.clone());
                        }
                    }
                    Destination::Exchange(x) => {
                        if visited.len() < MAX_EXCHANGES_PER_ROUTE && visited.insert(x.clone()) {
                            pending.push(x.clone());
                        }
                    }
                }
            }
            // Nothing matched: the first exchange's alternate exchange gets the message
            // (and, transitively, its own alternate).
            if pending.is_empty()
                && routes.is_empty()
                && let Some(from) = alternate_from.take()
                && let Some(alternate) = self.exchanges.get(&from).and_then(|e| e.alternate())
                && visited.len() < MAX_EXCHANGES_PER_ROUTE
                && visited.insert(alternate.clone())
            {
                alternate_from = Some(alternate.clone());
                pending.push(alternate);
            }
        }
        routes
    }
}

/// Whether `binding` of an exchange of `kind` takes a message with `routing_key` and
/// `headers`.
fn matches(
    kind: ExchangeKind,
    binding: &Binding,
    routing_key: &str,
    headers: Option<&FieldTable>,
) -> bool {
    match kind {
        ExchangeKind::Direct => binding.routing_key == routing_key,
        ExchangeKind::Fanout => true,
        ExchangeKind::Topic => topic_matches(&binding.routing_key, routing_key),
        ExchangeKind::Headers => headers_match(&binding.arguments, headers),
    }
}

/// Topic matching: both are dot-separated words; in the pattern `*` stands for exactly one
/// word and `#` for zero or more. An empty key or pattern has no words.
pub(crate) fn topic_matches(pattern: &str, key: &str) -> bool {
    let (p, k) = (words(pattern), words(key));
    // can[j]: the pattern's first i words match the key's first j words.
    let mut can = vec![false; k.len() + 1];
    can[0] = true;
    for word in &p {
        let mut next = vec![false; k.len() + 1];
        for j in 0..=k.len() {
            next[j] = match *word {
                "#" => can[j] || (j > 0 && next[j - 1]),
                "*" => j > 0 && can[j - 1],
                w => j > 0 && can[j - 1] && k[j - 1] == w,
            };
        }
        can = next;
    }
    can[k.len()]
}

/// The dot-separated words of a topic key or pattern; "" has none.
fn words(s: &str) -> Vec<&str> {
    if s.is_empty() {
        Vec::new()
    } else {
        s.split('.').collect()
    }
}

/// Headers matching, RabbitMQ's way: `x-match` is `all` (the default) or `any`
/// (`all-with-x`/`any-with-x` also compare `x-` arguments); an argument with no value
/// (void) matches a header's presence; values compare by content, integers by number.
pub(crate) fn headers_match(arguments: &FieldTable, headers: Option<&FieldTable>) -> bool {
    let mode = arguments
        .inner()
        .get("x-match")
        .and_then(text)
        .unwrap_or_else(|| "all".to_owned());
    let (any, with_x) = match mode.as_str() {
        "any" => (true, false),
        "any-with-x" => (true, true),
        "all-with-x" => (false, true),
        _ => (false, false),
    };
    let empty = FieldTable::default();
    let headers = headers.unwrap_or(&empty).inner();
    let mut checks = arguments
        .inner()
        .iter()
        .filter(|(k, _)| k.as_str() != "x-match" && (with_x || !k.as_str().starts_with("x-")))
        .map(|(k, want)| match headers.get(k.as_str()) {
            None => false,
            Some(_) if *want == AMQPValue::Void => true,
            Some(have) => same_value(want, have),
        });
    if any {
        checks.any(|ok| ok)
    } else {
        checks.all(|ok| ok)
    }
}

/// Whether two header values are equal: integers by number, strings by bytes, anything
/// else exactly.
fn same_value(a: &AMQPValue, b: &AMQPValue) -> bool {
    if let (Some(x), Some(y)) = (integer(a), integer(b)) {
        return x == y;
    }
    let bytes = |v: &AMQPValue| match v {
        AMQPValue::ShortString(s) => Some(s.as_str().as_bytes().to_vec()),
        AMQPValue::LongString(s) => Some(s.as_bytes().to_vec()),
        _ => None,
    };
    match (bytes(a), bytes(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_wildcards_match_words() {
        for (pattern, key) in [
            ("a.*.c", "a.b.c"),
            ("a.#", "a"),
            ("a.#", "a.b.c"),
            ("#", ""),
            ("#", "x.y"),
            ("#.c", "c"),
            ("*.b.#", "a.b"),
            ("a.#.z", "a.b.c.z"),
            ("", ""),
        ] {
            assert!(topic_matches(pattern, key), "{pattern} ~ {key}");
        }
        for (pattern, key) in [
            ("a.*", "a"),
            ("a.*", "a.b.c"),
            ("*", ""),
            ("a.b", "a.bb"),
            ("a.#.z", "a.b.c"),
            ("", "a"),
        ] {
            assert!(!topic_matches(pattern, key), "{pattern} !~ {key}");
        }
    }

    fn table(entries: &[(&str, AMQPValue)]) -> FieldTable {
        let mut t = FieldTable::default();
        for (k, v) in entries {
            t.insert((*k).into(), v.clone());
        }
        t
    }

    #[test]
    fn headers_all_and_any() {
        let headers = table(&[
            ("format", AMQPValue::LongString("pdf".into())),
            ("pages", AMQPValue::LongLongInt(3)),
        ]);
        let all = table(&[
            ("x-match", AMQPValue::LongString("all".into())),
            ("format", AMQPValue::ShortString("pdf".into())),
            ("pages", AMQPValue::ShortShortUInt(3)),
        ]);
        assert!(headers_match(&all, Some(&headers)));
        let all_missing = table(&[
            ("format", AMQPValue::LongString("pdf".into())),
            ("colour", AMQPValue::Void),
        ]);
        assert!(!headers_match(&all_missing, Some(&headers)));
        let any = table(&[
            ("x-match", AMQPValue::LongString("any".into())),
            ("format", AMQPValue::LongString("zip".into())),
            ("pages", AMQPValue::Void),
        ]);
        assert!(headers_match(&any, Some(&headers)));
        assert!(!headers_match(&any, None));
    }
}
