//! The authorizer's decisions, as Kafka's `StandardAuthorizer` makes them.

use super::{AuthorizerSettings, Caller, Rules};
use crate::acls::model::{Acl, Operation, PatternType, Permission, ResourcePattern, ResourceType};
use Operation::{All, Describe, IdempotentWrite, Read, Write};
use PatternType::{Literal, Prefixed};
use Permission::{Allow, Deny};
use ResourceType::{Cluster, Group, Topic};

fn acl(
    rt: ResourceType,
    pt: PatternType,
    name: &str,
    principal: &str,
    op: Operation,
    perm: Permission,
) -> Acl {
    Acl {
        resource: ResourcePattern {
            resource_type: rt,
            pattern_type: pt,
            name: name.into(),
        },
        principal: principal.into(),
        host: "*".into(),
        operation: op,
        permission: perm,
    }
}

fn caller(name: &str) -> Caller {
    Caller {
        principal: format!("User:{name}"),
        host: "127.0.0.1".into(),
    }
}

fn settings(allow_everyone: bool) -> AuthorizerSettings {
    AuthorizerSettings {
        super_users: vec!["User:admin".into()],
        allow_everyone_if_no_acl_found: allow_everyone,
    }
}

#[test]
fn a_resource_without_acls_follows_allow_everyone_if_no_acl_found() {
    let acls = [acl(Topic, Literal, "guarded", "User:bob", Read, Allow)];
    for open in [true, false] {
        let s = settings(open);
        let rules = Rules::new(&acls, &s);
        assert_eq!(rules.allows(&caller("alice"), Write, Topic, "free"), open);
        // An ACL for someone else still makes the resource guarded.
        assert!(!rules.allows(&caller("alice"), Read, Topic, "guarded"));
        assert!(rules.allows(&caller("admin"), Write, Topic, "guarded"));
        assert!(rules.allows(&caller("admin"), Write, Topic, "free"));
    }
}

#[test]
fn write_implies_describe_but_not_read() {
    let acls = [acl(Topic, Literal, "t", "User:alice", Write, Allow)];
    let s = settings(false);
    let rules = Rules::new(&acls, &s);
    assert!(rules.allows(&caller("alice"), Write, Topic, "t"));
    assert!(rules.allows(&caller("alice"), Describe, Topic, "t"));
    assert!(!rules.allows(&caller("alice"), Read, Topic, "t"));
    assert!(!rules.allows(&caller("bob"), Describe, Topic, "t"));
}

#[test]
fn prefixed_and_wildcard_acls_apply_to_the_names_they_cover() {
    let acls = [
        acl(Topic, Prefixed, "orders-", "User:alice", Write, Allow),
        acl(Group, Literal, "*", "User:*", Read, Allow),
    ];
    let s = settings(false);
    let rules = Rules::new(&acls, &s);
    assert!(rules.allows(&caller("alice"), Write, Topic, "orders-eu"));
    assert!(!rules.allows(&caller("alice"), Write, Topic, "order"));
    assert!(rules.allows(&caller("anyone"), Read, Group, "g1"));
    assert!(!rules.allows(&caller("anyone"), Read, Topic, "orders-eu"));
}

#[test]
fn deny_wins_over_allow_for_its_operation_only() {
    let acls = [
        acl(Topic, Literal, "*", "User:alice", All, Allow),
        acl(Topic, Prefixed, "secret", "User:alice", Read, Deny),
    ];
    let s = settings(true);
    let rules = Rules::new(&acls, &s);
    assert!(rules.allows(&caller("alice"), Read, Topic, "public"));
    assert!(!rules.allows(&caller("alice"), Read, Topic, "secret-1"));
    assert!(rules.allows(&caller("alice"), Describe, Topic, "secret-1"));
    assert!(rules.allows(&caller("admin"), Read, Topic, "secret-1"));
}

#[test]
fn acls_for_a_host_apply_only_from_that_host() {
    let mut from_elsewhere = acl(Topic, Literal, "t", "User:alice", Read, Allow);
    from_elsewhere.host = "10.1.2.3".into();
    let acls = [from_elsewhere];
    let s = settings(false);
    let rules = Rules::new(&acls, &s);
    assert!(!rules.allows(&caller("alice"), Read, Topic, "t"));
    let there = Caller {
        host: "10.1.2.3".into(),
        ..caller("alice")
    };
    assert!(rules.allows(&there, Read, Topic, "t"));
}

#[test]
fn some_topic_is_writable_unless_every_allowed_pattern_is_denied() {
    let s = settings(false);
    let allow = acl(Topic, Prefixed, "out-", "User:alice", Write, Allow);
    let rules_of = |acls: &[Acl]| Rules::new(acls, &s).allows_some(&caller("alice"), Write, Topic);
    assert!(rules_of(std::slice::from_ref(&allow)));
    assert!(!rules_of(&[]));
    assert!(!rules_of(&[
        allow.clone(),
        acl(Topic, Prefixed, "out", "User:alice", Write, Deny)
    ]));
    assert!(!rules_of(&[
        allow.clone(),
        acl(Topic, Literal, "*", "User:alice", All, Deny)
    ]));
    assert!(rules_of(&[
        allow.clone(),
        acl(Topic, Literal, "out-1", "User:alice", Write, Deny)
    ]));
    // Describe is not enough: the allow must be for the operation itself.
    assert!(!rules_of(&[acl(
        Topic,
        Literal,
        "t",
        "User:alice",
        Describe,
        Allow
    )]));
    let idempotent = [acl(
        Cluster,
        Literal,
        "kafka-cluster",
        "User:alice",
        IdempotentWrite,
        Allow,
    )];
    assert!(Rules::new(&idempotent, &s).allows_some(&caller("alice"), IdempotentWrite, Cluster));
    assert!(Rules::new(&[], &settings(true)).allows_some(&caller("x"), Write, Topic));
}
