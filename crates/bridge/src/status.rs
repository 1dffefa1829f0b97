//! The connection state of every external source and sink, for `/readyz` detail, the
//! management API's routes and the `ferry_bridge_connection_up` gauge. A broker that is down does not make Ferry unready
//! (its fronts and other routes still serve); `/readyz` names it and why.

use ferry_telemetry::bridge as metric;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Shared connection states, by endpoint label (`source:NAME`, `sink:NAME`); cheap to
/// clone.
#[derive(Debug, Clone, Default)]
pub struct Status {
    states: Arc<Mutex<BTreeMap<String, Result<(), String>>>>,
}

impl Status {
    /// Records that `endpoint` is connected.
    pub fn up(&self, endpoint: &str) {
        self.set(endpoint, Ok(()));
    }

    /// Records that `endpoint` is not connected, and why.
    pub fn down(&self, endpoint: &str, why: impl Into<String>) {
        self.set(endpoint, Err(why.into()));
    }

    fn set(&self, endpoint: &str, state: Result<(), String>) {
        let value = if state.is_ok() { 1.0 } else { 0.0 };
        metrics::gauge!(metric::CONNECTION_UP, metric::LABEL_ENDPOINT => endpoint.to_owned())
            .set(value);
        self.states.lock().insert(endpoint.to_owned(), state);
    }

    /// The state of `endpoint`: `Ok` when connected, the reason when not, `None` when it
    /// has not been tried on this instance.
    pub fn get(&self, endpoint: &str) -> Option<Result<(), String>> {
        self.states.lock().get(endpoint).cloned()
    }

    /// One line per endpoint: `sink:kafka-out: up` or `source:rabbit-in: down: why`.
    pub fn lines(&self) -> Vec<String> {
        self.states
            .lock()
            .iter()
            .map(|(endpoint, state)| match state {
                Ok(()) => format!("{endpoint}: up"),
                Err(why) => format!("{endpoint}: down: {why}"),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_name_each_endpoint_and_why_it_is_down() {
        let s = Status::default();
        s.up("sink:a");
        s.down("source:b", "connection refused");
        assert_eq!(
            s.lines(),
            ["sink:a: up", "source:b: down: connection refused"]
        );
        s.up("source:b");
        assert_eq!(s.lines(), ["sink:a: up", "source:b: up"]);
    }
}
