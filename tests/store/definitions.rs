//! Definitions import and export over the user store and the AMQP front's topology, on
//! every engine: a RabbitMQ 3.10 export is imported whole (users, permissions, topic
//! permissions, exchanges, queues, bindings) and exported back the same, modulo the
//! documented differences; a vhost listed in a document is created with its topology; a
//! refused import — missing vhost, bad pattern, a binding to nothing, a permission for no
//! user — names its field and changes nothing (no vhost made either), in memory or in the
//! store.

use crate::common::store::TestStore;
use ferry_amqp::TopologyKeys;
use ferry_amqp::VHosts;
use ferry_auth::store::UserStore;
use ferry_management::definitions::{Definitions, ImportError, Target, export_all};
use ferry_stage::Stages;
use ferry_test_support::for_each_engine;

for_each_engine!(
    a_rabbitmq_export_is_imported_whole_and_exported_back,
    a_refused_import_names_its_field_and_changes_nothing,
    a_vhost_listed_in_a_document_is_created_with_its_topology,
);

/// An export of the test suite's RabbitMQ 3.10.8 node after declaring this topology and
/// these users through its API.
const RABBITMQ_EXPORT: &str = r#"{"rabbit_version":"3.10.8","rabbitmq_version":"3.10.8","product_name":"RabbitMQ","product_version":"3.10.8",
"users":[{"name":"alice","password_hash":"XWYYSLLWpwEW2nX6jgUFo0tkTf3n/kxb0jfkNRzIfXMhKTAC","hashing_algorithm":"rabbit_password_hashing_sha256","tags":["management","policymaker"],"limits":{}},
         {"name":"bob","password_hash":"","hashing_algorithm":"rabbit_password_hashing_sha256","tags":"monitoring","limits":{}}],
"vhosts":[{"name":"/"}],
"permissions":[{"user":"alice","vhost":"/","configure":"^a","write":".*","read":"r"}],
"topic_permissions":[{"user":"alice","vhost":"/","exchange":"orders","write":"^{username}","read":".*"}],
"parameters":[],"global_parameters":[{"name":"internal_cluster_id","value":"rabbitmq-cluster-id-XyalL"}],"policies":[],
"queues":[{"name":"orders.q","vhost":"/","durable":true,"auto_delete":false,"arguments":{"x-max-priority":5,"x-message-ttl":60000,"x-dead-letter-exchange":"amq.fanout"}}],
"exchanges":[{"name":"orders","vhost":"/","type":"topic","durable":true,"auto_delete":false,"internal":false,"arguments":{"alternate-exchange":"ae"}}],
"bindings":[{"source":"orders","vhost":"/","destination":"amq.fanout","destination_type":"exchange","routing_key":"k","arguments":{}},
            {"source":"orders","vhost":"/","destination":"orders.q","destination_type":"queue","routing_key":"order.*","arguments":{"x":"y"}}]}"#;

/// The user store and the virtual hosts (configured: `/` and `other`) over `store`,
/// loaded from it.
async fn open(store: &TestStore) -> (UserStore, VHosts) {
    let prefix = std::str::from_utf8(&store.prefix).unwrap();
    let stages = Stages::new(store.db.clone(), prefix);
    stages.ensure_schema().await.unwrap();
    let (opened, _) = tokio::sync::mpsc::unbounded_channel();
    let vhosts = VHosts::open(
        vec!["/".to_owned(), "other".to_owned()],
        store.db.clone(),
        stages,
        TopologyKeys::new(prefix),
        opened,
    )
    .await
    .unwrap();
    (UserStore::new(store.db.clone(), prefix), vhosts)
}

fn parse(json: &str) -> Definitions {
    serde_json::from_str(json).unwrap()
}

async fn import(
    store: &TestStore,
    json: &str,
) -> Result<ferry_management::definitions::Imported, ImportError> {
    let (users, vhosts) = open(store).await;
    let target = Target {
        users: &users,
        vhosts: &vhosts,
        transient_owner: 0,
    };
    target.import(parse(json), None).await
}

/// What an export holds, without what differs by design (versions, product, cluster id).
async fn exported(store: &TestStore) -> serde_json::Value {
    let (users, vhosts) = open(store).await;
    let mut all =
        serde_json::to_value(export_all(&users, &vhosts, "3.10.8").await.unwrap()).unwrap();
    let object = all.as_object_mut().unwrap();
    for field in [
        "rabbitmq_version",
        "product_name",
        "product_version",
        "global_parameters",
    ] {
        object.remove(field);
    }
    all
}

