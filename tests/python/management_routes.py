"""The management API's routes driven with urllib and pika, as an operator's script would:
a route added at runtime carries messages between two exchanges of the AMQP front; the
messages it cannot deliver are dead-lettered, listed, replayed (and then delivered) and
purged; pausing holds messages back and resuming delivers them; refusals name the field or
the reason and change nothing; removing a route deletes its stages and its queue.

Usage:
    management_routes.py FERRY_HTTP AMQP_URI CONFIG_ROUTE run
        everything above; leaves route 'kept' paused with one dead letter
    management_routes.py FERRY_HTTP AMQP_URI CONFIG_ROUTE after-restart
        'kept' is still there, paused, with its dead letter; replayed and resumed, the
        message is delivered

Prints OK.
"""
import sys
import time
import urllib.parse

import pika

import management_http

ferry_http, amqp_uri, config_route, phase = sys.argv[1:5]

# Longest wait for any one thing, in seconds.
PATIENCE = 30


def call(method, path, body=None, user="guest", password="guest", raw=None):
    return management_http.call(ferry_http, method, path, body, user, password, raw)


def route_path(name, *rest):
    return "/".join(["/api/ferry/routes", urllib.parse.quote(name, safe="")] + list(rest))


def expect(status, answer, wanted_status, reason_has=None):
    assert status == wanted_status, (status, answer, wanted_status)
    if reason_has is not None:
        assert reason_has in answer["reason"], (answer, reason_has)


def until(what, check):
    deadline = time.monotonic() + PATIENCE
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {PATIENCE} s")
        time.sleep(0.1)


def route(name):
    status, answer = call("GET", route_path(name))
    assert status == 200, (status, answer)
    return answer


def state_is(name, state):
    return until(f"route '{name}' {state}", lambda: (r := route(name))["state"] == state and r)


def reading(name):
    """Running, its source reading (its queue bound to the exchange): publishes reach it."""
    return until(f"route '{name}' running and reading",
                 lambda: (r := route(name))["state"] == "running" and r["source"]["connection"] == "up" and r)


def dead_letters_are(name, n):
    return until(f"route '{name}' with {n} dead letter(s)",
                 lambda: (r := route(name))["destinations"][0]["dead_letters"] == n and r)


def channel():
    connection = pika.BlockingConnection(pika.URLParameters(amqp_uri))
    ch = connection.channel()
    ch.confirm_delivery()
    return connection, ch


def publish(ch, exchange, bodies, key="k"):
    for body in bodies:
        ch.basic_publish(exchange, key, body.encode(), pika.BasicProperties(delivery_mode=2))


def received(ch, queue, n):
    got = []

    def more():
        method, _, body = ch.basic_get(queue, auto_ack=True)
        if method is not None:
            got.append(body.decode())
        return len(got) == n

    until(f"{n} message(s) in '{queue}'", more)
    return got


def definition(source, destination):
    return {
        "from": {"amqp_exchange": source},
        "to": [{"amqp_exchange": destination}],
        "max_attempts": 1,
        "retry_initial_ms": 20,
        "retry_max_ms": 200,
    }


