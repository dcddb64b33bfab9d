"""Load: 32 concurrent clients x 200 transfers of mixed sizes across three
daemons (every pair, both directions). Each client owns a disjoint slice of
every region, fills its source slice with fresh data before each write and
checks the destination slice's checksum after it: zero lost or corrupted
bytes. Daemon memory beyond the registered regions is sampled throughout and
must stay bounded. Prints throughput, p50/p99 latency as the client sees it
(Python, 32 threads sharing one GIL: mostly client time) and as the daemon
sees it (submission to end), and a JSON summary line.

XFERD_LOAD_CLIENTS / XFERD_LOAD_TRANSFERS scale it (defaults 32 x 200).
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import threading
import time
from typing import Dict, List, Tuple

import pytest

import pytest_main
import xferd
from daemons import TRANSPORT, Cluster
from testlib import WAIT_S, sha

CLIENTS = int(os.environ.get("XFERD_LOAD_CLIENTS", "32"))
TRANSFERS = int(os.environ.get("XFERD_LOAD_TRANSFERS", "200"))
KiB, MiB = 1 << 10, 1 << 20
# Mixed sizes: many small, some medium, a few large (odd sizes cross slices).
SIZES = [(4 * KiB, 40), (64 * KiB + 3, 30), (512 * KiB, 20), (2 * MiB + 7, 8), (8 * MiB, 2)]
SLOT = 8 * MiB  # each client's slice of every region
NODES = ("a", "b", "c")
MEMORY_BOUND = 256 * MiB  # resident memory beyond registered regions, per daemon


def pick_size(rng: random.Random) -> int:
    return rng.choices([s for s, _ in SIZES], weights=[w for _, w in SIZES])[0]


class Sampler(threading.Thread):
    """Samples each daemon's resident memory beyond its registered regions."""

    def __init__(self, clients: Dict[str, xferd.Client]) -> None:
        super().__init__(daemon=True)
        self.clients = clients
        self.peak: Dict[str, int] = {n: 0 for n in clients}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.2):
            for name, client in self.clients.items():
                s = client.stats()
                self.peak[name] = max(self.peak[name], s.resident_bytes - s.registered_bytes)


def client_loop(index: int, cluster: Cluster, results: List[Tuple[int, float, float]],
                errors: List[str]) -> None:
    rng = random.Random(index)
    clients = {n: cluster[n].client() for n in NODES}
    try:
        buffers = {n: clients[n].region("load").buffer for n in NODES}
        for k in range(TRANSFERS):
            src, dst = rng.sample(NODES, 2)
            size = pick_size(rng)
            offset = index * SLOT
            data = rng.randbytes(size)
            buffers[src][offset:offset + size] = data
            start = time.monotonic()
            t = clients[src].write("load", dst, "load", size, src_offset=offset,
                                   dst_offset=offset, label=f"c{index}-{k}").wait(WAIT_S)
            latency = time.monotonic() - start
            got = buffers[dst][offset:offset + size]
            if sha(got) != sha(data) or t.bytes_done != size:
                errors.append(f"client {index} transfer {k} {src}->{dst}: bytes differ")
            daemon_latency = (t.finished_at - t.submitted_at).total_seconds()
            results.append((size, latency, daemon_latency))
    except Exception as e:  # noqa: BLE001 - every failure is reported, none is lost
        errors.append(f"client {index}: {type(e).__name__}: {e}")
    finally:
        for c in clients.values():
            c.close()


def report(summary: dict, total: int, wall: float) -> None:
    print(f"\nload ({TRANSPORT}): {CLIENTS} clients x {TRANSFERS} transfers, "
          f"{total / MiB:.0f} MiB in {wall:.1f} s = {summary['throughput_MBps']} MB/s, "
          f"{summary['transfers_per_s']} transfers/s; latency p50 "
          f"{summary['latency_ms_p50']} ms, p99 {summary['latency_ms_p99']} ms "
          f"(4 KiB: p50 {summary['latency_4KiB_ms_p50']} ms, p99 "
          f"{summary['latency_4KiB_ms_p99']} ms; inside the daemon, submission to end: p50 "
          f"{summary['daemon_ms_p50']} ms, p99 {summary['daemon_ms_p99']} ms); errors {summary['errors']}; peak memory "
          f"beyond regions (MiB) {summary['peak_memory_beyond_regions_MiB']}")
    print("load summary: " + json.dumps(summary), flush=True)


def test_load(capsys: pytest.CaptureFixture) -> None:
    with Cluster(NODES) as cluster:
        admins = {n: cluster[n].client() for n in NODES}
        for n in NODES:
            admins[n].register_region("load", CLIENTS * SLOT, backing="shm", remote_write=True)
        for src in NODES:
            for dst in NODES:
                if src != dst:
                    admins[src].connect_peer(cluster[dst].address)
        before = {n: admins[n].stats() for n in NODES}
        sampler = Sampler(admins)
        sampler.start()
        results: List[Tuple[int, float, float]] = []
        errors: List[str] = []
        threads = [threading.Thread(target=client_loop, args=(i, cluster, results, errors))
                   for i in range(CLIENTS)]
        start = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.monotonic() - start
        sampler.stop.set()
        sampler.join()
        after = {n: admins[n].stats() for n in NODES}

        total = sum(size for size, _, _ in results)
        latencies = sorted(lat for _, lat, _ in results)
        small = sorted(lat for size, lat, _ in results if size <= 4 * KiB)
        in_daemon = sorted(lat for _, _, lat in results)
        q = lambda xs, p: xs[min(len(xs) - 1, int(p * len(xs)))] * 1e3 if xs else float("nan")
        summary = {
            "transport": TRANSPORT, "clients": CLIENTS, "transfers": len(results),
            "errors": len(errors), "bytes": total, "seconds": round(wall, 2),
            "throughput_MBps": round(total / wall / 1e6, 1),
            "transfers_per_s": round(len(results) / wall, 1),
            "latency_ms_p50": round(q(latencies, 0.50), 2),
            "latency_ms_p99": round(q(latencies, 0.99), 2),
            "latency_4KiB_ms_p50": round(q(small, 0.50), 2),
            "latency_4KiB_ms_p99": round(q(small, 0.99), 2),
            "daemon_ms_p50": round(q(in_daemon, 0.50), 2),
            "daemon_ms_p99": round(q(in_daemon, 0.99), 2),
            "peak_memory_beyond_regions_MiB": {n: round(v / MiB, 1) for n, v in sampler.peak.items()},
        }
        with capsys.disabled():
            report(summary, total, wall)

        assert not errors, "\n".join(errors[:20])
        assert len(results) == CLIENTS * TRANSFERS
        # Every transfer the clients saw end is counted done by its daemon.
        done = sum(after[n].transfers_done - before[n].transfers_done for n in NODES)
        assert done == CLIENTS * TRANSFERS
        for n in NODES:
            assert after[n].transfers_in_flight == 0
            assert after[n].transfers_failed == before[n].transfers_failed, after[n].errors
            assert sampler.peak[n] < MEMORY_BOUND, f"{n}: {sampler.peak[n] >> 20} MiB"
        for c in admins.values():
            c.close()


if __name__ == "__main__":
    sys.exit(pytest_main.main(__file__, sys.argv))