async fn a_rabbitmq_export_is_imported_whole_and_exported_back(store: TestStore) {
    let imported = import(&store, RABBITMQ_EXPORT).await.unwrap();
    assert_eq!(
        (
            imported.users,
            imported.permissions,
            imported.topic_permissions
        ),
        (2, 1, 1)
    );
    assert_eq!(
        (imported.exchanges, imported.queues, imported.bindings),
        (1, 1, 2)
    );

    // Read back through a fresh front over the same store: it is all in the store.
    let mut expected = serde_json::to_value(parse(RABBITMQ_EXPORT)).unwrap();
    let object = expected.as_object_mut().unwrap();
    for field in [
        "rabbitmq_version",
        "product_name",
        "product_version",
        "global_parameters",
    ] {
        object.remove(field);
    }
    // Tags are always written as a list; "other" is a configured vhost too.
    expected["users"][1]["tags"] = serde_json::json!(["monitoring"]);
    expected["vhosts"] = serde_json::json!([{"name": "/"}, {"name": "other"}]);
    assert_eq!(exported(&store).await, expected);

    let (users, _) = open(&store).await;
    let alice = users.get("alice").await.unwrap().unwrap();
    assert_eq!(alice.tags, ["management", "policymaker"]);
    assert!(
        users
            .get("bob")
            .await
            .unwrap()
            .unwrap()
            .password_hash
            .is_none()
    );

    // Importing the same again changes nothing and is no error (declares are checks).
    let again = import(&store, RABBITMQ_EXPORT).await.unwrap();
    assert_eq!((again.exchanges, again.queues, again.bindings), (0, 0, 0));
}

async fn a_refused_import_names_its_field_and_changes_nothing(store: TestStore) {
    import(&store, RABBITMQ_EXPORT).await.unwrap();
    let before = exported(&store).await;
    let refusal = |json: String| {
        let store = &store;
        async move {
            match import(store, &json).await {
                Err(ImportError::Refused(reason)) => reason,
                other => panic!("expected a refusal, got {other:?}"),
            }
        }
    };
    // Each document adds a user and a queue first, so a partial import would show.
    let with = |tail: &str| {
        format!(
            r#"{{"users":[{{"name":"carol","password_hash":"","tags":[]}}],
                "queues":[{{"name":"new.q","vhost":"/","durable":true,"auto_delete":false,"arguments":{{}}}}]{tail}}}"#
        )
    };
    assert_eq!(
        refusal(with(r#","exchanges":[{"name":"e","vhost":"nope","type":"direct","durable":true,"auto_delete":false,"internal":false,"arguments":{}}]"#)).await,
        "exchanges[0].vhost: vhost 'nope' does not exist (create it first, or list it under vhosts)"
    );
    // A vhost the refused document would have made is not made.
    assert!(
        refusal(with(
            r#","vhosts":[{"name":"made"}],"permissions":[{"user":"carol","vhost":"made","configure":"(","write":"","read":""}]"#
        ))
        .await
        .starts_with("permissions[0].configure: '(' is not a valid regular expression")
    );
    assert!(
        refusal(with(
            r#","permissions":[{"user":"carol","vhost":"/","configure":"(","write":"","read":""}]"#
        ))
        .await
        .starts_with("permissions[0].configure: '(' is not a valid regular expression")
    );
    assert_eq!(
        refusal(with(r#","bindings":[{"source":"orders","vhost":"/","destination":"missing","destination_type":"queue","routing_key":"","arguments":{}}]"#)).await,
        "vhost '/': no queue 'missing' in vhost '/'"
    );
    assert_eq!(
        refusal(with(
            r#","permissions":[{"user":"nobody","vhost":"/","configure":"","write":"","read":""}]"#
        ))
        .await,
        "permissions: user 'nobody' is neither in the file nor in the store"
    );
    assert_eq!(
        refusal(with(r#","exchanges":[{"name":"orders","vhost":"/","type":"direct","durable":true,"auto_delete":false,"internal":false,"arguments":{}}]"#)).await,
        "vhost '/': inequivalent arg 'type' for exchange 'orders' in vhost '/': received 'direct' but current is 'topic'"
    );
    assert!(
        refusal(with(r#","policies":[{"name":"ttl"}]"#))
            .await
            .starts_with("policies[0]: Ferry has no policies")
    );
    assert_eq!(exported(&store).await, before);
}

async fn a_vhost_listed_in_a_document_is_created_with_its_topology(store: TestStore) {
    let imported = import(
        &store,
        r#"{"vhosts":[{"name":"eu","description":"orders","tags":"a,b","default_queue_type":"quorum"}],
            "users":[{"name":"dan","password_hash":"","tags":[]}],
            "permissions":[{"user":"dan","vhost":"eu","configure":".*","write":".*","read":".*"}],
            "queues":[{"name":"eu.q","vhost":"eu","durable":true,"auto_delete":false,"arguments":{}}]}"#,
    )
    .await
    .unwrap();
    assert_eq!((imported.vhosts, imported.queues), (1, 1));
    // Read back through a fresh front over the same store.
    let (_, vhosts) = open(&store).await;
    let eu = vhosts.get("eu").expect("the vhost was made");
    assert!(eu.topology().queues.contains_key("eu.q"));
    let meta = vhosts.meta("eu").unwrap();
    assert_eq!(
        (
            meta.description.as_str(),
            meta.tags,
            meta.default_queue_type
        ),
        (
            "orders",
            vec!["a".to_owned(), "b".to_owned()],
            Some("quorum".to_owned())
        )
    );
    let all = exported(&store).await;
    assert_eq!(
        all["vhosts"],
        serde_json::json!([
            {"name": "/"},
            {"name": "eu", "description": "orders", "tags": ["a", "b"],
             "metadata": {"description": "orders", "tags": ["a", "b"]}, "default_queue_type": "quorum"},
            {"name": "other"}
        ])
    );
}
