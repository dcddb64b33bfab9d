#!/usr/bin/python3
"""qos_bench: a critical client's latency beside bulk writes, by priority,
over xferd's TCP transport on loopback (or verbs, in the Soft-RoCE VM:
tests/bench/softroce_bench.py --qos).

  tests/bench/qos_bench.py [--quick] [--no-build] [--bazel-bin DIR] [--json-out FILE]
                           [--toml TEXT] [--transport tcp|verbs] [--size BYTES]

Builds the daemon and the Python client with --config=opt (unless
--no-build), starts two daemons (a connected to b) and runs, on a:
  - four background clients, each writing a 1 GiB SHM region (256 MiB with
    --quick) into its own region on b, in a loop;
  - a critical client that every 10 ms writes 64 blocks of 16 KiB (in a
    random order) to b and reads them back.
Phases, one after the other:
  1. the critical client alone, for half its time;
  2. the background, every write normal, in windows of 2 s that alternate
     between the background alone (its reference throughput) and the
     critical client beside it, everyone normal;
  3. the same with the background's writes bulk and the critical client
     critical;
  4. the critical client alone again, once the background has stopped: the
     other half of phase 1.
Alternating the windows (5 pairs, 2 with --quick), and taking the critical
client alone before and after, keep this shared host's drift out of the
ratios. Prints the critical writes' and reads' p50/p99 in each phase, their
p99 against alone's (phases 1 and 4; target with priorities: <= 2),
the same requests' time inside daemon a (submitted to finished, from its
history: the rest is the client's and the request rings'), and the
background's throughput beside the critical client against alone (target:
>= 0.9). The background's throughput is a's payload bytes sent
(Stats.bytes_sent) less the critical writes'. A benchmark, not a test: it
checks every byte moved (the stamps of the critical blocks after each
read, the blocks whole after each window, the background regions at the
end), never the speed.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import sys
import tempfile
import threading
import time
from typing import Any, Dict, List, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import GiB, KiB, MiB, table  # noqa: E402

BACKGROUND_CLIENTS = 4
BLOCKS = 64
BLOCK = 16 * KiB
PERIOD_S = 0.010
TARGET_P99_RATIO = 2.0
TARGET_THROUGHPUT_RATIO = 0.9
WINDOW_S = 2.0


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="256 MiB writes, shorter phases")
    p.add_argument("--no-build", action="store_true", help="use the existing --config=opt build")
    p.add_argument("--bazel-bin", help="bazel-bin of an optimized build (default: bazel info)")
    p.add_argument("--json-out", help="also write the summary line to this file")
    p.add_argument("--transport", choices=("tcp", "verbs"), default="tcp",
                   help="the daemons' transport (verbs: where an RDMA device is, the VM)")
    p.add_argument("--size", type=int, help="bytes of each background write (default 1 GiB, "
                                            "--quick 256 MiB)")
    p.add_argument("--toml", default="",
                   help="extra configuration for both daemons, e.g. "
                        "'[priorities]\\nlane_bytes = \"1MiB\"'")
    return p.parse_args()


class Background:
    """Four clients writing their region in a loop, in the class `priority`
    names; counts the writes started in each class."""

    def __init__(self, xferd: Any, target: str, size: int) -> None:
        self.size = size
        self.priority = "normal"
        self.stop = threading.Event()
        self.error: List[BaseException] = []
        self.started: Dict[Tuple[int, str], int] = {}
        self.lock = threading.Lock()
        self.clients = [xferd.Client(target) for _ in range(BACKGROUND_CLIENTS)]
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True)
                        for i in range(BACKGROUND_CLIENTS)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def _run(self, i: int) -> None:
        try:
            while not self.stop.is_set():
                priority = self.priority
                with self.lock:
                    self.started[(i, priority)] = self.started.get((i, priority), 0) + 1
                self.clients[i].write("bg_src", "b", f"bg_dst{i}", self.size,
                                      priority=priority).wait(600).raise_for_state()
        except BaseException as e:  # reported by the main thread
            self.error.append(e)

    def switch(self, priority: str) -> None:
        """From now on, writes of `priority`; returns once every client has
        started one (the last of the old class still finishes meanwhile)."""
        with self.lock:
            seen = {i: self.started.get((i, priority), 0) for i in range(BACKGROUND_CLIENTS)}
        self.priority = priority
        while any(self.started.get((i, priority), 0) == seen[i]
                  for i in range(BACKGROUND_CLIENTS)):
            self.check()
            time.sleep(0.05)

    def check(self) -> None:
        if self.error:
            raise SystemExit(f"a background write failed: {self.error[0]!r}")

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=600)
        for c in self.clients:
            c.close()


class Critical:
    """Every PERIOD_S: 64 blocks of 16 KiB written to b, then read back into
    another region. Each cycle first stamps its number into the first 8
    bytes of every source block and, once read back, checks the stamps: a
    write or read that moved nothing is caught at once. The whole 1 MiB is
    compared once the phase or window is over (finish): beside the
    background's copies that comparison took 1.4 ms of CPU, which the
    background would pay for every cycle. Only the stamps change between
    cycles."""

    def __init__(self, client: Any, src: Any, back: Any, seed: int) -> None:
        self.client = client
        rng = random.Random(seed)
        slots = list(range(BLOCKS * 4))
        rng.shuffle(slots)
        self.slots = np.array(slots[:BLOCKS])
        self.src_offsets = [int(s) * BLOCK for s in self.slots]
        self.dst_offsets = [k * BLOCK for k in range(BLOCKS)]
        self.src_blocks = np.frombuffer(src.buffer, dtype=np.uint8).reshape(-1, BLOCK)
        self.back_blocks = np.frombuffer(back.buffer, dtype=np.uint8).reshape(BLOCKS, BLOCK)
        self.cycle = 0

    def run(self, seconds: float, priority: str) -> Dict[str, List[Any]]:
        """The latencies (us) over `seconds`, "write" and "read" as the
        client saw them, and the transfers' ids ("write_ids", "read_ids"),
        which finish() needs."""
        lat: Dict[str, List[Any]] = {"write": [], "read": [], "write_ids": [], "read_ids": []}
        end = time.monotonic() + seconds
        next_at = time.monotonic()
        while time.monotonic() < end:
            now = time.monotonic()
            if now < next_at:
                time.sleep(next_at - now)
            next_at += PERIOD_S
            self.stamp()
            start = time.perf_counter()
            w = self.client.write_blocks("crit_src", "b", "crit_dst", self.src_offsets,
                                         self.dst_offsets, block_length=BLOCK,
                                         priority=priority).wait(60).raise_for_state()
            middle = time.perf_counter()
            r = self.client.read_blocks("b", "crit_dst", "crit_back", self.dst_offsets,
                                        self.dst_offsets, block_length=BLOCK,
                                        priority=priority).wait(60).raise_for_state()
            done = time.perf_counter()
            lat["write"].append((middle - start) * 1e6)
            lat["read"].append((done - middle) * 1e6)
            lat["write_ids"].append(w.id)
            lat["read_ids"].append(r.id)
            self.check_stamps()
        return lat

    def finish(self, lat: Dict[str, List[Any]]) -> None:
        """After run(), outside the time measured: compares the last cycle's
        blocks whole, and adds "write_daemon" and "read_daemon" to `lat`,
        its transfers' time inside daemon a (submitted to finished, us), from
        its history (newest first: the background's writes are among them)."""
        self.check()
        ids = lat["write_ids"] + lat["read_ids"]
        times: Dict[int, float] = {}
        for t in self.client.transfers(include_finished=True, limit=len(ids) + 1000):
            if t.submitted_at and t.finished_at:
                times[t.id] = (t.finished_at - t.submitted_at).total_seconds() * 1e6
        for op in ("write", "read"):
            lat[f"{op}_daemon"] = [times[i] for i in lat[f"{op}_ids"] if i in times]

    def stamp(self) -> None:
        """Writes this cycle's number into the first 8 bytes of every
        source block."""
        self.cycle += 1
        self.src_blocks[self.slots, :8] = np.frombuffer(
            self.cycle.to_bytes(8, "little"), dtype=np.uint8)

    def check_stamps(self) -> None:
        stamps = self.back_blocks[:, :8].copy().view(np.uint64).ravel()
        if not np.all(stamps == self.cycle):
            bad = int(np.argmax(stamps != self.cycle))
            raise SystemExit(f"critical block {bad} of cycle {self.cycle}: read back holds "
                             f"cycle {int(stamps[bad])}'s bytes")

    def check(self) -> None:
        if not np.array_equal(self.back_blocks, self.src_blocks[self.slots]):
            bad = int(np.argmax(np.any(self.back_blocks != self.src_blocks[self.slots], axis=1)))
            raise SystemExit(f"critical block {bad} of cycle {self.cycle}: read back differs "
                             "from what was written")


def percentiles(samples: List[float]) -> Dict[str, float]:
    ordered = sorted(samples)
    return {"n": len(ordered), "p50_us": benchlib.percentile(ordered, 50),
            "p99_us": benchlib.percentile(ordered, 99)}


def background_window(ca: Any, seconds: float, critical: Any = None,
                      priority: str = "normal") -> Tuple[int, float, Dict[str, Any]]:
    """a's payload bytes sent over about `seconds` and the time it took,
    less the critical client's writes when it runs (then also its
    latencies)."""
    before = ca.stats().bytes_sent
    start = time.monotonic()
    lat: Dict[str, Any] = {}
    if critical is None:
        time.sleep(seconds)
    else:
        lat = critical.run(seconds, priority)
    elapsed = time.monotonic() - start
    sent = ca.stats().bytes_sent - before - len(lat.get("write", [])) * BLOCKS * BLOCK
    if critical is not None:
        critical.finish(lat)
    return sent, elapsed, lat


def background_beside(ca: Any, critical: Any, priority: str,
                      pairs: int) -> Tuple[float, float, Dict[str, List[Any]]]:
    """The background's GB/s alone and beside the critical client (in
    `priority`), over `pairs` pairs of alternating windows, and the critical
    client's latencies."""
    sent = {False: 0, True: 0}
    took = {False: 0.0, True: 0.0}
    lat: Dict[str, List[Any]] = {}
    for _ in range(pairs):
        for beside in (False, True):
            n, elapsed, window = background_window(ca, WINDOW_S, critical if beside else None,
                                                   priority)
            sent[beside] += n
            took[beside] += elapsed
            for key, values in window.items():
                lat.setdefault(key, []).extend(values)
    return sent[False] / took[False] / 1e9, sent[True] / took[True] / 1e9, lat


def sha(view: Any) -> str:
    return hashlib.sha256(view).hexdigest()


def main() -> None:
    args = parse_args()
    bins = benchlib.build(args.no_build, args.bazel_bin)
    bins.import_client()
    import xferd
    size = args.size or (256 * MiB if args.quick else GiB)
    phase_s = 4.0 if args.quick else 10.0
    pairs = 2 if args.quick else 5
    children = benchlib.Children()
    workdir = tempfile.mkdtemp(prefix="qos-bench-")
    children.dirs.append(workdir)
    background = None
    try:
        toml = args.toml.replace("\\n", "\n")
        a = benchlib.start_daemon(children, bins.xferd, workdir, "a", args.transport, toml=toml)
        b = benchlib.start_daemon(children, bins.xferd, workdir, "b", args.transport, toml=toml)
        ca, cb = xferd.Client(a.target), xferd.Client(b.target)
        ca.connect_peer(b.address)
        src = ca.register_region("bg_src", size, backing="shm")
        np.frombuffer(src.buffer, dtype=np.uint8)[:] = np.random.default_rng(1).integers(
            0, 256, size, dtype=np.uint8)
        dsts = [cb.register_region(f"bg_dst{i}", size, backing="shm", remote_write=True)
                for i in range(BACKGROUND_CLIENTS)]
        crit_src = ca.register_region("crit_src", 4 * BLOCKS * BLOCK, backing="shm")
        crit_src.buffer[:] = random.Random(2).randbytes(4 * BLOCKS * BLOCK)
        cb.register_region("crit_dst", BLOCKS * BLOCK, backing="shm", remote_write=True,
                           remote_read=True)
        crit_back = ca.register_region("crit_back", BLOCKS * BLOCK, backing="shm")
        critical = Critical(ca, crit_src, crit_back, 3)
        critical.run(1.0, "normal")  # warm: connections, keys, page faults
        benchlib.log(f"phase 1: the critical client alone, {phase_s / 2:.0f} s")
        alone = critical.run(phase_s / 2, "critical")
        critical.finish(alone)

        background = Background(xferd, a.target, size)
        background.start()
        background.switch("normal")
        benchlib.log(f"phase 2: the background (normal) alone and beside the critical client "
                     f"(normal), {pairs} x {2 * WINDOW_S:.0f} s")
        ref_normal, mixed_normal, lat_normal = background_beside(ca, critical, "normal", pairs)
        background.switch("bulk")
        benchlib.log(f"phase 3: the background (bulk) alone and beside the critical client "
                     f"(critical), {pairs} x {2 * WINDOW_S:.0f} s")
        ref_bulk, mixed_bulk, lat_prio = background_beside(ca, critical, "critical", pairs)
        background.check()
        background.close()
        background = None
        benchlib.log(f"phase 4: the critical client alone again, {phase_s / 2:.0f} s")
        again = critical.run(phase_s / 2, "critical")
        critical.finish(again)
        for key, values in again.items():
            alone[key].extend(values)
        want = sha(src.buffer)
        for i, d in enumerate(dsts):
            if sha(d.buffer) != want:
                raise SystemExit(f"bg_dst{i} differs from bg_src after the run")

        figures: Dict[str, Any] = {"bytes_per_background_write": size, "phase_s": phase_s,
                                   "window_pairs": pairs, "window_s": WINDOW_S, "toml": toml,
                                   "transport": args.transport}
        rows = []
        for op in ("write", "read"):
            base = percentiles(alone[op])
            for name, lat in (("alone", alone), ("under load, all normal", lat_normal),
                              ("under load, critical over bulk", lat_prio)):
                p = percentiles(lat[op])
                inside = percentiles(lat[f"{op}_daemon"])
                ratio = p["p99_us"] / base["p99_us"]
                figures[f"{op}_{name.split(',')[-1].strip().replace(' ', '_')}"] = dict(
                    p, p99_ratio=ratio, daemon_p50_us=inside["p50_us"],
                    daemon_p99_us=inside["p99_us"])
                verdict = (benchlib.verdict(ratio, TARGET_P99_RATIO, higher_is_better=False)
                           if "critical over" in name else "")
                rows.append([f"critical {op}, {name}", p["n"], f"{p['p50_us']:.0f}",
                             f"{p['p99_us']:.0f}", f"{ratio:.2f}", verdict,
                             f"{inside['p50_us']:.0f}", f"{inside['p99_us']:.0f}"])
        print(table(["64 x 16 KiB", "requests", "p50 us", "p99 us", "p99 / alone", "target <= 2",
                     "in daemon a: p50 us", "p99 us"], rows))
        print()
        t_rows = []
        for name, ref, mixed in (("all normal", ref_normal, mixed_normal),
                                 ("bulk, critical beside", ref_bulk, mixed_bulk)):
            ratio = mixed / ref
            figures[f"background_{name.split(',')[0].replace(' ', '_')}"] = {
                "alone_gbps": ref, "beside_critical_gbps": mixed, "ratio": ratio}
            t_rows.append([f"background, {name}", f"{ref:.2f}", f"{mixed:.2f}", f"{ratio:.2f}",
                           benchlib.verdict(ratio, TARGET_THROUGHPUT_RATIO)
                           if "critical" in name else ""])
        print(table(["", "alone GB/s", "beside the critical client GB/s", "ratio",
                     "target >= 0.9"], t_rows))
        print(f"load average: {benchlib.load_average()}")
        benchlib.emit_summary(figures, args.json_out)
        ca.close()
        cb.close()
    finally:
        if background is not None:
            background.close()
        children.stop_all()


if __name__ == "__main__":
    main()
