"""An AMQP 1.0 client made of Qpid Proton's engine, driven through its transport by hand,
for Ferry's AMQP 1.0 transport codec (ferry-amqp10, tests/amqp10/): the test plays the
server with Ferry's frames, and Proton, the reference implementation, says whether they
made sense to it.

The client authenticates with SASL PLAIN as guest, opens a connection (container
`proton-client`, hostname `vhost:/`), a session and a sender link `sender-link` to
`/queues/q`, and sends one message (a data body `hello`, delivery tag `tag1`) once it has
credit.

Protocol on stdin/stdout, one line each way: the test writes the server's bytes in hex (an
empty line for none), the client pushes them into its transport and prints, in hex, what it
has to send then. The line END makes it print its state as JSON and exit.
"""
import json
import sys

from proton import Connection, Endpoint, Message, SASL, Transport


def main():
    transport = Transport()
    sasl = transport.sasl()
    sasl.allowed_mechs("PLAIN")
    # PLAIN without TLS, as over a plain listener (Proton refuses it unless told).
    sasl.allow_insecure_mechs = True
    connection = Connection()
    connection.container = "proton-client"
    connection.hostname = "vhost:/"
    connection.user = "guest"
    connection.password = "guest"
    transport.bind(connection)
    connection.open()
    session = connection.session()
    session.open()
    sender = session.sender("sender-link")
    sender.target.address = "/queues/q"
    sender.open()
    sent = False

    def flush():
        out = b""
        while True:
            n = transport.pending()
            if n <= 0:
                break
            chunk = transport.peek(n)
            transport.pop(len(chunk))
            out += chunk
        print(out.hex(), flush=True)

    flush()
    for line in sys.stdin:
        line = line.strip()
        if line == "END":
            print(json.dumps({
                "sasl_outcome": sasl.outcome,
                "connection_remote_active": bool(connection.state & Endpoint.REMOTE_ACTIVE),
                "session_remote_active": bool(session.state & Endpoint.REMOTE_ACTIVE),
                "link_remote_active": bool(sender.state & Endpoint.REMOTE_ACTIVE),
                "credit": sender.credit,
                "sent": sent,
                "condition": str(transport.condition or connection.remote_condition or ""),
            }), flush=True)
            return
        if line:
            transport.push(bytes.fromhex(line))
        if not sent and sender.credit > 0:
            sender.delivery(b"tag1")
            sender.send(Message(body=b"hello", inferred=True).encode())
            sender.advance()
            sent = True
        flush()


if __name__ == "__main__":
    main()
