"""Large messages with pika: bodies of the given sizes (MiB) published with confirms,
consumed with an ack, and published again and taken by basic.get without ack; each body
must arrive whole and unchanged.

Usage:
    amqp_large.py AMQP_PORT SIZE_MIB...

Prints one JSON object: for each size, what arrived by each way (length, and whether its
SHA-256 matches what was published).
"""
import hashlib
import json
import os
import sys

import pika

amqp_port = int(sys.argv[1])
sizes = [int(s) for s in sys.argv[2:]]
MIB = 1024 * 1024

connection = pika.BlockingConnection(
    pika.ConnectionParameters("127.0.0.1", amqp_port, blocked_connection_timeout=120)
)
ch = connection.channel()
ch.confirm_delivery()
ch.queue_declare("pika-large", durable=True)


def seen(body, digest):
    return {"len": len(body), "same": hashlib.sha256(body).digest() == digest}


findings = {}
for size in sizes:
    body = os.urandom(size * MIB)
    digest = hashlib.sha256(body).digest()
    # A confirm raises when the publish is nacked or the channel closes.
    ch.basic_publish("", "pika-large", body, pika.BasicProperties(delivery_mode=2))
    consumed = None
    for method, _, got in ch.consume("pika-large", inactivity_timeout=60):
        if method is None:
            break
        consumed = seen(got, digest)
        ch.basic_ack(method.delivery_tag)
        break
    ch.cancel()
    ch.basic_publish("", "pika-large", body)
    _, _, got = ch.basic_get("pika-large", auto_ack=True)
    findings[str(size)] = {
        "consumed": consumed,
        "got": None if got is None else seen(got, digest),
    }
    del body
connection.close()
print(json.dumps(findings))
