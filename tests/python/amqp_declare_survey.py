"""Declares and consumes as client libraries' own helpers do (amqplib's checkExchange, a
passive queue check, exclusive queues and consumers), against one broker, printing each
case's outcome as JSON: [reply code, reply text], with [0, ""] for success. The test runs it
against Ferry and against the test suite's RabbitMQ node and compares the two.

    python3 amqp_declare_survey.py AMQP_URL SUFFIX
"""
import json
import sys

import pika

url, suffix = sys.argv[1], sys.argv[2]


def outcome(case):
    connection = pika.BlockingConnection(pika.URLParameters(url))
    channel = connection.channel()
    try:
        case(connection, channel)
        result = [0, ""]
    except (pika.exceptions.ChannelClosedByBroker, pika.exceptions.ConnectionClosedByBroker) as e:
        result = [e.reply_code, e.reply_text]
    finally:
        if connection.is_open:
            connection.close()
    return result


def name(what):
    return f"survey-{what}-{suffix}"


def passive_exchange_with_an_empty_type(_, ch):
    ch.exchange_declare("amq.direct", exchange_type="", passive=True)


def passive_missing_exchange_with_an_empty_type(_, ch):
    ch.exchange_declare(name("missing-x"), exchange_type="", passive=True)


def passive_exchange_with_other_flags_and_arguments(_, ch):
    ch.exchange_declare("amq.topic", exchange_type="direct", durable=False,
                        auto_delete=True, passive=True, arguments={"x-anything": 1})


def passive_queue_with_other_flags_and_bad_arguments(_, ch):
    ch.queue_declare(name("q"), durable=True)
    ch.queue_declare(name("q"), passive=True, durable=False,
                     arguments={"x-max-length": "not a number"})


def passive_missing_queue(_, ch):
    ch.queue_declare(name("missing-q"), passive=True)


def exclusive_queue_redeclared_without_exclusive(_, ch):
    ch.queue_declare(name("ex"), exclusive=True)
    ch.queue_declare(name("ex"), exclusive=False)


def queue_redeclared_as_exclusive(_, ch):
    ch.queue_declare(name("shared"), durable=True)
    ch.queue_declare(name("shared"), durable=True, exclusive=True)


def second_exclusive_consumer(connection, ch):
    ch.queue_declare(name("ec"))
    ch.basic_consume(name("ec"), lambda *a: None, exclusive=True)
    connection.channel().basic_consume(name("ec"), lambda *a: None, exclusive=True)


def consumer_beside_an_exclusive_one(connection, ch):
    ch.queue_declare(name("ec2"))
    ch.basic_consume(name("ec2"), lambda *a: None, exclusive=True)
    connection.channel().basic_consume(name("ec2"), lambda *a: None)


cases = [
    passive_exchange_with_an_empty_type,
    passive_missing_exchange_with_an_empty_type,
    passive_exchange_with_other_flags_and_arguments,
    passive_queue_with_other_flags_and_bad_arguments,
    passive_missing_queue,
    exclusive_queue_redeclared_without_exclusive,
    queue_redeclared_as_exclusive,
    second_exclusive_consumer,
    consumer_beside_an_exclusive_one,
]
results = {case.__name__: outcome(case) for case in cases}

# Leave nothing behind on a shared broker.
connection = pika.BlockingConnection(pika.URLParameters(url))
channel = connection.channel()
for what in ("q", "shared", "ec", "ec2"):
    channel.queue_delete(name(what))
connection.close()

print(json.dumps(results, indent=1, sort_keys=True))
