"""Direct reply-to (amq.rabbitmq.reply-to) with pika, as RPC clients and servers use it,
against one broker, printing each case's outcome as JSON ([reply code, reply text], with
[0, ""] or what was received for success; reply addresses shown as "ADDRESS"). The test
runs it against Ferry and against the test suite's RabbitMQ node and compares the two.

    python3 amqp_direct_reply.py AMQP_URL SUFFIX
"""
import json
import sys

import pika

url, suffix = sys.argv[1], sys.argv[2]
PSEUDO = "amq.rabbitmq.reply-to"
REQUESTS = f"rpc-requests-{suffix}"


def connect():
    return pika.BlockingConnection(pika.URLParameters(url))


def outcome(case):
    connection = connect()
    channel = connection.channel()
    try:
        result = case(connection, channel)
    except (pika.exceptions.ChannelClosedByBroker, pika.exceptions.ConnectionClosedByBroker) as e:
        result = [e.reply_code, e.reply_text]
    finally:
        if connection.is_open:
            connection.close()
    return result


def rpc_round_trip(client, ch):
    """Tutorial 6's RPC client with direct reply-to, and a server on another connection."""
    replies = []
    ch.basic_consume(PSEUDO, lambda _ch, method, props, body: replies.append(
        {"routing_key_is_address": method.routing_key.startswith(PSEUDO + "."),
         "exchange": method.exchange, "redelivered": method.redelivered,
         "correlation_id": props.correlation_id, "body": body.decode()}), auto_ack=True)
    ch.queue_declare(REQUESTS, auto_delete=True)
    ch.basic_publish("", REQUESTS, b"fib 10", pika.BasicProperties(reply_to=PSEUDO, correlation_id="c-1"))
    server = connect()
    server_ch = server.channel()
    request = None
    for _ in range(50):
        method, props, body = server_ch.basic_get(REQUESTS, auto_ack=True)
        if method is not None:
            request = (props, body)
            break
        server.sleep(0.05)
    props, body = request
    address = props.reply_to
    passive = server_ch.queue_declare(address, passive=True).method
    server_ch.basic_publish("", address, b"55", pika.BasicProperties(correlation_id=props.correlation_id))
    server.close()
    for _ in range(50):
        if replies:
            break
        client.process_data_events(0.05)
    return {
        "request": body.decode(),
        "reply_to_is_address": address.startswith(PSEUDO + ".") and len(address) > len(PSEUDO) + 8,
        "passive_declare_of_the_address": [passive.message_count, passive.consumer_count],
        "replies": replies,
    }


def consume_with_acknowledgements(_, ch):
    ch.basic_consume(PSEUDO, lambda *_: None, auto_ack=False)
    return [0, ""]


def second_reply_consumer(_, ch):
    ch.basic_consume(PSEUDO, lambda *_: None, auto_ack=True)
    ch.basic_consume(PSEUDO, lambda *_: None, auto_ack=True)
    return [0, ""]


def request_without_a_reply_consumer(connection, ch):
    ch.queue_declare(REQUESTS, auto_delete=True)
    ch.basic_publish("", REQUESTS, b"x", pika.BasicProperties(reply_to=PSEUDO))
    # The broker's channel.close, if any, answers this.
    ch.queue_declare(REQUESTS, passive=True)
    return [0, ""]


def passive_declare_of_the_pseudo_queue(_, ch):
    m = ch.queue_declare(PSEUDO, passive=True).method
    return [m.queue, m.message_count, m.consumer_count]


def passive_declare_of_a_missing_address(_, ch):
    ch.queue_declare(PSEUDO + ".nobody-here", passive=True)
    return [0, ""]


def mandatory_reply_to_a_missing_address(_, ch):
    ch.confirm_delivery()
    try:
        ch.basic_publish("", PSEUDO + ".nobody-here", b"late", mandatory=True)
    except pika.exceptions.UnroutableError as e:
        return ["returned", [m.method.reply_code for m in e.messages]]
    return ["not returned"]


def reply_to_a_cancelled_consumer(connection, ch):
    tag = ch.basic_consume(PSEUDO, lambda *_: None, auto_ack=True)
    ch.queue_declare(REQUESTS, auto_delete=True)
    ch.basic_publish("", REQUESTS, b"req", pika.BasicProperties(reply_to=PSEUDO))
    connection.process_data_events(0.2)
    _, props, _ = ch.basic_get(REQUESTS, auto_ack=True)
    ch.basic_cancel(tag)
    other = connect()
    other_ch = other.channel()
    other_ch.confirm_delivery()
    try:
        other_ch.basic_publish("", props.reply_to, b"late", mandatory=True)
        result = ["not returned"]
    except pika.exceptions.UnroutableError:
        result = ["returned"]
    other.close()
    return result


cases = [
    rpc_round_trip,
    consume_with_acknowledgements,
    second_reply_consumer,
    request_without_a_reply_consumer,
    passive_declare_of_the_pseudo_queue,
    passive_declare_of_a_missing_address,
    mandatory_reply_to_a_missing_address,
    reply_to_a_cancelled_consumer,
]
print(json.dumps({case.__name__: outcome(case) for case in cases}, indent=1, sort_keys=True))
