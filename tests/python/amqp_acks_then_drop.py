"""Acknowledgements read just before a connection drops (issue 33): pika publishes 10
persistent messages to a fresh durable queue, consumes with prefetch 8, acknowledges the
first two deliveries, and then shuts its socket down without closing anything, so the
broker reads the two acks and then the end of the stream. A broker that applies what it
read keeps the two acknowledged messages gone: 8 come back. Run by tests/amqp/clients.rs
against Ferry and the test suite's RabbitMQ node as

    python3 amqp_acks_then_drop.py AMQP_URL QUEUE

Prints one JSON object: the bodies delivered, and those acknowledged.
"""

import json
import socket
import sys

import pika


def main(url, queue):
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    ch.queue_declare(queue, durable=True)
    ch.confirm_delivery()
    for i in range(10):
        ch.basic_publish("", queue, f"m{i}".encode(), pika.BasicProperties(delivery_mode=2))
    ch.basic_qos(prefetch_count=8)
    delivered = []
    ch.basic_consume(queue, lambda _ch, method, _props, body: delivered.append((method.delivery_tag, body.decode())))
    # Bounded: prefetch 8 delivers 8 of the 10 at once.
    for _ in range(100):
        if len(delivered) >= 8:
            break
        conn.process_data_events(time_limit=0.1)
    if len(delivered) != 8:
        sys.exit(f"expected 8 deliveries, got {len(delivered)}")
    for tag, _ in delivered[:2]:
        ch.basic_ack(tag)
    # pika writes each ack as it is made; the socket is then cut under it, unclosed.
    conn._impl._transport._sock.shutdown(socket.SHUT_RDWR)
    print(json.dumps({
        "delivered": [body for _, body in delivered],
        "acked": [body for _, body in delivered[:2]],
    }))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
