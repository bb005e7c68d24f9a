#!/usr/bin/env python3
"""A NATS subscriber for scripts/bench-triggers: creates a JetStream stream taking SUBJECT,
then reads every message published to it (a core subscription sees JetStream's publishes),
timing each CloudEvent from its write (`time`) to its arrival. Prints the figures at SIGTERM.

Usage: nats_latency.py HOST:PORT SUBJECT READY_FILE
"""
import json
import signal
import socket
import sys
import time
from datetime import datetime


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    subject, ready = sys.argv[2], sys.argv[3]
    sock = socket.create_connection((host, int(port)))
    buf = b""

    def read_line():
        nonlocal buf
        while b"\r\n" not in buf:
            chunk = sock.recv(1 << 16)
            if not chunk:
                raise SystemExit("nats closed")
            buf += chunk
        line, buf = buf.split(b"\r\n", 1)
        return line

    def read_bytes(n):
        nonlocal buf
        while len(buf) < n + 2:
            chunk = sock.recv(1 << 16)
            if not chunk:
                raise SystemExit("nats closed")
            buf += chunk
        data, buf = buf[:n], buf[n + 2 :]
        return data

    read_line()  # INFO
    sock.sendall(b'CONNECT {"verbose":false,"headers":true}\r\nSUB _INBOX.bench 1\r\n')
    stream = json.dumps({"name": "BENCH", "subjects": [subject], "storage": "file"}).encode()
    sock.sendall(b"PUB $JS.API.STREAM.CREATE.BENCH _INBOX.bench %d\r\n%s\r\n" % (len(stream), stream))
    sock.sendall(b"SUB %s 2\r\nPING\r\n" % subject.encode())
    ages, seen, repeats, disorder, last = [], set(), 0, 0, -1

    def report(*_):
        print(f"events received: {len(seen) + repeats}")
        if ages:
            ages.sort()
            q = lambda p: ages[min(len(ages) - 1, int(p * len(ages)))]
            print(f"declared events: {len(seen)} distinct, {repeats} repeats, {disorder} out of log order")
            print(f"write to arrival (ms): p50 {q(0.5)}, p99 {q(0.99)}, p999 {q(0.999)}, max {ages[-1]}")
        sys.stdout.flush()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, report)
    while True:
        line = read_line()
        if line.startswith(b"PING"):
            sock.sendall(b"PONG\r\n")
        elif line.startswith(b"PONG"):
            open(ready, "w").close()
        elif line.startswith(b"MSG") or line.startswith(b"HMSG"):
            parts = line.split()
            total = int(parts[-1])
            data = read_bytes(total)
            if parts[0] == b"HMSG":
                data = data[int(parts[-2]) :]
            if parts[2] != b"2":
                continue  # the stream's creation answer
            now = time.time() * 1000
            event = json.loads(data)
            if event["id"] in seen:
                repeats += 1
                continue
            seen.add(event["id"])
            pos = int(event["id"].split(".")[1])
            disorder += pos < last
            last = pos
            when = datetime.fromisoformat(event["time"].replace("Z", "+00:00")).timestamp() * 1000
            ages.append(round(now - when))


main()
