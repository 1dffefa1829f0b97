"""Topology and consume calls as applications and client libraries' own helpers make them
(amqplib's checkExchange, passive checks, exclusive queues and consumers, declares,
deletes, binds, purges and gets that refer to missing things, if-empty / if-unused
deletes, reserved names), against one broker, printing each case's outcome as JSON:
[reply code, reply text], with [0, ""] for success (server-generated queue names in texts
are replaced by "amq.gen-*"). The test runs it against Ferry and against the test suite's
RabbitMQ node and compares the two.

    python3 amqp_declare_survey.py AMQP_URL SUFFIX
"""
import json
import re
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
        result = [e.reply_code, re.sub(r"amq\.gen-[A-Za-z0-9_-]+", "amq.gen-*", e.reply_text)]
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


def exchange_redeclared_with_another_type(_, ch):
    ch.exchange_declare(name("x"), exchange_type="direct")
    ch.exchange_declare(name("x"), exchange_type="fanout")


def exchange_with_an_unknown_type(_, ch):
    ch.exchange_declare(name("bad-type"), exchange_type="no-such-type")


def delete_of_a_missing_exchange(_, ch):
    ch.exchange_delete(name("never-x"))


def delete_of_a_missing_queue(_, ch):
    ch.queue_delete(name("never-q"))


def purge_of_a_missing_queue(_, ch):
    ch.queue_purge(name("never-q"))


def bind_to_a_missing_exchange(_, ch):
    ch.queue_declare(name("b"))
    ch.queue_bind(name("b"), name("never-x"), "k")


def bind_of_a_missing_queue(_, ch):
    ch.queue_bind(name("never-q"), "amq.direct", "k")


def unbind_that_was_never_bound(_, ch):
    ch.queue_declare(name("b"))
    ch.queue_unbind(name("b"), "amq.direct", "never-bound")


def get_from_a_missing_queue(_, ch):
    ch.basic_get(name("never-q"))


def consume_from_a_missing_queue(_, ch):
    ch.basic_consume(name("never-q"), lambda *a: None)


def delete_if_empty_of_a_queue_with_messages(_, ch):
    ch.queue_declare(name("full"))
    ch.basic_publish("", name("full"), b"x")
    ch.queue_delete(name("full"), if_empty=True)


def publish_to_a_missing_exchange(_, ch):
    ch.confirm_delivery()
    ch.basic_publish(name("never-x"), "k", b"x")


def declare_of_the_default_exchange(_, ch):
    ch.exchange_declare("", exchange_type="direct")


def queue_with_an_amq_prefix(_, ch):
    ch.queue_declare("amq.survey-" + suffix)


def delete_if_unused_of_a_queue_with_a_consumer(connection, ch):
    ch.queue_declare(name("used"))
    ch.basic_consume(name("used"), lambda *a: None)
    connection.channel().queue_delete(name("used"), if_unused=True)


def delete_if_unused_of_a_bound_exchange(_, ch):
    ch.exchange_declare(name("bound-x"), exchange_type="fanout")
    ch.queue_declare(name("b"))
    ch.queue_bind(name("b"), name("bound-x"))
    ch.exchange_delete(name("bound-x"), if_unused=True)


def delete_of_a_missing_system_exchange(_, ch):
    ch.exchange_delete("amq.survey-" + suffix)


def delete_of_a_builtin_exchange(_, ch):
    ch.exchange_delete("amq.direct")


def queue_with_a_server_generated_name_given_by_the_client(_, ch):
    # A client may not name a queue amq.gen-*, even one the server generated.
    generated = ch.queue_declare("", exclusive=True).method.queue
    ch.queue_declare(generated, exclusive=True)


def exchange_with_an_amq_prefix(_, ch):
    ch.exchange_declare("amq.survey-x-" + suffix, "direct")


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
    exchange_redeclared_with_another_type,
    exchange_with_an_unknown_type,
    delete_of_a_missing_exchange,
    delete_of_a_missing_queue,
    purge_of_a_missing_queue,
    bind_to_a_missing_exchange,
    bind_of_a_missing_queue,
    unbind_that_was_never_bound,
    get_from_a_missing_queue,
    consume_from_a_missing_queue,
    delete_if_empty_of_a_queue_with_messages,
    publish_to_a_missing_exchange,
    declare_of_the_default_exchange,
    queue_with_an_amq_prefix,
    delete_if_unused_of_a_queue_with_a_consumer,
    delete_if_unused_of_a_bound_exchange,
    delete_of_a_missing_system_exchange,
    delete_of_a_builtin_exchange,
    queue_with_a_server_generated_name_given_by_the_client,
    exchange_with_an_amq_prefix,
]
results = {case.__name__: outcome(case) for case in cases}

# Leave nothing behind on a shared broker.
connection = pika.BlockingConnection(pika.URLParameters(url))
channel = connection.channel()
for what in ("q", "shared", "ec", "ec2", "b", "full", "used"):
    channel.queue_delete(name(what))
for what in ("x", "bound-x"):
    channel.exchange_delete(name(what))
connection.close()

print(json.dumps(results, indent=1, sort_keys=True))
