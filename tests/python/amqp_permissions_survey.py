"""Every operation RabbitMQ checks permissions on, allowed and refused, as a user with
restricted permissions and topic permissions, against one broker, printing each case's
outcome as JSON: [reply code, reply text], with [0, ""] for success (server-generated
queue names in texts are replaced by "amq.gen-*"). The test runs it against Ferry and
against the test suite's RabbitMQ node, with the same user and permissions on both, and
compares the two.

    python3 amqp_permissions_survey.py USER_URL ADMIN_URL SUFFIX OTHER_VHOST_URL MISSING_VHOST_URL

The user's permissions on "/" (set by the test):
    configure ^perm-ok-
    write     ^(perm-ok-|perm-w-|amq\\.default$|amq\\.topic$|amq\\.direct$)
    read      ^(perm-ok-|perm-r-|amq\\.topic$|amq\\.direct$)
and on amq.topic: write ^{username}\\.  read ^({vhost}\\.|{client_id}$)
and none on OTHER_VHOST_URL's vhost.
"""
import json
import re
import sys

import pika

user_url, admin_url, suffix, other_vhost_url, missing_vhost_url = sys.argv[1:6]
username = pika.URLParameters(user_url).credentials.username


def name(what):
    return f"perm-{what}-{suffix}"


def closed(e):
    text = re.sub(r"amq\.gen-[A-Za-z0-9_-]+", "amq.gen-*", e.reply_text)
    return [e.reply_code, text]


def connect(url, client_properties=None):
    parameters = pika.URLParameters(url)
    if client_properties:
        parameters.client_properties = client_properties
    return pika.BlockingConnection(parameters)


def outcome(case, url=user_url, client_properties=None):
    try:
        connection = connect(url, client_properties)
    except pika.exceptions.AMQPConnectionError as e:
        # pika reports a refused connection.open as ProbableAccessDeniedError, whose text
        # carries the broker's connection.close: `ConnectionClosedByBroker: (530) '…'`.
        refusal = re.search(r"\((\d+)\) [\"'](.*)[\"']$", str(e))
        if refusal is None:
            raise
        return [int(refusal.group(1)), refusal.group(2)]
    channel = connection.channel()
    try:
        case(connection, channel)
        result = [0, ""]
    except (pika.exceptions.ChannelClosedByBroker, pika.exceptions.ConnectionClosedByBroker) as e:
        result = closed(e)
    finally:
        if connection.is_open:
            connection.close()
    return result


# Resources the user cannot configure, made by the administrator.
admin = connect(admin_url)
setup = admin.channel()
setup.exchange_declare(name("no-x"), exchange_type="direct")
for what in ("no-q", "r-q", "w-q"):
    setup.queue_declare(name(what))
setup.basic_publish("", name("no-q"), b"kept")
admin.close()


def declare_an_allowed_queue(_, ch):
    ch.queue_declare(name("ok-q"))


def declare_a_refused_queue(_, ch):
    ch.queue_declare(name("no-q2"))


def declare_a_server_named_queue(_, ch):
    ch.queue_declare("")


def declare_a_queue_with_a_reserved_name(_, ch):
    ch.queue_declare("amq.perm-" + suffix)


def redeclare_a_queue_without_configure(_, ch):
    ch.queue_declare(name("no-q"))


def passive_declare_of_a_refused_queue(_, ch):
    ch.queue_declare(name("no-q"), passive=True)


def passive_declare_of_a_refused_exchange(_, ch):
    ch.exchange_declare(name("no-x"), exchange_type="direct", passive=True)


def declare_an_allowed_exchange(_, ch):
    ch.exchange_declare(name("ok-x"), exchange_type="direct")


def declare_a_refused_exchange(_, ch):
    ch.exchange_declare(name("no-x2"), exchange_type="direct")


def declare_an_exchange_with_a_refused_alternate(_, ch):
    ch.exchange_declare(name("ok-ae"), exchange_type="fanout",
                        arguments={"alternate-exchange": name("no-x")})


def declare_a_queue_with_a_refused_dead_letter_exchange(_, ch):
    ch.queue_declare(name("ok-dlq"), arguments={"x-dead-letter-exchange": name("no-x")})


def declare_a_queue_with_an_allowed_dead_letter_exchange(_, ch):
    ch.queue_declare(name("ok-dlq2"), arguments={"x-dead-letter-exchange": name("ok-x")})


def delete_a_refused_queue(_, ch):
    ch.queue_delete(name("no-q"))


def delete_a_missing_allowed_queue(_, ch):
    ch.queue_delete(name("ok-never"))


def delete_a_refused_exchange(_, ch):
    ch.exchange_delete(name("no-x"))


def bind_a_queue_without_write(_, ch):
    ch.queue_bind(name("r-q"), "amq.direct", "k")


def bind_from_an_exchange_without_read(_, ch):
    ch.queue_declare(name("ok-b"))
    ch.queue_bind(name("ok-b"), name("no-x"), "k")


def bind_allowed(_, ch):
    ch.queue_declare(name("ok-b"))
    ch.queue_bind(name("ok-b"), "amq.direct", "k")


def unbind_a_queue_without_write(_, ch):
    ch.queue_unbind(name("r-q"), "amq.direct", "k")


def unbind_from_an_exchange_without_read(_, ch):
    ch.queue_declare(name("ok-b"))
    ch.queue_unbind(name("ok-b"), name("no-x"), "k")


def exchange_bind_without_write_on_the_destination(_, ch):
    ch.exchange_bind(name("no-x"), "amq.direct", "k")


