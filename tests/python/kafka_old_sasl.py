"""SASL logins of kafka-python pinned to an old Kafka (api_version), driven by
tests/kafka/old_clients.rs: pinned to 0.10, kafka-python sends SaslHandshake v0 and then
the SASL exchange as bare size-prefixed tokens, Kafka 0.10's framing; pinned to 1.0 and
later, SaslHandshake v1 and SaslAuthenticate requests.

kafka_old_sasl.py BOOTSTRAP API_VERSION MECHANISM USER PASSWORD TOPIC
    Produces one record to TOPIC (auto-created) logged in as USER with MECHANISM (PLAIN,
    SCRAM-SHA-256, SCRAM-SHA-512). Prints one JSON object: {"produced": offset}, or
    {"refused": error name} when the login (and so the send) fails.
"""

import json
import sys

from kafka import KafkaProducer


def main(bootstrap, api_version, mechanism, user, password, topic):
    version = tuple(int(p) for p in api_version.split("."))
    try:
        producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            api_version=version,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism=mechanism,
            sasl_plain_username=user,
            sasl_plain_password=password,
            max_block_ms=5_000,
            request_timeout_ms=5_000,
        )
        offset = producer.send(topic, b"logged in").get(timeout=10).offset
        producer.close(timeout=5)
        print(json.dumps({"produced": offset}))
    except Exception as e:  # pylint: disable=broad-except
        print(json.dumps({"refused": type(e).__name__}))


if __name__ == "__main__":
    main(*sys.argv[1:7])
