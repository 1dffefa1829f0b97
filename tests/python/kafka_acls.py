"""kafka-python's KafkaAdminClient managing Kafka ACLs on Ferry, driven by tests/kafka/acls.rs.

kafka_acls.py BOOTSTRAP MECHANISM USER PASSWORD
    Logs in over SASL_PLAINTEXT with MECHANISM (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and
    runs the steps read from stdin, one per line, printing one line per step:

    create TYPE PATTERN NAME PRINCIPAL HOST OPERATION PERMISSION
        prints "created" or "failed <error class name>"
    describe TYPE PATTERN NAME|- PRINCIPAL|- HOST|- OPERATION PERMISSION
        prints "acls N" then each matching ACL as
        "TYPE PATTERN NAME PRINCIPAL HOST OPERATION PERMISSION", sorted;
        or "error <error class name>"
    delete TYPE PATTERN NAME|- PRINCIPAL|- HOST|- OPERATION PERMISSION
        prints "deleted N" then each deleted ACL as describe prints it, sorted; or
        "error <error class name>"

    TYPE, PATTERN, OPERATION and PERMISSION are kafka-python's enum names (TOPIC, GROUP,
    CLUSTER, TRANSACTIONAL_ID, ANY; LITERAL, PREFIXED, MATCH, ANY; READ, WRITE, ALL, ANY,
    …; ALLOW, DENY, ANY); "-" is None in filters.
"""

import sys

from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)


def optional(value):
    return None if value == "-" else value


def fields(words, concrete):
    kind, pattern, name, principal, host, operation, permission = words
    resource = (ResourcePattern if concrete else ResourcePatternFilter)(
        ResourceType[kind], optional(name), ACLResourcePatternType[pattern]
    )
    return (ACL if concrete else ACLFilter)(
        principal=optional(principal),
        host=optional(host),
        operation=ACLOperation[operation],
        permission_type=ACLPermissionType[permission],
        resource_pattern=resource,
    )


def line(acl):
    r = acl.resource_pattern
    return " ".join(
        [
            r.resource_type.name,
            r.pattern_type.name,
            r.resource_name,
            acl.principal,
            acl.host,
            acl.operation.name,
            acl.permission_type.name,
        ]
    )


def main(bootstrap, mechanism, user, password):
    admin = KafkaAdminClient(
        bootstrap_servers=bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism,
        sasl_plain_username=user,
        sasl_plain_password=password,
        client_id="py-acls",
        request_timeout_ms=30000,
    )
    for step in sys.stdin.read().splitlines():
        words = step.split()
        if not words:
            continue
        command, rest = words[0], words[1:]
        if command == "create":
            result = admin.create_acls([fields(rest, True)])
            if result["succeeded"]:
                print("created", flush=True)
            else:
                print("failed", result["failed"][0].__name__, flush=True)
        elif command == "describe":
            try:
                acls, _ = admin.describe_acls(fields(rest, False))
            except Exception as e:  # the error class names the Kafka error code
                print("error", type(e).__name__, flush=True)
                continue
            print("acls", len(acls), flush=True)
            for text in sorted(line(a) for a in acls):
                print(text, flush=True)
        elif command == "delete":
            [(_, matched, error)] = admin.delete_acls([fields(rest, False)])
            if error.errno != 0:
                print("error", error.__name__, flush=True)
                continue
            print("deleted", len(matched), flush=True)
            for text in sorted(line(a) for a in matched):
                print(text, flush=True)
        else:
            raise SystemExit("unknown step: " + step)
    admin.close()


if __name__ == "__main__":
    main(*sys.argv[1:5])
