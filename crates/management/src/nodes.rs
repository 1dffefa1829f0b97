//! The node endpoints monitoring tools poll (`rabbitmqadmin list nodes`, RabbitMQ's
//! Prometheus-less integrations): `/api/nodes` (this instance as RabbitMQ's one node,
//! with its memory, descriptors, sockets, disk and alarms), `/api/nodes/{name}`,
//! `/api/cluster-name`, `/api/extensions` and the old `/api/healthchecks/node`.
//!
//! Each figure is this process's own, read when asked: resident memory against the
//! memory high-water mark (`daemon.max_memory_mb`), open descriptors against their limit,
//! the sockets among them, the store's free disk space against `store.min_free_disk_mb`,
//! and the runtime's live tasks and queued tasks where RabbitMQ counts Erlang processes
//! and its run queue. Instances that share a FoundationDB store each answer for
//! themselves; there is no cluster-wide view (docs/management.md, "Nodes").

use super::Api;
use super::administrator::monitor;
use super::error::{ApiError, ApiResult};
use super::login::Principal;
use super::reply::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::routing::get;
use ferry_store::Database;
use ferry_telemetry::file_system::available_bytes;
use ferry_telemetry::memory_watermark::MemoryWatermark;
use ferry_telemetry::process;
use serde_json::{Value, json};
use std::time::Instant;

/// What the node endpoints read of the process: the parts of the daemon that hold a
/// resource's limit or alarm.
pub struct Resources {
    /// When the daemon started (`uptime`).
    pub started: Instant,
    /// The memory high-water mark (`mem_limit`, `mem_alarm`).
    pub memory: MemoryWatermark,
    /// The store (`disk_free`, `disk_free_alarm`, and `db_dir`: the embedded store's
    /// directory, on whose disk `disk_free` is read while the store has not measured it).
    pub store: Database,
    /// `store.min_free_disk_mb`, in bytes (`disk_free_limit`).
    pub disk_free_limit_bytes: u64,
}

/// The routes of this family.
pub(crate) fn routes() -> Router<Api> {
    Router::new()
        .route("/api/nodes", get(nodes))
        .route("/api/nodes/{name}", get(node))
        .route("/api/cluster-name", get(cluster_name))
        .route("/api/extensions", get(extensions))
        .route("/api/healthchecks/node", get(healthy))
        .route("/api/healthchecks/node/{name}", get(healthy_node))
}

/// `GET /api/nodes`: the one node this instance is.
async fn nodes(State(api): State<Api>, principal: Principal) -> ApiResult<Json<Vec<Value>>> {
    monitor(&principal)?;
    Ok(Json(vec![node_json(&api)]))
}

/// `GET /api/nodes/{name}`.
async fn node(
    State(api): State<Api>,
    principal: Principal,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    monitor(&principal)?;
    known(&api, &name)?;
    Ok(Json(node_json(&api)))
}

/// `GET /api/cluster-name`: the node name, as a cluster of one is named by default.
async fn cluster_name(State(api): State<Api>, _: Principal) -> Json<Value> {
    Json(json!({ "name": api.node }))
}

/// `GET /api/extensions`: the web UI's extensions, of which Ferry has none.
async fn extensions(_: Principal) -> Json<Vec<Value>> {
    Json(Vec::new())
}

/// `GET /api/healthchecks/node`: answering at all is the check (RabbitMQ 3.10's
/// deprecated node check, which tools still call).
async fn healthy(_: Principal) -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// `GET /api/healthchecks/node/{name}`.
async fn healthy_node(
    State(api): State<Api>,
    _: Principal,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    known(&api, &name)?;
    Ok(Json(json!({"status": "ok"})))
}

/// Refuses a node name that is not this instance's.
fn known(api: &Api, name: &str) -> ApiResult<()> {
    if name == api.node {
        Ok(())
    } else {
        Err(ApiError::not_found())
    }
}

/// `names` as RabbitMQ lists mechanisms and exchange types.
fn named(names: &[&str]) -> Vec<Value> {
    names
        .iter()
        .map(|n| json!({"name": n, "description": "", "enabled": true}))
        .collect()
}

/// This instance in `/api/nodes`' shape (`auth_mechanisms`: the AMQP front's password
/// mechanisms; EXTERNAL is offered only on a TLS listener that verifies certificates).
fn node_json(api: &Api) -> Value {
    let r = &api.resources;
    let disk_free = r
        .store
        .disk_free_bytes()
        .or_else(|| r.store.data_dir().and_then(available_bytes));
    let fd_total = process::max_fds();
    let runtime = tokio::runtime::Handle::current().metrics();
    let contexts: Vec<Value> = api
        .listeners
        .iter()
        .filter(|l| matches!(l.protocol.as_str(), "http" | "https" | "prometheus"))
        .map(|l| {
            json!({
                "description": if l.protocol == "prometheus" { "Ferry metrics" } else { "Ferry Management" },
                "path": "/",
                "ip": l.addr.ip().to_string(),
                "port": l.addr.port().to_string(),
                "protocol": l.protocol,
            })
        })
        .collect();
    json!({
        "name": api.node,
        "type": "disc",
        "running": true,
        "os_pid": std::process::id().to_string(),
        "processors": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "uptime": u64::try_from(r.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "rates_mode": "basic",
        "mem_used": process::resident_bytes(),
        "mem_limit": r.memory.limit_bytes(),
        "mem_alarm": r.memory.raised().is_some(),
        "mem_calculation_strategy": "rss",
        "disk_free": disk_free,
        "disk_free_limit": r.disk_free_limit_bytes,
        "disk_free_alarm": r.store.disk_alarm().is_some(),
        "fd_used": process::open_fds(),
        "fd_total": fd_total,
        "sockets_used": process::open_sockets(),
        "sockets_total": fd_total,
        "proc_used": runtime.num_alive_tasks(),
        "run_queue": runtime.global_queue_depth(),
        "partitions": [],
        "cluster_links": [],
        "applications": [{
            "name": "ferry",
            "description": "Ferry, serving RabbitMQ's management API",
            "version": env!("CARGO_PKG_VERSION"),
        }],
        "enabled_plugins": [],
        "auth_mechanisms": named(&["PLAIN", "AMQPLAIN"]),
        "exchange_types": named(&["direct", "fanout", "headers", "topic"]),
        "contexts": contexts,
        "log_files": ["<stdout>"],
        "db_dir": r.store.data_dir().map(|d| d.display().to_string()),
    })
}
