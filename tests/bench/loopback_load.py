#!/usr/bin/python3
"""A reference load for qos_bench: PAIRS sender/receiver process pairs
streaming over loopback TCP (sendall and recv_into of 1 MiB), the kernel
paths of the daemons' TCP lanes (the copy in, the loopback's softirq, the
copy out) with none of the daemons' work. Each receiver keeps its running
byte count in its 8-byte slot of COUNTERS, which the caller maps to read the
rate. Runs until SIGTERM, which stops every child.

  tests/bench/loopback_load.py PAIRS COUNTERS

A load generator, like qperf's tcp_bw: its bytes are not checked.
"""

import mmap
import os
import signal
import socket
import struct
import sys
from typing import List, NoReturn

CHUNK = 1 << 20


def receive(listener: socket.socket, counters: mmap.mmap, slot: int) -> NoReturn:
    conn, _ = listener.accept()
    buf = bytearray(CHUNK)
    total = 0
    while True:
        got = conn.recv_into(buf)
        if not got:
            os._exit(0)
        total += got
        struct.pack_into("<Q", counters, 8 * slot, total)


def send(port: int) -> NoReturn:
    s = socket.create_connection(("127.0.0.1", port))
    data = os.urandom(CHUNK)
    while True:
        s.sendall(data)


def main() -> None:
    pairs, path = int(sys.argv[1]), sys.argv[2]
    with open(path, "wb") as f:
        f.write(b"\0" * 8 * pairs)
    fd = os.open(path, os.O_RDWR)
    counters = mmap.mmap(fd, 8 * pairs)
    children: List[int] = []

    def stop(*_: object) -> None:
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    for slot in range(pairs):
        listener = socket.create_server(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        pid = os.fork()
        if pid == 0:
            receive(listener, counters, slot)
        children.append(pid)
        listener.close()
        pid = os.fork()
        if pid == 0:
            send(port)
        children.append(pid)
    for pid in children:
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
