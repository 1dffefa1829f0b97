"""Tags and permissions decide the management API as in RabbitMQ: the same users, made through
each server's own API as an administrator, make the same requests against Ferry and against
the suite's RabbitMQ node, and every answer's status (and refusal reason) must be the same.

Usage: management_tags.py FERRY_HTTP RABBIT_HTTP PREFIX
"""
import base64
import json
import sys
import urllib.error
import urllib.request

ferry_http, rabbit_http, prefix = sys.argv[1:4]


def call(base, user, password, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method)
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    request.add_header("Authorization", "Basic " + token)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def reason(status, text):
    """The refusal's error and reason, or None for a success."""
    if status < 400:
        return None
    try:
        answer = json.loads(text)
    except ValueError:
        return text.decode(errors="replace")
    return (answer.get("error"), answer.get("reason"))


def setup(base):
    """Users, made by the administrator guest: one without tags, one monitoring user without
    permissions, one management user with configure/write/read on names under PREFIX-mine."""
    for name, tags in [("none", ""), ("watcher", "monitoring"), ("dev", "management")]:
        status, text = call(base, "guest", "guest", "PUT", f"/api/users/{prefix}-{name}",
                            {"password": "pw", "tags": tags})
        assert status in (201, 204), (base, name, status, text)
    mine = f"^{prefix}-mine"
    status, text = call(base, "guest", "guest", "PUT", f"/api/permissions/%2F/{prefix}-dev",
                        {"configure": mine, "write": mine, "read": mine})
    assert status in (201, 204), (base, status, text)


def cleanup(base):
    for name in ["none", "watcher", "dev"]:
        call(base, "guest", "guest", "DELETE", f"/api/users/{prefix}-{name}")
    for queue in ["mine-q", "other-q"]:
        call(base, "guest", "guest", "DELETE", f"/api/queues/%2F/{prefix}-{queue}")


# (user, method, path, body): what each user tries.
REQUESTS = [
    ("none", "GET", "/api/overview", None),
    ("none", "GET", "/api/whoami", None),
    ("watcher", "GET", "/api/overview", None),
    ("watcher", "GET", "/api/queues", None),
    ("watcher", "GET", "/api/users", None),
    ("watcher", "PUT", "/api/queues/%2F/{prefix}-other-q", {"durable": True}),
    ("dev", "GET", "/api/queues/%2F", None),
    ("dev", "PUT", "/api/queues/%2F/{prefix}-mine-q", {"durable": True}),
    ("dev", "PUT", "/api/queues/%2F/{prefix}-other-q", {"durable": True}),
    ("dev", "DELETE", "/api/queues/%2F/{prefix}-mine-q", None),
    ("dev", "GET", "/api/users", None),
    ("dev", "PUT", "/api/users/{prefix}-sneaky", {"password": "pw", "tags": "administrator"}),
    ("dev", "GET", "/api/permissions", None),
]


def answers(base):
    setup(base)
    try:
        out = []
        for user, method, path, body in REQUESTS:
            path = path.format(prefix=prefix)
            status, text = call(base, f"{prefix}-{user}", "pw", method, path, body)
            out.append((user, method, path, status, reason(status, text)))
        return out
    finally:
        cleanup(base)


ferry = answers(ferry_http)
rabbit = answers(rabbit_http)
differences = [(f, r) for f, r in zip(ferry, rabbit) if f != r]
for f, r in differences:
    print(f"ferry:    {f}\nrabbitmq: {r}")
if not differences:
    print("OK")
