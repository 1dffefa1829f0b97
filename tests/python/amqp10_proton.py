"""AMQP 1.0 messages from Qpid Proton, the reference implementation, for Ferry's codec
(ferry-amqp10, tests/amqp10/): seeded random messages with every section and every type
Proton writes — header, delivery and message annotations, properties, application
properties, data / amqp-value / amqp-sequence bodies, footer.

usage: amqp10_proton.py make SEED COUNT     print each message Proton encodes, hex, one a line
       amqp10_proton.py check SEED COUNT    read as many hex messages on stdin (Ferry's
                                             re-encoding of `make`'s), decode each with Proton
                                             and compare it with the message made from SEED;
                                             print OK, or each difference
"""
import random
import sys
import uuid

from proton import (UNDESCRIBED, Array, Data, Described, Message, byte, char, decimal64,
                    float32, int32, short, symbol, timestamp, ubyte, uint, ulong, ushort)


def scalar(r):
    """A random value of one of AMQP 1.0's primitive types, as Proton types it."""
    kind = r.randrange(19)
    if kind == 0:
        return None
    if kind == 1:
        return r.random() < 0.5
    if kind == 2:
        return ubyte(r.randrange(256))
    if kind == 3:
        return ushort(r.randrange(1 << 16))
    if kind == 4:
        return uint(r.choice([0, 7, 255, 256, (1 << 32) - 1]))
    if kind == 5:
        return ulong(r.choice([0, 9, 255, 256, (1 << 64) - 1]))
    if kind == 6:
        return byte(r.randrange(-128, 128))
    if kind == 7:
        return short(r.randrange(-(1 << 15), 1 << 15))
    if kind == 8:
        return int32(r.choice([-1, 127, 128, -(1 << 31), (1 << 31) - 1]))
    if kind == 9:
        return r.choice([-1, 127, 128, -(1 << 63), (1 << 63) - 1])  # long
    if kind == 10:
        return float32(r.choice([0.5, -2.25, 1e10]))
    if kind == 11:
        return r.choice([0.1, -1e300, 3.0])  # double
    if kind == 12:
        return char(r.choice("aé€😀"))
    if kind == 13:
        return timestamp(r.randrange(1 << 41))
    if kind == 14:
        return uuid.UUID(int=r.getrandbits(128))
    if kind == 15:
        return bytes(r.randrange(256) for _ in range(r.choice([0, 3, 300])))
    if kind == 16:
        return "".join(r.choice("abcé€ ") for _ in range(r.choice([0, 5, 400])))
    if kind == 17:
        return symbol(r.choice(["", "x-opt-a", "text/plain"]))
    return decimal64(r.getrandbits(64))


def value(r, depth=0):
    """A random value: a scalar, or (not too deep) a list, a map, an array or a described."""
    kind = r.randrange(10) if depth < 3 else 0
    if kind <= 5:
        return scalar(r)
    if kind == 6:
        return [value(r, depth + 1) for _ in range(r.randrange(5))]
    if kind == 7:
        return {symbol(f"k{i}"): value(r, depth + 1) for i in range(r.randrange(4))}
    if kind == 8:
        n = r.randrange(4)
        if r.random() < 0.5:
            return Array(UNDESCRIBED, Data.INT, *[int32(i * 1000) for i in range(n)])
        return Array(UNDESCRIBED, Data.SYMBOL, *[symbol(f"s{i}") for i in range(n)])
    return Described(symbol("ferry:test"), scalar(r))


def message(seed, i):
    r = random.Random(f"{seed}-{i}")
    m = Message()
    if r.random() < 0.7:
        m.durable = r.random() < 0.5
        m.priority = r.randrange(10)
        m.ttl = r.randrange(1, 100_000) / 1000
        m.first_acquirer = r.random() < 0.5
        m.delivery_count = r.randrange(5)
    if r.random() < 0.7:
        m.id = r.choice([ulong(r.randrange(1 << 40)), uuid.UUID(int=r.getrandbits(128)),
                         b"bin-id", f"id-{i}"])
        m.user_id = b"guest"
        m.address = f"/queues/q{i}"
        m.subject = "subject"
        m.reply_to = "/queues/replies"
        m.correlation_id = r.choice([f"c-{i}", ulong(7), b"\x00\x01"])
        m.content_type = symbol("application/json")
        m.content_encoding = symbol("gzip")
        m.expiry_time = r.randrange(1 << 40) / 1000
        m.creation_time = r.randrange(1 << 40) / 1000
        m.group_id = "g"
        m.group_sequence = r.randrange(1 << 31)
        m.reply_to_group_id = "rg"
    if r.random() < 0.5:
        m.instructions = {symbol("x-opt-d"): value(r)}
    if r.random() < 0.7:
        m.annotations = {symbol("x-opt-routing-key"): "k", symbol("x-opt-n"): value(r)}
    if r.random() < 0.7:
        m.properties = {f"p{j}": scalar(r) for j in range(r.randrange(6))}
    body = r.randrange(4)
    if body == 0:
        m.inferred = True
        m.body = bytes(r.randrange(256) for _ in range(r.choice([0, 10, 1000])))
    elif body == 1:
        m.inferred = True
        m.body = [value(r) for _ in range(r.randrange(4))]
    else:
        m.body = value(r)
    return m


FIELDS = ["durable", "priority", "ttl", "first_acquirer", "delivery_count", "id", "user_id",
          "address", "subject", "reply_to", "correlation_id", "content_type", "content_encoding",
          "expiry_time", "creation_time", "group_id", "group_sequence", "reply_to_group_id",
          "instructions", "annotations", "properties", "body", "inferred"]


def plain(v):
    """`v` with Proton's decoded binary (memoryview) as bytes, inside containers too."""
    if isinstance(v, memoryview):
        return bytes(v)
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {plain(k): plain(x) for k, x in v.items()}
    return v


def main():
    mode, seed, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if mode == "make":
        for i in range(count):
            print(message(seed, i).encode().hex())
        return
    lines = sys.stdin.read().split()
    assert len(lines) == count, (len(lines), count)
    differences = []
    for i, line in enumerate(lines):
        want = message(seed, i)
        got = Message()
        got.decode(bytes.fromhex(line))
        for field in FIELDS:
            a, b = plain(getattr(want, field)), plain(getattr(got, field))
            if a != b or type(a) is not type(b):
                differences.append(f"message {i} {field}: proton made {a!r:.200} "
                                   f"({type(a).__name__}), Ferry's re-encoding reads {b!r:.200} "
                                   f"({type(b).__name__})")
    print("\n".join(differences) if differences else "OK")


if __name__ == "__main__":
    main()