def run():
    connection, ch = channel()
    for exchange, kind in (("rt-in", "topic"), ("rt-out", "direct"), ("kept-in", "topic"), ("kept-out", "direct")):
        ch.exchange_declare(exchange, kind, durable=True)

    # Added at runtime: 201, then 204 for the same definition, 400 for another.
    rt = definition("rt-in", "rt-out")
    expect(*call("PUT", route_path("rt"), rt), 201)
    expect(*call("PUT", route_path("rt"), dict(rt, name="rt")), 204)
    expect(*call("PUT", route_path("rt"), dict(rt, max_attempts=2)), 400, "exists with another definition")

    # Refusals name the field or the reason, and change nothing.
    expect(*call("PUT", route_path("bad"), dict(rt, tx=1)), 400, "unknown field `tx`")
    expect(*call("PUT", route_path("bad"), {"from": {"amqp_exchange": "rt-in"}, "to": [{"sink": "nowhere"}]}),
           400, "to[0]: unknown sink 'nowhere'")
    expect(*call("PUT", route_path("bad"), dict(rt, batch=0)), 400, "batch")
    expect(*call("PUT", route_path("bad name"), rt), 400, "name")
    expect(*call("PUT", route_path("bad"), raw=b"{not json"), 400, "not valid JSON")
    expect(*call("PUT", route_path("bad"), dict(rt, name="other")), 400, "field 'name'")
    expect(*call("PUT", route_path(config_route), rt), 400, "defined in the config file")
    expect(*call("DELETE", route_path(config_route)), 400, "defined in the config file")
    expect(*call("GET", route_path("missing")), 404)
    expect(*call("POST", route_path("missing", "pause")), 404)
    expect(*call("GET", route_path("rt", "destinations", "1", "dead-letters")), 404)
    expect(*call("GET", route_path("rt", "destinations", "0", "dead-letters") + "?count=0"), 400, "'count'")
    for name, tags in (("rmon", "monitoring"), ("rmgmt", "management")):
        expect(*call("PUT", f"/api/users/{name}", {"password": "secret", "tags": tags}), 201)
    expect(*call("GET", "/api/ferry/routes", user="rmgmt", password="secret"), 401, "Not monitor user")
    status, seen_by_monitor = call("GET", "/api/ferry/routes", user="rmon", password="secret")
    assert status == 200 and {r["name"] for r in seen_by_monitor} >= {"rt", config_route}, seen_by_monitor
    expect(*call("POST", route_path("rt", "pause"), user="rmon", password="secret"), 401, "Not administrator user")
    expect(*call("GET", route_path("rt", "destinations", "0", "dead-letters"), user="rmon", password="secret"),
           401, "Not administrator user")
    expect(*call("DELETE", route_path("rt"), user="rmon", password="secret"), 401, "Not administrator user")
    status, listed = call("GET", "/api/ferry/routes")
    assert status == 200, listed
    by_name = {r["name"]: r for r in listed}
    assert by_name[config_route]["origin"] == "config", by_name
    assert by_name["rt"]["origin"] == "runtime", by_name
    assert "bad" not in by_name and "bad name" not in by_name, by_name
    assert by_name["rt"]["definition"]["max_attempts"] == 1, by_name["rt"]

    r = reading("rt")
    assert r["source"] == {"endpoint": "amqp_exchange:/rt-in", "connection": "up", "reason": None}, r
    assert r["destinations"][0]["endpoint"] == "amqp_exchange:/rt-out", r

    # No queue is bound to rt-out: each message is refused (unroutable) and dead-lettered.
    publish(ch, "rt-in", ["one", "two", "three"])
    dead_letters_are("rt", 3)
    status, letters = call("GET", route_path("rt", "destinations", "0", "dead-letters"))
    assert status == 200, letters
    assert [m["payload"] for m in letters] == ["one", "two", "three"], letters
    assert all(m["dead_letter_reason"] == "delivery_limit" and m["routing_key"] == "k"
               and m["exchange"] == "rt-in" and m["properties"]["delivery_mode"] == 2
               and m["dead_lettered_at"] > 0 for m in letters), letters
    # Each keeps the destination's refusal that sent it there.
    assert all(m["last_refusal"] == "unroutable: no queue is bound to exchange 'rt-out' in vhost '/'"
               " for routing key 'k'" for m in letters), letters
    status, first = call("GET", route_path("rt", "destinations", "0", "dead-letters") + "?count=1")
    assert status == 200 and [m["payload"] for m in first] == ["one"], first

    # Bound now: the replayed messages are delivered, in order.
    ch.queue_declare("rt-q", durable=True)
    ch.queue_bind("rt-q", "rt-out", "k")
    expect(*call("POST", route_path("rt", "destinations", "0", "dead-letters", "replay")), 200)
    assert received(ch, "rt-q", 3) == ["one", "two", "three"]
    r = until("the delivered count", lambda: (r := route("rt"))["destinations"][0]["message_stats"]["delivered"] == 3 and r)
    assert r["dead_letters"] == 0 and r["messages"] == 0, r

    # Paused: nothing moves; resumed: what waited is delivered.
    expect(*call("POST", route_path("rt", "pause")), 204)
    r = state_is("rt", "paused")
    assert r["paused"] and r["paused_at"] > 0, r
    publish(ch, "rt-in", ["four", "five"])
    time.sleep(1.0)
    method, _, _ = ch.basic_get("rt-q", auto_ack=True)
    assert method is None, "a paused route delivered"
    expect(*call("POST", route_path("rt", "resume")), 204)
    state_is("rt", "running")
    assert received(ch, "rt-q", 2) == ["four", "five"]

    # Purged dead letters are gone for good.
    ch.queue_unbind("rt-q", "rt-out", "k")
    publish(ch, "rt-in", ["six"])
    dead_letters_are("rt", 1)
    status, answer = call("DELETE", route_path("rt", "destinations", "0", "dead-letters"))
    assert (status, answer) == (200, {"purged": 1}), (status, answer)
    dead_letters_are("rt", 0)

    # A destination that cannot take messages now keeps them in the stage: if-empty refuses.
    ch.exchange_delete("rt-out")
    publish(ch, "rt-in", ["seven"])
    until("a message waiting in the stage", lambda: route("rt")["messages"] == 1)
    expect(*call("DELETE", route_path("rt") + "?if-empty=true"), 400, "holds 1 message(s)")
    route("rt")
    expect(*call("DELETE", route_path("rt")), 204)
    expect(*call("GET", route_path("rt")), 404)
    expect(*call("GET", "/api/queues/%2F/ferry.bridge.rt"), 404)

    # Left for after the restart: a paused route with a dead letter.
    expect(*call("PUT", route_path("kept"), definition("kept-in", "kept-out")), 201)
    reading("kept")
    publish(ch, "kept-in", ["kept one"])
    dead_letters_are("kept", 1)
    expect(*call("POST", route_path("kept", "pause")), 204)
    state_is("kept", "paused")
    connection.close()


def after_restart():
    r = state_is("kept", "paused")
    assert r["origin"] == "runtime" and r["destinations"][0]["dead_letters"] == 1, r
    connection, ch = channel()
    ch.queue_declare("kept-q", durable=True)
    ch.queue_bind("kept-q", "kept-out", "k")
    status, answer = call("POST", route_path("kept", "destinations", "0", "dead-letters", "replay"))
    assert (status, answer) == (200, {"replayed": 1}), (status, answer)
    time.sleep(0.5)
    method, _, _ = ch.basic_get("kept-q", auto_ack=True)
    assert method is None, "a paused route delivered"
    expect(*call("POST", route_path("kept", "resume")), 204)
    assert received(ch, "kept-q", 1) == ["kept one"]
    connection.close()


{"run": run, "after-restart": after_restart}[phase]()
print("OK")
