//! `ferry status` (the instance's overview: version, listeners, object and message totals,
//! `/api/overview`) and `ferry health` (the health checks a load balancer or an operator
//! asks: resource alarms and virtual hosts; a failed one is an error, exit code 1).

use crate::client::{Client, ClientError};
use crate::output::{Column, Output, Part};
use serde_json::json;

/// What the overview shows.
const FIELDS: &[Column] = &[
    ("NODE", "node"),
    ("VERSION", "product_version"),
    ("CONNECTIONS", "object_totals.connections"),
    ("CHANNELS", "object_totals.channels"),
    ("CONSUMERS", "object_totals.consumers"),
    ("EXCHANGES", "object_totals.exchanges"),
    ("QUEUES", "object_totals.queues"),
    ("MESSAGES_READY", "queue_totals.messages_ready"),
    ("MESSAGES_UNACKED", "queue_totals.messages_unacknowledged"),
];

/// What the listener table shows.
const LISTENERS: &[Column] = &[
    ("PROTOCOL", "protocol"),
    ("ADDRESS", "ip_address"),
    ("PORT", "port"),
];

/// The health checks `ferry health` runs, by name.
const CHECKS: &[(&str, &str)] = &[
    ("alarms", "/api/health/checks/alarms"),
    ("virtual-hosts", "/api/health/checks/virtual-hosts"),
];

/// `ferry status`.
pub(crate) fn status(client: &Client) -> Result<Output, ClientError> {
    Ok(Output::new(
        client.get("/api/overview")?,
        vec![
            Part::Fields(FIELDS),
            Part::Table {
                rows: "listeners",
                columns: LISTENERS,
            },
        ],
    ))
}

/// `ferry health`: every check in turn; the first that fails is the error.
pub(crate) fn health(client: &Client) -> Result<Output, ClientError> {
    let mut passed = Vec::new();
    for (name, path) in CHECKS {
        let answer = client.get(path)?;
        passed.push(
            json!({"check": name, "status": answer.get("status").cloned().unwrap_or_default()}),
        );
    }
    Ok(Output::table(
        passed.into(),
        &[("CHECK", "check"), ("STATUS", "status")],
    ))
}
