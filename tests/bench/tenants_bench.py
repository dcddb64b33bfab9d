#!/usr/bin/python3
"""tenants_bench: how tenants share a daemon's lanes (docs/tenants.md), over
xferd's TCP transport on loopback (or verbs, in the Soft-RoCE VM:
tests/bench/softroce_bench.py --tenants).

  tests/bench/tenants_bench.py [--quick] [--no-build] [--bazel-bin DIR] [--json-out FILE]
                               [--cap BYTES_PER_S] [--size BYTES] [--transport tcp|verbs]

Builds the daemon and the Python client with --config=opt (unless
--no-build), starts daemons a and b with mTLS (their data lanes left
unencrypted), a connected to b, and on a four tenants told apart by their
clients' certificates. Each tenant's clients (four) write their own 32 MiB
region to b in a loop; a tenant's rate is the bytes its writes moved in
the window, per second: those of writes that ended plus the progress of
those under way at either edge (their snapshots' bytes_done), so the
figure does not depend on where the edges fall.
  1. "capped" (max_bandwidth = --cap, default 500 MB/s) beside "free"
     (uncapped): capped's rate against its cap (target: within 10%), and
     free's beside it;
  2. "heavy" (weight 3) beside "light" (weight 1), both normal and
     saturating the link: the ratio of their rates (target: 3 within 10%);
  3. "free" alone: the link's rate, for reference.
Every window lasts 10 s (4 s with --quick). A benchmark, not a test: it
checks every byte moved (each destination against its source at the end),
never the speed.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import threading
import time
from typing import Any, Dict, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import MiB, table  # noqa: E402

sys.path.insert(0, os.path.join(benchlib.REPO, "tests", "integration", "python"))
from certs import Ca  # noqa: E402  (the tests' certificate maker)

CLIENTS = 4
TENANTS = ("capped", "free", "heavy", "light")
TARGET_CAP_ERROR = 0.10
TARGET_WEIGHT_RATIO = 3.0


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="4 s windows")
    p.add_argument("--no-build", action="store_true", help="use the existing --config=opt build")
    p.add_argument("--bazel-bin", help="bazel-bin of an optimized build (default: bazel info)")
    p.add_argument("--json-out", help="also write the summary line to this file")
    p.add_argument("--cap", type=int, default=500 * 1000 * 1000,
                   help="capped's max_bandwidth, bytes per second (default 500 MB/s)")
    p.add_argument("--size", type=int, default=32 * MiB, help="bytes of each write")
    p.add_argument("--transport", choices=("tcp", "verbs"), default="tcp",
                   help="the daemons' transport (verbs: where an RDMA device is, the VM)")
    return p.parse_args()


def tenants_toml(cap: int) -> str:
    return (f'[transport]\ntcp_encryption = "off"\n'
            f'[tenants.capped]\ncert_names = ["capped"]\nmax_bandwidth = {cap}\n'
            f'[tenants.free]\ncert_names = ["free"]\n'
            f'[tenants.heavy]\ncert_names = ["heavy"]\nweight = 3\n'
            f'[tenants.light]\ncert_names = ["light"]\nweight = 1\n')


class Writers:
    """A tenant's clients, each writing its region into its own on b in a
    loop while `running`."""

    def __init__(self, xferd: Any, tenant: str, address: str, tls: Any, size: int) -> None:
        self.tenant, self.size = tenant, size
        self.clients = [xferd.Client(address, tls=tls) for _ in range(CLIENTS)]
        # Per client, under `lock`: bytes of its writes that ended, and the
        # write under way.
        self.lock = threading.Lock()
        self.ended = [0] * CLIENTS
        self.current: List[Any] = [None] * CLIENTS
        self.running = threading.Event()
        self.stop = threading.Event()
        self.error: List[BaseException] = []
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True)
                        for i in range(CLIENTS)]
        for t in self.threads:
            t.start()

    def _run(self, i: int) -> None:
        try:
            while not self.stop.is_set():
                if not self.running.wait(0.05):
                    continue
                handle = self.clients[i].write(f"{self.tenant}_src{i}", "b",
                                               f"{self.tenant}_dst{i}", self.size)
                with self.lock:
                    self.current[i] = handle
                handle.wait(600).raise_for_state()
                with self.lock:
                    self.ended[i] += self.size
                    self.current[i] = None
        except BaseException as e:  # reported by the main thread
            self.error.append(e)

    def moved(self) -> int:
        """Bytes its writes moved so far, those under way included."""
        with self.lock:
            return sum(self.ended) + sum(h.snapshot().bytes_done for h in self.current
                                         if h is not None)

    def check(self) -> None:
        if self.error:
            raise SystemExit(f"a write of tenant {self.tenant} failed: {self.error[0]!r}")

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=600)
        for c in self.clients:
            c.close()


def window(ops: Any, writers: List[Writers], seconds: float) -> Dict[str, float]:
    """Runs `writers` for `seconds` after a second's warm-up; each tenant's
    bytes per second of writes that ended meanwhile."""
    for w in writers:
        w.running.set()
    time.sleep(1.0)
    before, start = {w.tenant: w.moved() for w in writers}, time.monotonic()
    time.sleep(seconds)
    after, elapsed = {w.tenant: w.moved() for w in writers}, time.monotonic() - start
    for w in writers:
        w.running.clear()
        w.check()
    # Let the writes under way end before the next window.
    while any(t.transfers_in_flight for t in ops.stats().tenants):
        time.sleep(0.05)
    return {w.tenant: (after[w.tenant] - before[w.tenant]) / elapsed for w in writers}


def main() -> None:
    args = parse_args()
    bins = benchlib.build(args.no_build, args.bazel_bin)
    bins.import_client()
    import xferd
    seconds = 4.0 if args.quick else 10.0
    children = benchlib.Children()
    workdir = tempfile.mkdtemp(prefix="tenants-bench-")
    children.dirs.append(workdir)
    writers: List[Writers] = []
    try:
        ca = Ca(os.path.join(workdir, "pki"), "ca")
        tls_args = {name: ca.issue(name).daemon_args(ca) for name in ("a", "b")}
        a = benchlib.start_daemon(children, bins.xferd, workdir, "a", args.transport,
                                  args=tls_args["a"], toml=tenants_toml(args.cap))
        b = benchlib.start_daemon(children, bins.xferd, workdir, "b", args.transport,
                                  args=tls_args["b"], toml='[transport]\ntcp_encryption = "off"\n')
        ops, cb = xferd.Client(a.target), xferd.Client(b.target)
        ops.connect_peer(b.address)
        pattern = os.urandom(MiB)
        by_tenant: Dict[str, Writers] = {}
        for tenant in TENANTS:
            cert = ca.issue(tenant)
            tls = xferd.TlsConfig(ca=ca.cert, cert=cert.cert, key=cert.key)
            with xferd.Client(a.address, tls=tls) as c:
                assert c.node_info().tenant == tenant, c.node_info().tenant
            w = Writers(xferd, tenant, a.address, tls, args.size)
            for i, client in enumerate(w.clients):
                client.register_region(f"{tenant}_src{i}", args.size)
                cb.register_region(f"{tenant}_dst{i}", args.size, backing="shm",
                                   remote_write=True)
            by_tenant[tenant] = w
            writers.append(w)
        # The sources' bytes: anonymous regions of the tenants' own, filled
        # through a read from b (the clients over TCP cannot map them).
        fill = cb.register_region("fill", args.size, backing="shm", remote_read=True)
        for k in range(args.size // MiB):
            fill.buffer[k * MiB:(k + 1) * MiB] = pattern
        want = hashlib.sha256(fill.buffer).hexdigest()
        for w in writers:
            for i, client in enumerate(w.clients):
                client.read("b", "fill", f"{w.tenant}_src{i}", args.size).wait(600)

        benchlib.log(f"window 1: capped (max_bandwidth {args.cap / 1e6:.0f} MB/s) beside "
                     f"free, {seconds:.0f} s")
        capped = window(ops, [by_tenant["capped"], by_tenant["free"]], seconds)
        benchlib.log(f"window 2: heavy (weight 3) beside light (weight 1), {seconds:.0f} s")
        weighted = window(ops, [by_tenant["heavy"], by_tenant["light"]], seconds)
        benchlib.log(f"window 3: free alone, {seconds:.0f} s")
        alone = window(ops, [by_tenant["free"]], seconds)
        for w in writers:
            w.close()
        writers = []
        for tenant in TENANTS:
            for i in range(CLIENTS):
                region = cb.region(f"{tenant}_dst{i}")
                if hashlib.sha256(region.buffer).hexdigest() != want:
                    raise SystemExit(f"{tenant}_dst{i} differs from its source after the run")

        cap_error = capped["capped"] / args.cap - 1
        ratio = weighted["heavy"] / weighted["light"]
        print(table(["", "MB/s", "against", "figure", "target"], [
            ["capped, beside free", f"{capped['capped'] / 1e6:.0f}",
             f"cap {args.cap / 1e6:.0f}", f"{cap_error:+.1%}",
             benchlib.verdict(abs(cap_error), TARGET_CAP_ERROR, higher_is_better=False)],
            ["free, beside capped", f"{capped['free'] / 1e6:.0f}",
             f"alone {alone['free'] / 1e6:.0f}", f"{capped['free'] / alone['free']:.2f}", ""],
            ["heavy (weight 3), beside light", f"{weighted['heavy'] / 1e6:.0f}", "", "", ""],
            ["light (weight 1), beside heavy", f"{weighted['light'] / 1e6:.0f}",
             "heavy / light", f"{ratio:.2f}",
             benchlib.verdict(abs(ratio / TARGET_WEIGHT_RATIO - 1), TARGET_CAP_ERROR,
                              higher_is_better=False)],
            ["heavy + light", f"{(weighted['heavy'] + weighted['light']) / 1e6:.0f}",
             f"free alone {alone['free'] / 1e6:.0f}",
             f"{(weighted['heavy'] + weighted['light']) / alone['free']:.2f}", ""],
        ]))
        print(f"load average: {benchlib.load_average()}")
        benchlib.emit_summary({"transport": args.transport, "window_s": seconds, "bytes_per_write": args.size,
                               "cap_bytes_per_s": args.cap, "capped": capped,
                               "weighted": weighted, "alone": alone, "cap_error": cap_error,
                               "weight_ratio": ratio}, args.json_out)
        ops.close()
        cb.close()
    finally:
        for w in writers:
            w.close()
        children.stop_all()


if __name__ == "__main__":
    main()
