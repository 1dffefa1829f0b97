#!/usr/bin/env python3
"""Stand-ins for the two Kafka shell tools librdkafka's test suite calls.

Some tests of librdkafka's suite run `$KAFKA_PATH/bin/kafka-topics.sh` and
`$KAFKA_PATH/bin/kafka-acls.sh` from a Kafka distribution (tests/test.c,
test_kafka_topics() and test_kafka_cmd()). scripts/librdkafka-tests.sh points KAFKA_PATH
at a directory whose bin/ holds two wrappers that exec this file, which does what those
calls ask with kafka-python's admin client over the Kafka protocol (CreateTopics,
DeleteTopics, CreatePartitions, CreateAcls, DeleteAcls) -- what Kafka's own tools do
with --bootstrap-server. Only the options the suite uses are understood:

  kafka-topics.sh (--zookeeper|--bootstrap-server) HOST:PORT --create --topic T
                  [--partitions N] [--replication-factor R] [--config K=V]...
  kafka-topics.sh ... --delete --topic T
  kafka-topics.sh ... --alter --topic T --partitions N
  kafka-acls.sh --bootstrap-server HOST:PORT (--add|--remove [--force])
                (--allow-principal|--deny-principal) P --operation OP
                [--allow-host|--deny-host H] --topic T

--zookeeper is taken as the broker's address (the suite passes ZK_ADDRESS there for
brokers older than 3.0). Exits 1 with the broker's error when a request fails.
"""

import re
import sys

from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    NewPartitions,
    NewTopic,
    ResourcePattern,
    ResourceType,
)


def parse(argv, multi=("--config",)):
    """Options as a dict: `--flag` -> True, `--key value` -> value (a list for `multi`)."""
    opts = {}
    i = 0
    while i < len(argv):
        key = argv[i]
        if not key.startswith("--"):
            sys.exit(f"unexpected argument {key!r}")
        has_value = i + 1 < len(argv) and not argv[i + 1].startswith("--")
        value = argv[i + 1] if has_value else True
        if key in multi:
            opts.setdefault(key, []).append(value)
        else:
            opts[key] = value
        i += 2 if has_value else 1
    return opts


def admin(opts):
    bootstrap = opts.get("--bootstrap-server") or opts.get("--zookeeper")
    if not isinstance(bootstrap, str):
        sys.exit("--bootstrap-server HOST:PORT is required")
    return KafkaAdminClient(bootstrap_servers=bootstrap, client_id="ferry-kafka-tools",
                            request_timeout_ms=30000)


def topics(argv):
    opts = parse(argv)
    topic = opts.get("--topic")
    if not isinstance(topic, str):
        sys.exit("--topic is required")
    client = admin(opts)
    try:
        if opts.get("--create"):
            configs = dict(c.split("=", 1) for c in opts.get("--config", []))
            client.create_topics([NewTopic(topic, int(opts.get("--partitions", 1)),
                                           int(opts.get("--replication-factor", 1)),
                                           topic_configs=configs)])
            print(f"Created topic {topic}.")
        elif opts.get("--delete"):
            client.delete_topics([topic])
            print(f"Topic {topic} is marked for deletion.")
        elif opts.get("--alter") and "--partitions" in opts:
            client.create_partitions({topic: NewPartitions(int(opts["--partitions"]))})
            print(f"Topic {topic} now has {opts['--partitions']} partitions.")
        else:
            sys.exit(f"unsupported kafka-topics.sh call: {argv}")
    finally:
        client.close()


def operation(name):
    """Kafka's CamelCase operation name (DescribeConfigs) as kafka-python's enum."""
    return ACLOperation[re.sub(r"(?<=[a-z])(?=[A-Z])", "_", name).upper()]


def acls(argv):
    opts = parse(argv)
    topic = opts.get("--topic")
    if not isinstance(topic, str) or "--operation" not in opts:
        sys.exit("--topic and --operation are required")
    if "--allow-principal" in opts:
        principal, permission = opts["--allow-principal"], ACLPermissionType.ALLOW
        host = opts.get("--allow-host", "*")
    elif "--deny-principal" in opts:
        principal, permission = opts["--deny-principal"], ACLPermissionType.DENY
        host = opts.get("--deny-host", "*")
    else:
        sys.exit("--allow-principal or --deny-principal is required")
    pattern = ResourcePattern(ResourceType.TOPIC, topic, ACLResourcePatternType.LITERAL)
    client = admin(opts)
    try:
        if opts.get("--add"):
            acl = ACL(principal, host, operation(opts["--operation"]), permission, pattern)
            result = client.create_acls([acl])
            if result["failed"]:
                sys.exit(f"CreateAcls failed: {result['failed']}")
            print(f"Added ACL {acl}")
        elif opts.get("--remove"):
            acl = ACLFilter(principal, host, operation(opts["--operation"]), permission,
                            pattern)
            for _, matched, error in client.delete_acls([acl]):
                if error.errno:
                    sys.exit(f"DeleteAcls failed: {error}")
                print(f"Removed {len(matched)} ACL(s) matching {acl}")
        else:
            sys.exit(f"unsupported kafka-acls.sh call: {argv}")
    finally:
        client.close()


def main():
    tools = {"kafka-topics.sh": topics, "kafka-acls.sh": acls}
    if len(sys.argv) < 2 or sys.argv[1] not in tools:
        sys.exit(f"usage: {sys.argv[0]} {{{','.join(tools)}}} ARGS...")
    try:
        tools[sys.argv[1]](sys.argv[2:])
    except Exception as e:  # the broker's error, as the real tool prints it
        sys.exit(f"{sys.argv[1]}: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
