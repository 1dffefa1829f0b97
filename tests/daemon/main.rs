//! The `ferry` binary as an operator meets it: `ferry run`'s health, readiness, signals and
//! startup failures, the `validate` and `hash-password` commands, the admin commands over
//! the management API, the files shipped in `deploy/` and the container image built from
//! them; TLS certificates reloaded and HTTPS; metrics under RabbitMQ's and kafka_exporter's
//! names; the load tools over TLS; online backup and restore; stores of earlier releases
//! opened and newer ones refused; the management API driven by
//! rabbitmqadmin and Python, and its web UI in headless Chromium; the source tree's
//! layering as a newcomer reads it; and the fuzz targets' kept inputs replayed. One test
//! binary; one module per subject.

use ferry_test_support as common;

mod admin_cli;
mod backup;
mod bench_tls;
mod cli;
mod deploy_config;
mod deploy_metrics;
mod fuzz_corpus;
#[path = "../../fuzz/targets/mod.rs"]
mod fuzz_targets;
mod image;
mod layering;
mod lifecycle;
mod management;
mod management_definitions;
mod promcompat;
mod tls;
mod ui;
mod upgrade;
