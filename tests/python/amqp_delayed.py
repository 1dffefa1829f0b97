"""Durable delayed delivery with pika, as the RabbitMQ delayed-message plugin's users write
it: an `x-delayed-message` exchange (`x-delayed-type` direct), messages published with an
`x-delay` header and publisher confirms, and the daemon killed with SIGKILL while it holds
them.

Usage:
    amqp_delayed.py AMQP_PORT run
        declares exchange 'later' and queue 'later-q'; publishes 'now' (no delay) and, in
        one transaction so they share a due time, 'd1'..'d5' with x-delay DELAY_MS, each body
        naming its due time; checks that only 'now' is in the queue
    amqp_delayed.py AMQP_PORT after-restart
        consumes: 'now', then 'd1'..'d5' in publish order, none before its due time, each
        with x-delay set to minus its delay

Prints OK.
"""
import sys
import time

import pika

amqp_port, phase = sys.argv[1:3]
DELAY_MS = 4000
PATIENCE = 30


def channel():
    connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", int(amqp_port)))
    return connection, connection.channel()


def now_ms():
    return int(time.time() * 1000)


def run():
    connection, ch = channel()
    ch.exchange_declare("later", "x-delayed-message", durable=True,
                        arguments={"x-delayed-type": "direct"})
    ch.queue_declare("later-q", durable=True)
    ch.queue_bind("later-q", "later", "k")
    ch.confirm_delivery()
    ch.basic_publish("later", "k", b"now", pika.BasicProperties(delivery_mode=2))
    tx = connection.channel()
    tx.tx_select()
    due = now_ms() + DELAY_MS
    for i in range(1, 6):
        tx.basic_publish("later", "k", f"d{i} {due}".encode(),
                         pika.BasicProperties(delivery_mode=2, headers={"x-delay": DELAY_MS}))
    tx.tx_commit()
    depth = ch.queue_declare("later-q", passive=True).method.message_count
    assert depth == 1, f"{depth} messages in the queue right after publishing; only 'now' is due"
    connection.close()


def after_restart():
    connection, ch = channel()
    got = []
    deadline = time.time() + PATIENCE
    while len(got) < 6 and time.time() < deadline:
        method, properties, body = ch.basic_get("later-q", auto_ack=True)
        if method is None:
            time.sleep(0.05)
            continue
        got.append((body.decode(), now_ms(), (properties.headers or {}).get("x-delay")))
    names = [body.split()[0] for body, _, _ in got]
    assert names == ["now", "d1", "d2", "d3", "d4", "d5"], got
    assert got[0][2] is None, got[0]
    for body, at, delay in got[1:]:
        due = int(body.split()[1])
        # Due times come from the daemon's clock and this one, on the same machine; the
        # daemon takes its due time at the commit, after the body's.
        assert at >= due, f"{body} arrived at {at}, before its due time"
        assert delay == -DELAY_MS, f"{body}: x-delay {delay}"
    connection.close()


{"run": run, "after-restart": after_restart}[phase]()
print("OK")
