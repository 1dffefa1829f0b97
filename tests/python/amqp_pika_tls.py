"""Drives Ferry's amqps listener with pika over TLS, presenting a client certificate:
publishes under confirms and reads the message back. Run by tests/amqp/tls.rs as
`python3 amqp_pika_tls.py PORT CA_FILE CERT_FILE KEY_FILE [external]`; with `external` it
logs in with SASL EXTERNAL (the user named by the certificate) instead of guest's password.
Prints the body it read back; exits non-zero on any failure."""

import ssl
import sys

import pika
import pika.credentials


def main(port, ca_file, cert_file, key_file, mode="password"):
    context = ssl.create_default_context(cafile=ca_file)
    context.load_cert_chain(cert_file, key_file)
    params = pika.ConnectionParameters(
        host="127.0.0.1",
        port=int(port),
        credentials=(
            pika.credentials.ExternalCredentials()
            if mode == "external"
            else pika.PlainCredentials("guest", "guest")
        ),
        ssl_options=pika.SSLOptions(context, server_hostname="localhost"),
    )
    conn = pika.BlockingConnection(params)
    ch = conn.channel()
    ch.confirm_delivery()
    ch.queue_declare("pika-tls", durable=True)
    ch.basic_publish("", "pika-tls", b"pika over TLS")
    _, _, body = ch.basic_get("pika-tls", auto_ack=True)
    print(body.decode())
    conn.close()


if __name__ == "__main__":
    main(*sys.argv[1:6])
