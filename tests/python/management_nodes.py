"""The node endpoints monitoring tools poll, against Ferry and the suite's RabbitMQ node:
/api/nodes and /api/nodes/{name} (the keys RabbitMQ answers, with the same JSON types;
Ferry's figures checked against /proc of its process), /api/cluster-name, /api/extensions,
/api/healthchecks/node, /api/policies, /api/operator-policies and /api/parameters (empty,
refused per tag as on the node), rabbitmqadmin's `list nodes`, `list policies` and
`list parameters`; then a second Ferry whose memory mark and free-disk limit are out of
reach, whose node must report both alarms. Prints OK when every check passed.

usage: management_nodes.py FERRY_HTTP FERRY_PID FERRY_DATA RABBIT_HTTP RABBITMQADMIN PREFIX
                           ALARMED_HTTP
"""
import json, os, subprocess, sys, time, urllib.parse
import requests

(ferry, ferry_pid, ferry_data, rabbit, admin, prefix, alarmed) = sys.argv[1:8]
AUTH = ("guest", "guest")
NODE_KEYS = ["name", "type", "running", "os_pid", "processors", "uptime", "rates_mode",
             "mem_used", "mem_limit", "mem_alarm", "mem_calculation_strategy", "disk_free",
             "disk_free_limit", "disk_free_alarm", "fd_used", "fd_total", "sockets_used",
             "sockets_total", "proc_used", "run_queue", "partitions", "cluster_links",
             "applications", "enabled_plugins", "auth_mechanisms", "exchange_types",
             "contexts", "log_files", "db_dir"]


def get(base, path, auth=AUTH):
    return requests.get(base + path, auth=auth, timeout=30)


def rabbit_nodes():
    # A new node fills its statistics in over its 5 s sampling interval.
    for _ in range(60):
        nodes = get(rabbit, "/api/nodes").json()
        if all(k in nodes[0] for k in NODE_KEYS):
            return nodes
        time.sleep(0.5)
    raise AssertionError(("the node never listed", [k for k in NODE_KEYS if k not in nodes[0]]))


# 1. /api/nodes: one node, RabbitMQ's keys with RabbitMQ's types.
theirs = rabbit_nodes()
ours = get(ferry, "/api/nodes").json()
assert len(ours) == 1, ours
node = ours[0]
for k in NODE_KEYS:
    assert k in node, (k, node)
    assert type(node[k]) is type(theirs[0][k]), (k, node[k], theirs[0][k])

# Named as the metrics' identity labels name it: ferry-NODE_ID@HOST (kafka.node_id 0).
with open("/proc/sys/kernel/hostname") as f:
    assert node["name"] == "ferry-0@" + f.read().strip(), node["name"]

# 2. The figures are this process's.
pid = int(ferry_pid)
assert node["os_pid"] == str(pid), node["os_pid"]
assert node["running"] is True and node["type"] == "disc"
fds = len(os.listdir(f"/proc/{pid}/fd"))
assert abs(node["fd_used"] - fds) <= 20, (node["fd_used"], fds)
with open(f"/proc/{pid}/limits") as f:
    soft = next(line.split()[3] for line in f if line.startswith("Max open files"))
