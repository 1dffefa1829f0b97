//! Users, permissions and definitions through the management API, driven by clients the
//! project did not write (`tests/python/management_definitions.py`: Python's urllib, pika
//! and RabbitMQ's own rabbitmqadmin): definitions exported from the suite's RabbitMQ node
//! are imported into a `ferry run` and appear the same (users, permissions, topic
//! permissions, exchanges, queues, bindings); the imported users log in to the AMQP front
//! as their permissions say; rabbitmqadmin declares and lists users and permissions and
//! exports and imports; bad input is a 4xx naming the reason and changes nothing.

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
