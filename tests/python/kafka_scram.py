"""kafka-python with SASL SCRAM against Ferry's Kafka front, driven by tests/kafka/interop.rs
(SASL_PLAINTEXT) and tests/kafka/tls.rs (SASL_SSL).

kafka_scram.py BOOTSTRAP MECHANISM USER PASSWORD TOPIC RECORDS [CA_FILE]
    Over SASL_PLAINTEXT (or SASL_SSL trusting CA_FILE, and checking the broker's name,
    when CA_FILE is given) with MECHANISM (SCRAM-SHA-256 or SCRAM-SHA-512) as USER,
    produces RECORDS records (value vI) to TOPIC with acks=all, reads them back from the
    beginning, and prints each value read, one per line.
"""

import sys

from kafka import KafkaConsumer, KafkaProducer

TIMEOUT_S = 60


def main(bootstrap, mechanism, user, password, topic, records, ca_file=None):
    sasl = dict(
        bootstrap_servers=bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism,
        sasl_plain_username=user,
        sasl_plain_password=password,
    )
    if ca_file is not None:
        sasl.update(
            security_protocol="SASL_SSL",
            ssl_cafile=ca_file,
            ssl_check_hostname=True,
        )
    producer = KafkaProducer(acks="all", client_id="py-scram-producer", **sasl)
    for i in range(records):
        producer.send(topic, value=b"v%d" % i)
    producer.flush(timeout=TIMEOUT_S)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=TIMEOUT_S * 1000,
        client_id="py-scram-consumer",
        **sasl,
    )
    seen = 0
    for message in consumer:
        print(message.value.decode(), flush=True)
        seen += 1
        if seen == records:
            break
    consumer.close()


if __name__ == "__main__":
    bootstrap, mechanism, user, password, topic, records = sys.argv[1:7]
    main(bootstrap, mechanism, user, password, topic, int(records), *sys.argv[7:8])