def exchange_bind_without_read_on_the_source(_, ch):
    ch.exchange_declare(name("ok-x"), exchange_type="direct")
    ch.exchange_bind(name("ok-x"), name("no-x"), "k")


def exchange_unbind_without_write_on_the_destination(_, ch):
    ch.exchange_unbind(name("no-x"), "amq.direct", "k")


def publish_to_a_refused_exchange(_, ch):
    ch.confirm_delivery()
    ch.basic_publish(name("no-x"), "k", b"x")


def publish_to_a_missing_refused_exchange(_, ch):
    ch.confirm_delivery()
    ch.basic_publish(name("no-never"), "k", b"x")


def publish_to_the_default_exchange(_, ch):
    ch.confirm_delivery()
    ch.basic_publish("", name("ok-q"), b"x")


def publish_to_an_allowed_exchange(_, ch):
    ch.confirm_delivery()
    ch.basic_publish(name("ok-x"), "k", b"x")


def publish_with_an_allowed_topic(_, ch):
    ch.confirm_delivery()
    ch.basic_publish("amq.topic", f"{username}.orders", b"x")


def publish_with_a_refused_topic(_, ch):
    ch.confirm_delivery()
    ch.basic_publish("amq.topic", "someone-else.orders", b"x")


def publish_a_refused_topic_to_a_non_topic_exchange(_, ch):
    ch.confirm_delivery()
    ch.basic_publish("amq.direct", "someone-else.orders", b"x")


def bind_with_an_allowed_topic(_, ch):
    ch.queue_declare(name("ok-b"))
    ch.queue_bind(name("ok-b"), "amq.topic", "/.orders")


def bind_with_a_refused_topic(_, ch):
    ch.queue_declare(name("ok-b"))
    ch.queue_bind(name("ok-b"), "amq.topic", "orders.#")


def unbind_with_a_refused_topic(_, ch):
    ch.queue_declare(name("ok-b"))
    ch.queue_unbind(name("ok-b"), "amq.topic", "orders.#")


def bind_with_the_client_id_of_the_connection(_, ch):
    ch.queue_declare(name("ok-b"))
    ch.queue_bind(name("ok-b"), "amq.topic", "cid-1")


def bind_with_the_literal_client_id_placeholder(_, ch):
    ch.queue_declare(name("ok-b"))
    ch.queue_bind(name("ok-b"), "amq.topic", "{client_id}")


def consume_without_read(_, ch):
    ch.basic_consume(name("w-q"), lambda *a: None)


def consume_allowed(_, ch):
    ch.basic_consume(name("r-q"), lambda *a: None)


def get_without_read(_, ch):
    ch.basic_get(name("no-q"))


def get_allowed(_, ch):
    ch.basic_get(name("ok-q"), auto_ack=True)


def purge_without_read(_, ch):
    ch.queue_purge(name("no-q"))


def purge_of_a_missing_queue_without_read(_, ch):
    ch.queue_purge(name("no-never"))


def purge_allowed(_, ch):
    ch.queue_purge(name("r-q"))


def nothing(_, ch):
    pass


cases = [
    declare_an_allowed_queue,
    declare_a_refused_queue,
    declare_a_server_named_queue,
    declare_a_queue_with_a_reserved_name,
    redeclare_a_queue_without_configure,
    passive_declare_of_a_refused_queue,
    passive_declare_of_a_refused_exchange,
    declare_an_allowed_exchange,
    declare_a_refused_exchange,
    declare_an_exchange_with_a_refused_alternate,
    declare_a_queue_with_a_refused_dead_letter_exchange,
    declare_a_queue_with_an_allowed_dead_letter_exchange,
    delete_a_refused_queue,
    delete_a_missing_allowed_queue,
    delete_a_refused_exchange,
    bind_a_queue_without_write,
    bind_from_an_exchange_without_read,
    bind_allowed,
    unbind_a_queue_without_write,
    unbind_from_an_exchange_without_read,
    exchange_bind_without_write_on_the_destination,
    exchange_bind_without_read_on_the_source,
    exchange_unbind_without_write_on_the_destination,
    publish_to_a_refused_exchange,
    publish_to_a_missing_refused_exchange,
    publish_to_the_default_exchange,
    publish_to_an_allowed_exchange,
    publish_with_an_allowed_topic,
    publish_with_a_refused_topic,
    publish_a_refused_topic_to_a_non_topic_exchange,
    bind_with_an_allowed_topic,
    bind_with_a_refused_topic,
    unbind_with_a_refused_topic,
    bind_with_the_literal_client_id_placeholder,
    consume_without_read,
    consume_allowed,
    get_without_read,
    get_allowed,
    purge_without_read,
    purge_of_a_missing_queue_without_read,
    purge_allowed,
]
results = {case.__name__: outcome(case) for case in cases}
results["bind_with_the_client_id_of_the_connection"] = outcome(
    bind_with_the_client_id_of_the_connection, client_properties={"client_id": "cid-1"})
results["open_a_vhost_without_permissions"] = outcome(nothing, url=other_vhost_url)
results["open_a_missing_vhost"] = outcome(nothing, url=missing_vhost_url)

# Leave nothing behind on a shared broker.
admin = connect(admin_url)
cleanup = admin.channel()
for what in ("no-q", "r-q", "w-q", "ok-q", "ok-b", "ok-dlq", "ok-dlq2", "no-q2"):
    cleanup.queue_delete(name(what))
for what in ("no-x", "ok-x", "ok-ae", "no-x2"):
    cleanup.exchange_delete(name(what))
admin.close()

print(json.dumps(results, indent=1, sort_keys=True))
