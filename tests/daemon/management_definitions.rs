//! Users, permissions and definitions through the management API, driven by clients the
//! project did not write (`tests/python/management_definitions.py`: Python's urllib, pika
//! and RabbitMQ's own rabbitmqadmin): definitions exported from the suite's RabbitMQ node
//! are imported into a `ferry run` and appear the same (users, permissions, topic
//! permissions, exchanges, queues, bindings); the imported users log in to the AMQP front
//! as their permissions say; rabbitmqadmin declares and lists users and permissions and
//! exports and imports; bad input is a 4xx naming the reason and changes nothing; and
//! Ferry's own parts (SCRAM credentials, Kafka topics, ACLs, committed offsets, runtime
//! routes) moved from one daemon to another and used there with confluent-kafka
//! (`tests/python/management_definitions_ferry.py`).

use crate::common::clients::python_script;
use crate::common::daemon::Setup;
use crate::common::rabbitmq::{RabbitNode, unique};
use std::process::Command;

#[test]
fn rabbitmq_definitions_users_and_permissions_move_into_ferry_with_rabbitmqs_clients() {
    let node = RabbitNode::get();
    let dir = tempfile::tempdir().unwrap();
    let daemon = Setup::shipped(dir.path()).start();
    let out = Command::new("python3")
        .arg(python_script("management_definitions.py"))
        .arg(node.http_uri())
        .arg(daemon.management_uri())
        .arg(daemon.ports().amqp.to_string())
        .arg(unique("defs"))
        .arg(dir.path())
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.trim_end().ends_with("ok"),
        "management_definitions.py failed ({}):\n{stdout}\n{}\nferry's log:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        daemon.log()
    );
}

#[test]
fn ferrys_own_parts_move_between_daemons_in_the_definitions_and_work_there() {
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = Setup::shipped(dir_a.path()).start();
    let b = Setup::shipped(dir_b.path())
        .env("FERRY__KAFKA__REQUIRE_SASL", "true")
        .start();
    let out = Command::new("python3")
        .arg(python_script("management_definitions_ferry.py"))
        .arg(a.management_uri())
        .arg(a.kafka_bootstrap())
        .arg(b.management_uri())
        .arg(b.kafka_bootstrap())
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.trim_end().ends_with("ok"),
        "management_definitions_ferry.py failed ({}):\n{stdout}\n{}\nB's log:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        b.log()
    );
}
