"""confluent-kafka's AdminClient managing SCRAM credentials on Ferry (KIP-554: librdkafka's
DescribeUserScramCredentials and AlterUserScramCredentials), driven by
tests/kafka/scram_credentials.rs.

kafka_scram_credentials.py BOOTSTRAP MECHANISM USER PASSWORD
    Logs in over SASL_PLAINTEXT with MECHANISM (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and
    runs the steps read from stdin, one request per line, printing one line per user the
    answer names, sorted by user:

    alter ALTERATION...
        one AlterUserScramCredentials request of every ALTERATION, which is
        upsert:USER:MECHANISM:ITERATIONS:PASSWORD (librdkafka draws a salt and sends the
        salted password) or delete:USER:MECHANISM; prints "USER ok" or "USER <error name>"
    describe [USER...]
        one DescribeUserScramCredentials request of the USERs (none: every user); prints
        "USER MECHANISM:ITERATIONS[,MECHANISM:ITERATIONS]" or "USER <error name>"
        (librdkafka aborts on a request refused as a whole)

    MECHANISM in alterations and answers is confluent-kafka's ScramMechanism name
    (SCRAM_SHA_256, SCRAM_SHA_512).
"""

import sys

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

TIMEOUT = 20


def alteration(text):
    kind, user, mechanism, *rest = text.split(":")
    mechanism = ScramMechanism[mechanism]
    if kind == "delete":
        return UserScramCredentialDeletion(user, mechanism)
    iterations, password = rest
    info = ScramCredentialInfo(mechanism, int(iterations))
    return UserScramCredentialUpsertion(user, info, password.encode())


def error_name(exception):
    return exception.args[0].name()


def credentials(description):
    return ",".join(
        f"{info.mechanism.name}:{info.iterations}"
        for info in sorted(
            description.scram_credential_infos, key=lambda i: i.mechanism.value
        )
    )


def alter(admin, words):
    futures = admin.alter_user_scram_credentials([alteration(w) for w in words])
    for user in sorted(futures):
        try:
            futures[user].result(TIMEOUT)
            print(f"{user} ok", flush=True)
        except KafkaException as e:
            print(f"{user} {error_name(e)}", flush=True)


def describe(admin, users):
    if not users:
        described = admin.describe_user_scram_credentials().result(TIMEOUT)
        for user in sorted(described):
            print(f"{user} {credentials(described[user])}", flush=True)
        return
    futures = admin.describe_user_scram_credentials(users)
    for user in sorted(futures):
        try:
            print(f"{user} {credentials(futures[user].result(TIMEOUT))}", flush=True)
        except KafkaException as e:
            print(f"{user} {error_name(e)}", flush=True)


def main(bootstrap, mechanism, user, password):
    admin = AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": mechanism,
            "sasl.username": user,
            "sasl.password": password,
        }
    )
    for line in sys.stdin:
        step, *words = line.split()
        if step == "alter":
            alter(admin, words)
        elif step == "describe":
            describe(admin, words)
        else:
            raise SystemExit(f"unknown step {step!r}")


if __name__ == "__main__":
    main(*sys.argv[1:5])