assert node["fd_total"] == int(soft), (node["fd_total"], soft)
sockets = sum(1 for fd in os.listdir(f"/proc/{pid}/fd")
              if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"))
# Four listeners at least, and about as many as /proc counts.
assert node["sockets_used"] >= 4 and abs(node["sockets_used"] - sockets) <= 20, (node["sockets_used"], sockets)
with open(f"/proc/{pid}/statm") as f:
    rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
assert 0.5 * rss < node["mem_used"] < 2 * rss, (node["mem_used"], rss)
assert node["mem_limit"] > node["mem_used"] and node["mem_alarm"] is False, node
st = os.statvfs(ferry_data)
free = st.f_bavail * st.f_frsize
assert abs(node["disk_free"] - free) < max(free // 20, 64 << 20), (node["disk_free"], free)
assert node["disk_free_limit"] == 50 << 20 and node["disk_free_alarm"] is False, node
assert node["db_dir"] == ferry_data, (node["db_dir"], ferry_data)
assert node["processors"] == os.cpu_count(), node["processors"]
assert node["proc_used"] > 0 and node["run_queue"] >= 0, node
first_uptime = node["uptime"]
time.sleep(1.1)
later = get(ferry, "/api/nodes/" + urllib.parse.quote(node["name"], safe="")).json()
assert later["uptime"] >= first_uptime + 1000, (first_uptime, later["uptime"])
assert sorted(later) == sorted(node), (sorted(later), sorted(node))
assert get(ferry, "/api/nodes/rabbit@nowhere").status_code == 404
ports = sorted(int(c["port"]) for c in node["contexts"])
assert urllib.parse.urlparse(ferry).port in ports, (ports, ferry)

# 3. The small endpoints answer as the node's do.
for path in ["/api/cluster-name", "/api/extensions", "/api/healthchecks/node",
             "/api/policies", "/api/policies/%2f", "/api/operator-policies",
             "/api/parameters", "/api/parameters/shovel", "/api/parameters/shovel/%2f"]:
    a, b = get(ferry, path), get(rabbit, path)
    assert a.status_code == b.status_code == 200, (path, a.status_code, b.status_code)
    assert type(a.json()) is type(b.json()), (path, a.json(), b.json())
assert get(ferry, "/api/cluster-name").json() == {"name": node["name"]}
assert get(ferry, "/api/healthchecks/node").json() == {"status": "ok"}
assert get(ferry, "/api/healthchecks/node/" + urllib.parse.quote(node["name"], safe="")).json() == {"status": "ok"}
for path in ["/api/policies", "/api/policies/%2f", "/api/parameters", "/api/operator-policies"]:
    assert get(ferry, path).json() == [], path
for path in ["/api/policies/%2f/none", "/api/parameters/shovel/%2f/none",
             "/api/policies/no-such-vhost"]:
    a, b = get(ferry, path), get(rabbit, path)
    assert a.status_code == b.status_code == 404, (path, a.status_code, b.status_code)

# Setting a policy or a parameter is refused, saying what to do instead.
policy = {"pattern": ".*", "definition": {"message-ttl": 1000}, "apply-to": "queues"}
r = requests.put(ferry + "/api/policies/%2f/ttl", json=policy, auth=AUTH, timeout=30)
assert r.status_code == 400 and "x-message-ttl" in r.json()["reason"], (r.status_code, r.text)
r = requests.put(ferry + "/api/parameters/shovel/%2f/s", json={"value": {}}, auth=AUTH, timeout=30)
assert r.status_code == 400 and "/api/ferry/routes" in r.json()["reason"], (r.status_code, r.text)

# 4. Who may see what, as on the node: users of each tag, made on both.
for base in (ferry, rabbit):
    for tag in ("management", "policymaker", "monitoring"):
        user = f"{prefix}-{tag}"
        r = requests.put(f"{base}/api/users/{user}", json={"password": "pw", "tags": tag}, auth=AUTH, timeout=30)
        assert r.status_code in (201, 204), (base, r.status_code, r.text)
        if tag != "monitoring":
            r = requests.put(f"{base}/api/permissions/%2f/{user}",
                             json={"configure": ".*", "write": ".*", "read": ".*"}, auth=AUTH, timeout=30)
            assert r.status_code in (201, 204), (base, r.status_code, r.text)
for tag in ("management", "policymaker", "monitoring"):
    auth = (f"{prefix}-{tag}", "pw")
    for path in ["/api/nodes", "/api/cluster-name", "/api/extensions", "/api/policies",
                 "/api/policies/%2f", "/api/parameters", "/api/parameters/shovel/%2f",
                 "/api/healthchecks/node"]:
        a, b = get(ferry, path, auth), get(rabbit, path, auth)
        assert a.status_code == b.status_code, (tag, path, a.status_code, a.text, b.status_code, b.text)
        if a.status_code == 401:
            assert a.json()["reason"] == b.json()["reason"], (tag, path, a.text, b.text)

# 5. rabbitmqadmin, as the RabbitMQ team ships it.
def rabbitmqadmin(*args):
    port = urllib.parse.urlparse(ferry).port
    out = subprocess.run([sys.executable, admin, "-H", "127.0.0.1", "-P", str(port),
                          "-u", "guest", "-p", "guest", *args],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, (args, out.stdout, out.stderr)
    return out.stdout

table = rabbitmqadmin("list", "nodes")
assert node["name"] in table and "mem_used" in table, table
listed = json.loads(rabbitmqadmin("-f", "raw_json", "list", "nodes"))
assert [n["name"] for n in listed] == [node["name"]], listed
assert json.loads(rabbitmqadmin("-f", "raw_json", "list", "policies")) == []
assert json.loads(rabbitmqadmin("-f", "raw_json", "list", "parameters")) == []
assert node["name"] in rabbitmqadmin("show", "overview")

# 6. A node over its memory mark and under its free-disk limit reports both alarms, and
# its alarm health check fails.
for _ in range(100):
    raised = get(alarmed, "/api/nodes").json()[0]
    if raised["mem_alarm"] and raised["disk_free_alarm"]:
        break
    time.sleep(0.2)
assert raised["mem_alarm"] is True and raised["disk_free_alarm"] is True, raised
assert raised["mem_used"] > raised["mem_limit"], raised
assert raised["disk_free"] < raised["disk_free_limit"], raised
assert get(alarmed, "/api/health/checks/alarms").status_code == 503

print("OK")
