"""The management API as the Python test scripts call it: urllib, HTTP basic auth, JSON in
and out. A module the scripts import (they run from this folder)."""
import base64
import json
import urllib.error
import urllib.request


def call(base, method, path, body=None, user="guest", password="guest", raw=None, timeout=40):
    """(status, answer) of one request: `body` sent as JSON (or the bytes `raw`), the answer
    parsed as JSON (None when empty)."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(base + path, data=data, method=method)
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    request.add_header("Authorization", "Basic " + token)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")
