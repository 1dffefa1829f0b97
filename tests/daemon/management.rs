//! The management API with clients Ferry did not write: `rabbitmqadmin` (downloaded from
//! the suite's private RabbitMQ node, not committed), Python's requests and pika, each
//! answer's shape compared with the node's (tests/python/management_api.py); and tags and
//! permissions answering each request as the node does (tests/python/management_tags.py).

use crate::common::clients::{python_script, run};
use crate::common::daemon::Setup;
use crate::common::rabbitmq::RabbitNode;

#[tokio::test]
async fn rabbitmqadmin_and_python_manage_ferry_as_they_manage_rabbitmq() {
    let dir = tempfile::tempdir().unwrap();
    let ferry = Setup::shipped(dir.path()).start();
    let node = RabbitNode::get();
    let admin = dir.path().join("rabbitmqadmin");
    let url = format!("{}/cli/rabbitmqadmin", node.http_uri());
    run("curl", &["-sf", "-o", admin.to_str().unwrap(), &url], b"").await;
    let output = run(
        "python3",
        &[
            &python_script("management_api.py"),
            &ferry.management_uri(),
            &ferry.amqp_uri(),
            &node.http_uri(),
            node.uri(),
            admin.to_str().unwrap(),
        ],
        b"",
    )
    .await;
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "OK");
}

#[tokio::test]
async fn tags_and_permissions_refuse_and_allow_api_requests_as_rabbitmq_does() {
    let dir = tempfile::tempdir().unwrap();
    let ferry = Setup::shipped(dir.path()).start();
    let node = RabbitNode::get();
    // Users and queues named apart from other tests on the shared node.
    let prefix = crate::common::rabbitmq::unique("tags");
    let output = run(
        "python3",
        &[
            &python_script("management_tags.py"),
            &ferry.management_uri(),
            &node.http_uri(),
            &prefix,
        ],
        b"",
    )
    .await;
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "OK",
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
