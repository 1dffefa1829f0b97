"""Drives Ferry's AMQP front with pika, an independent client: publishes with confirms and
headers in a non-sorted order (which only a byte-identical round trip preserves), a
mandatory return, topic routing, consuming with acks, a requeue, dead-lettering with
x-death, and a 404 channel exception. Run by tests/amqp_clients.rs as
`python3 amqp_pika.py PORT`; prints one JSON object of findings; exits non-zero on an
unexpected outcome."""

import json
import sys

import pika
import pika.exceptions


def main(port):
    params = pika.URLParameters(f"amqp://guest:guest@127.0.0.1:{port}/%2F?heartbeat=30")
    conn = pika.BlockingConnection(params)
    ch = conn.channel()
    ch.confirm_delivery()
    findings = {}

    ch.queue_declare("pika-props", durable=True)
    headers = {"zeta": "last-first", "alpha": 1, "mid": {"nested": True}}
    props = pika.BasicProperties(
        content_type="text/plain",
        delivery_mode=2,
        priority=3,
        correlation_id="c-1",
        message_id="m-1",
        headers=headers,
    )
    ch.basic_publish("", "pika-props", b"hello from pika", props)
    method, got, body = ch.basic_get("pika-props", auto_ack=True)
    findings["body"] = body.decode()
    # pika keeps a table's keys in wire order: Ferry must deliver the publisher's bytes.
    findings["header_order"] = list(got.headers.keys())
    findings["headers"] = got.headers
    findings["properties"] = [got.content_type, got.delivery_mode, got.priority, got.correlation_id, got.message_id]

    try:
        ch.basic_publish("amq.direct", "nobody", b"unroutable", mandatory=True)
        findings["returned"] = False
    except pika.exceptions.UnroutableError:
        findings["returned"] = True

    ch.exchange_declare("pika-topic", exchange_type="topic", durable=True)
    ch.queue_declare("pika-eu", durable=True)
    ch.queue_bind("pika-eu", "pika-topic", routing_key="orders.*.eu")
    for key in ["orders.new.eu", "orders.new.us", "orders.old.eu"]:
        ch.basic_publish("pika-topic", key, key.encode())
    routed = []
    for method, _, body in ch.consume("pika-eu", inactivity_timeout=5):
        if method is None:
            break
        routed.append(body.decode())
        if len(routed) == 1:
            ch.basic_nack(method.delivery_tag, requeue=True)
            continue
        ch.basic_ack(method.delivery_tag)
        if len(routed) == 3:
            break
    ch.cancel()
    findings["routed"] = routed

    ch.queue_declare("pika-dead", durable=True)
    ch.queue_declare(
        "pika-picky",
        durable=True,
        arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "pika-dead"},
    )
    ch.basic_publish("", "pika-picky", b"rejected by pika")
    method, _, _ = ch.basic_get("pika-picky")
    ch.basic_reject(method.delivery_tag, requeue=False)
    for method, dead_props, body in ch.consume("pika-dead", inactivity_timeout=5):
        if method is None:
            findings["dead"] = None
            break
        death = dead_props.headers["x-death"][0]
        findings["dead"] = {
            "body": body.decode(),
            "reason": death["reason"],
            "queue": death["queue"],
            "count": death["count"],
        }
        ch.basic_ack(method.delivery_tag)
        break
    ch.cancel()

    try:
        ch.queue_declare("pika-missing", passive=True)
        findings["missing"] = None
    except pika.exceptions.ChannelClosedByBroker as e:
        findings["missing"] = [e.reply_code, e.reply_text]
    # The connection survives the channel exception.
    ch2 = conn.channel()
    findings["after_error"] = ch2.queue_declare("pika-props", durable=True, passive=True).method.message_count
    conn.close()
    print(json.dumps(findings, sort_keys=True))


if __name__ == "__main__":
    main(int(sys.argv[1]))
