"""Quorum queues' delivery limit and x-delivery-count header with pika, against one broker,
printing each case's outcome as JSON. The test runs it against Ferry and against the test
suite's RabbitMQ node and compares the two.

    python3 amqp_quorum_survey.py AMQP_URL SUFFIX

Each case declares a quorum queue (with a dead-letter queue behind it), publishes one
message, then takes it with basic.get and returns it with basic.nack(requeue=True) until it
is gone, recording per delivery its redelivered flag and x-delivery-count header, and then
what the dead-letter queue received (its x-death reason and count). A first delivery
without the header counts as 0: RabbitMQ 3.10 sends `x-delivery-count: 0` then, RabbitMQ 4
and Ferry send the header on redeliveries only.
"""
import json
import sys

import pika

url, suffix = sys.argv[1], sys.argv[2]


def name(what):
    return f"quorum-{what}-{suffix}"


def returned_until_gone(limit_args, most=8):
    connection = pika.BlockingConnection(pika.URLParameters(url))
    ch = connection.channel()
    queue, dlq = name("q-" + str(limit_args)), name("dlq-" + str(limit_args))
    ch.queue_declare(dlq, durable=True, arguments={"x-queue-type": "quorum"})
    arguments = {"x-queue-type": "quorum", "x-dead-letter-exchange": "",
                 "x-dead-letter-routing-key": dlq, **limit_args}
    ch.queue_declare(queue, durable=True, arguments=arguments)
    ch.confirm_delivery()
    ch.basic_publish("", queue, b"poison", pika.BasicProperties(delivery_mode=2))
    deliveries = []
    for _ in range(most):
        method, props, _ = None, None, None
        for _ in range(40):
            method, props, _ = ch.basic_get(queue, auto_ack=False)
            if method is not None:
                break
            connection.sleep(0.05)
        if method is None:
            break
        headers = props.headers or {}
        deliveries.append([method.redelivered, headers.get("x-delivery-count", 0)])
        ch.basic_nack(method.delivery_tag, requeue=True)
    dead = None
    for _ in range(40):
        method, props, _ = ch.basic_get(dlq, auto_ack=True)
        if method is not None:
            death = (props.headers or {}).get("x-death", [{}])[0]
            dead = [death.get("reason"), death.get("count")]
            break
        connection.sleep(0.05)
    ch.queue_delete(queue)
    ch.queue_delete(dlq)
    connection.close()
    return {"deliveries": deliveries, "dead_lettered": dead}


results = {
    "delivery_limit_2": returned_until_gone({"x-delivery-limit": 2}),
    "delivery_limit_0": returned_until_gone({"x-delivery-limit": 0}),
}
print(json.dumps(results, indent=1, sort_keys=True))
