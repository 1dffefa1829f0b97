"""Users and permissions changed through the management API while a pika connection of the
user is open, against one broker, printing each case's outcome as JSON: [reply code,
reply text] of what the next operation met, [0, ""] when it succeeded. The test runs it
against Ferry and against the test suite's RabbitMQ node, and compares the two.

    python3 amqp_user_changes.py HTTP_BASE AMQP_HOST:PORT PREFIX

Cases (each with its own user, PREFIX-CASE, password "pw"):
    deleted   the user is deleted: the open connection is closed
    cleared   its permissions on "/" are cleared: the next queue.declare is refused
    narrowed  configure narrowed to ^PREFIX-narrowed-ok-: another name refused, that one not
    granted   it had no configure permission; given one, the next declare succeeds
    password  its password changes: the open connection goes on
"""
import json
import re
import sys
import time
import urllib.parse

import pika

import management_http

http_base, amqp_addr, prefix = sys.argv[1:4]
# Longest a change may take to reach an open connection.
PATIENCE = 10


def call(method, path, body=None):
    """The status of one request."""
    return management_http.call(http_base, method, path, body)[0]


def user_path(user):
    return "/api/users/" + urllib.parse.quote(user, safe="")


def permissions_path(user):
    return "/api/permissions/%2F/" + urllib.parse.quote(user, safe="")


def grant(user, configure):
    status = call("PUT", permissions_path(user), {"configure": configure, "write": ".*", "read": ".*"})
    assert status in (201, 204), status


def open_as(user, configure=".*"):
    assert call("PUT", user_path(user), {"password": "pw", "tags": ""}) in (201, 204)
    grant(user, configure)
    credentials = pika.PlainCredentials(user, "pw")
    host, port = amqp_addr.rsplit(":", 1)
    return pika.BlockingConnection(pika.ConnectionParameters(host, int(port), "/", credentials))


def normalized(e, user):
    return [e.reply_code, e.reply_text.replace(user, "USER")]


def declare(connection, queue):
    """[0, ""], or the refusal that closed the channel."""
    try:
        ch = connection.channel()
        ch.queue_declare(queue, auto_delete=True)
        ch.close()
        return [0, ""]
    except (pika.exceptions.ChannelClosedByBroker, pika.exceptions.ConnectionClosedByBroker) as e:
        return [e.reply_code, e.reply_text]


def until(connection, user, queue, wanted_code):
    """Declares `queue` until the answer's code is `wanted_code` or PATIENCE passes; the
    last answer, the user's name in it replaced by USER."""
    deadline = time.monotonic() + PATIENCE
    while True:
        code, text = declare(connection, queue)
        if code == wanted_code or time.monotonic() > deadline:
            return [code, text.replace(user, "USER")]
        connection.sleep(0.05)


def deleted():
    user = f"{prefix}-deleted"
    connection = open_as(user)
    assert call("DELETE", user_path(user)) == 204
    deadline = time.monotonic() + PATIENCE
    try:
        while time.monotonic() < deadline:
            connection.process_data_events(0.05)
    except pika.exceptions.ConnectionClosedByBroker as e:
        return normalized(e, user)
    return [0, "still open"]


def cleared():
    user = f"{prefix}-cleared"
    connection = open_as(user)
    assert call("DELETE", permissions_path(user)) == 204
    outcome = until(connection, user, f"{user}-q", 403)
    connection.close()
    return outcome


def narrowed():
    user = f"{prefix}-narrowed"
    connection = open_as(user)
    grant(user, f"^{re.escape(user)}-ok-")
    other = until(connection, user, f"{user}-other", 403)
    allowed = declare(connection, f"{user}-ok-1")
    connection.close()
    return [other, allowed]


def granted():
    user = f"{prefix}-granted"
    connection = open_as(user, configure="^nothing$")
    before = declare(connection, f"{user}-q")
    grant(user, ".*")
    after = until(connection, user, f"{user}-q", 0)
    connection.close()
    return [[before[0], before[1].replace(user, "USER")], after]


def password():
    user = f"{prefix}-password"
    connection = open_as(user)
    assert call("PUT", user_path(user), {"password": "another", "tags": ""}) == 204
    connection.sleep(1.0)
    outcome = declare(connection, f"{user}-q")
    connection.close()
    return outcome


print(json.dumps({
    "deleted": deleted(),
    "cleared": cleared(),
    "narrowed": narrowed(),
    "granted": granted(),
    "password": password(),
}))
