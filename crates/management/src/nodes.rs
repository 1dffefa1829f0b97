//! The node endpoints monitoring tools poll (`rabbitmqadmin list nodes`, RabbitMQ's
//! Prometheus-less integrations): `/api/nodes` (every instance over the store as one of
//! RabbitMQ's cluster nodes, with its memory, descriptors, sockets, disk and alarms),
//! `/api/nodes/{name}`, `/api/cluster-name`, `/api/extensions` and the old
//! `/api/healthchecks/node`.
//!
//! The answering instance's figures are its own, read when asked: resident memory against
//! the memory high-water mark (`daemon.max_memory_mb`), open descriptors against their
//! limit, the sockets among them, the store's free disk space against
//! `store.min_free_disk_mb`, and the runtime's live tasks and queued tasks where RabbitMQ
//! counts Erlang processes and its run queue. Every other instance's are what it last
//! published to the store ([`publish`], [`crate::node_registry`]).

use super::Api;
use super::administrator::monitor;
use super::error::{ApiError, ApiResult};
use super::login::Principal;
use super::node_registry::{LIVENESS, NodeRegistry, Registered};
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
use tokio_util::sync::CancellationToken;
use tracing::warn;

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
    /// The instances over the store, this one's entry published there.
    pub nodes: NodeRegistry,
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

/// `GET /api/nodes`: this instance first, then every other over the store.
async fn nodes(State(api): State<Api>, principal: Principal) -> ApiResult<Json<Vec<Value>>> {
    monitor(&principal)?;
    let mut nodes = vec![node_json(&api)];
    nodes.extend(others(&api).await?.into_iter().map(|r| r.entry));
    Ok(Json(nodes))
}

/// `GET /api/nodes/{name}`.
async fn node(
    State(api): State<Api>,
    principal: Principal,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    monitor(&principal)?;
    if name == api.node {
        return Ok(Json(node_json(&api)));
    }
    Ok(Json(other(&api, &name).await?.entry))
}

/// The other instances over the store, by name.
async fn others(api: &Api) -> ApiResult<Vec<Registered>> {
    let listed = api.resources.nodes.list().await.map_err(|e| {
        warn!(error = %e, "cannot list the nodes over the store");
        ApiError::internal(format!("cannot list the nodes: {e}"))
    })?;
    Ok(listed.into_iter().filter(|r| r.name != api.node).collect())
}

/// The other instance named `name`: 404 when the store has none.
async fn other(api: &Api, name: &str) -> ApiResult<Registered> {
    others(api)
        .await?
        .into_iter()
        .find(|r| r.name == name)
        .ok_or_else(ApiError::not_found)
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

/// `GET /api/healthchecks/node/{name}`: `failed` for a node that stopped.
async fn healthy_node(
    State(api): State<Api>,
    _: Principal,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    if name != api.node && other(&api, &name).await?.entry["running"] != true {
        return Ok(Json(
            json!({"status": "failed", "reason": format!("node {name} is not running")}),
        ));
    }
    Ok(Json(json!({"status": "ok"})))
}

/// Publishes this instance's `/api/nodes` entry to the store now and at every renewal of
/// [`LIVENESS`] until `shutdown`, then ends its term, so the other instances list it as
/// stopped.
pub async fn publish(api: Api, shutdown: CancellationToken) {
    let publish = || async {
        if let Err(e) = api.resources.nodes.publish(&node_json(&api)).await {
            warn!(error = %e, "cannot publish this node to the store");
        }
    };
    publish().await;
    LIVENESS.renew_until(&shutdown, publish).await;
    if let Err(e) = api.resources.nodes.leave(&node_json(&api)).await {
        warn!(error = %e, "cannot mark this node stopped in the store");
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
