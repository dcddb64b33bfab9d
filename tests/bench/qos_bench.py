#!/usr/bin/python3
"""qos_bench: a critical client's latency beside bulk writes, by priority,
over xferd's TCP transport on loopback (or verbs, in the Soft-RoCE VM:
tests/bench/softroce_bench.py --qos).

  tests/bench/qos_bench.py [--quick] [--no-build] [--bazel-bin DIR] [--json-out FILE]
                           [--toml TEXT] [--transport tcp|verbs] [--size BYTES]
                           [--critical-fifo]

Builds the daemon and the Python client with --config=opt (unless
--no-build), starts two daemons (a connected to b) and runs, on a:
  - four background clients, each writing a 1 GiB SHM region (256 MiB with
    --quick) into its own region on b, in a loop;
  - a critical client that every 10 ms writes 64 blocks of 16 KiB (in a
    random order) to b and reads them back.
Phases, one after the other:
  1. the critical client alone, for half its time;
  2. the reference: loopback_load.py streaming over loopback TCP (two
     sender/receiver process pairs: as many busy threads as the daemons'
     pollers, the same kernel paths, no daemon work), in windows of 2 s
     that alternate between the load alone and the critical client
     (critical) beside it. The daemons then have nothing to arbitrate:
     what the load costs the critical client, and what the critical
     client costs the load, are this host's CPU scheduling, the floor
     under the two targets below;
  3. the background, every write normal, in alternating windows as in 2:
     the background alone (its reference throughput) and the critical
     client beside it, everyone normal;
  4. the same with the background's writes bulk and the critical client
     critical;
  5. the critical client alone again, once the background has stopped: the
     other half of phase 1.
Alternating the windows (5 pairs, 2 with --quick), and taking the critical
client alone before and after, keep this shared host's drift out of the
ratios. Prints the critical writes' and reads' p50/p99 in each phase, their
p99 against alone's (phases 1 and 5; target with priorities: <= 2), each
request's time split in three from daemon a's history (until a took it,
inside a, back to the client: the host's wall clock on both sides), and
the background's throughput beside the critical client against alone
(target: >= 0.9), and the reference load's. The background's throughput
is a's payload bytes sent (Stats.bytes_sent) less the critical writes'. A
benchmark, not a test: it checks every byte moved through the daemons (the
stamps of the critical blocks after each read, the blocks whole after each
window, the background regions at the end), never the speed.
"""

from __future__ import annotations

import argparse
import hashlib
import mmap
import os
import random
import struct
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Dict, List, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import GiB, KiB, MiB, table  # noqa: E402

BACKGROUND_CLIENTS = 4
BLOCKS = 64
BLOCK = 16 * KiB
PERIOD_S = 0.010
# Four busy processes, as many busy threads as the two daemons' pollers at
# the default engine.pollers = 2.
REFERENCE_PAIRS = 2
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
    p.add_argument("--critical-fifo", action="store_true",
                   help="run the critical client's thread at real-time priority (SCHED_FIFO "
                        "1; needs root or CAP_SYS_NICE): how much of its time under load is "
                        "waiting for a core. A diagnostic: beside the reference load the "
                        "thread's spinning keeps the daemons' pollers off its core, and its "
                        "requests stall for up to a second")
    p.add_argument("--toml", default="", type=benchlib.toml_text,
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
        self.written = 0  # payload bytes of its writes so far

    def run(self, seconds: float, priority: str) -> Dict[str, List[Any]]:
        """The latencies (us) over `seconds`, "write" and "read" as the
        client saw them, and the transfers' ids ("write_ids", "read_ids"),
        which finish() needs."""
        lat: Dict[str, List[Any]] = {"write": [], "read": [], "write_ids": [], "read_ids": [],
                                     "write_wall": [], "read_wall": []}
        end = time.monotonic() + seconds
        next_at = time.monotonic()
        while time.monotonic() < end:
            now = time.monotonic()
            if now < next_at:
                time.sleep(next_at - now)
            next_at += PERIOD_S
            self.stamp()
            start, start_wall = time.perf_counter(), time.time()
            w = self.client.write_blocks("crit_src", "b", "crit_dst", self.src_offsets,
                                         self.dst_offsets, block_length=BLOCK,
                                         priority=priority).wait(60).raise_for_state()
            middle, middle_wall = time.perf_counter(), time.time()
            r = self.client.read_blocks("b", "crit_dst", "crit_back", self.dst_offsets,
                                        self.dst_offsets, block_length=BLOCK,
                                        priority=priority).wait(60).raise_for_state()
            done, done_wall = time.perf_counter(), time.time()
            lat["write"].append((middle - start) * 1e6)
            lat["read"].append((done - middle) * 1e6)
            lat["write_ids"].append(w.id)
            self.written += BLOCKS * BLOCK
            lat["read_ids"].append(r.id)
            lat["write_wall"].append((start_wall, middle_wall))
            lat["read_wall"].append((middle_wall, done_wall))
            self.check_stamps()
        return lat

    def finish(self, lat: Dict[str, List[Any]]) -> None:
        """After run(), outside the time measured: compares the last cycle's
        blocks whole, and splits each request's time (us) in three from
        daemon a's history (newest first: the background's writes are among
        them): "<op>_before", from the call until a took it (the client's
        submission and a's poller picking it up); "<op>_daemon", inside a
        (submitted to finished); "<op>_after", from then until the client's
        call returned (the completion's way back, the client thread's
        wake-up). Both clocks are the host's wall clock."""
        self.check()
        ids = lat["write_ids"] + lat["read_ids"]
        times: Dict[int, Tuple[float, float]] = {}
        for t in self.client.transfers(include_finished=True, limit=len(ids) + 1000):
            if t.submitted_at and t.finished_at:
                times[t.id] = (t.submitted_at.timestamp(), t.finished_at.timestamp())
        for op in ("write", "read"):
            split = [(times[i], wall) for i, wall in zip(lat[f"{op}_ids"], lat[f"{op}_wall"])
                     if i in times]
            lat[f"{op}_before"] = [(sub - start) * 1e6 for (sub, _), (start, _) in split]
            lat[f"{op}_daemon"] = [(fin - sub) * 1e6 for (sub, fin), _ in split]
            lat[f"{op}_after"] = [(end - fin) * 1e6 for (_, fin), (_, end) in split]

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


class ReferenceLoad:
    """loopback_load.py: REFERENCE_PAIRS sender/receiver process pairs
    streaming over loopback TCP, the kernel paths of the daemons' TCP lanes
    with no daemon work. Beside it the daemons' scheduling has nothing to
    arbitrate: what it costs the critical client, and what the critical
    client costs it, are this host's, not the daemon's."""

    def __init__(self, children: Any, workdir: str) -> None:
        path = os.path.join(workdir, "reference-load-counters")
        self.proc = children.start([benchlib.PYTHON, os.path.join(os.path.dirname(
            os.path.abspath(__file__)), "loopback_load.py"), str(REFERENCE_PAIRS), path])
        deadline = time.monotonic() + 30
        while not os.path.exists(path) or os.path.getsize(path) < 8 * REFERENCE_PAIRS:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise SystemExit("loopback_load.py did not start")
            time.sleep(0.05)
        fd = os.open(path, os.O_RDONLY)
        self.counters = mmap.mmap(fd, 8 * REFERENCE_PAIRS, prot=mmap.PROT_READ)
        os.close(fd)
        while min(self._slots()) == 0:  # every pair streaming
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise SystemExit("loopback_load.py did not start streaming")
            time.sleep(0.05)

    def _slots(self) -> List[int]:
        return [struct.unpack_from("<Q", self.counters, 8 * i)[0] for i in range(REFERENCE_PAIRS)]

    def received(self) -> int:
        return sum(self._slots())

    def stop(self) -> None:
        benchlib.stop_process(self.proc)
        self.counters.close()


def percentiles(samples: List[float]) -> Dict[str, float]:
    ordered = sorted(samples)
    return {"n": len(ordered), "p50_us": benchlib.percentile(ordered, 50),
            "p99_us": benchlib.percentile(ordered, 99)}


def background_window(load_bytes: Callable[[], int], seconds: float, critical: Any = None,
                      priority: str = "normal") -> Tuple[int, float, Dict[str, Any]]:
    """The load's bytes (`load_bytes()`, a running count) over about
    `seconds` and the time it took; with `critical`, the critical client
    runs meanwhile and its latencies come too."""
    before = load_bytes()
    start = time.monotonic()
    lat: Dict[str, Any] = {}
    if critical is None:
        time.sleep(seconds)
    else:
        lat = critical.run(seconds, priority)
    elapsed = time.monotonic() - start
    sent = load_bytes() - before
    if critical is not None:
        critical.finish(lat)
    return sent, elapsed, lat


def background_beside(load_bytes: Callable[[], int], critical: Any, priority: str,
                      pairs: int) -> Tuple[float, float, Dict[str, List[Any]]]:
    """The load's GB/s alone and beside the critical client (in `priority`),
    over `pairs` pairs of alternating windows, and the critical client's
    latencies."""
    sent = {False: 0, True: 0}
    took = {False: 0.0, True: 0.0}
    lat: Dict[str, List[Any]] = {}
    for _ in range(pairs):
        for beside in (False, True):
            n, elapsed, window = background_window(load_bytes, WINDOW_S,
                                                   critical if beside else None, priority)
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
        a = benchlib.start_daemon(children, bins.xferd, workdir, "a", args.transport,
                                  toml=args.toml)
        b = benchlib.start_daemon(children, bins.xferd, workdir, "b", args.transport,
                                  toml=args.toml)
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
        if args.critical_fifo:  # this thread runs the critical client
            os.sched_setscheduler(threading.get_native_id(), os.SCHED_FIFO, os.sched_param(1))
        critical.run(1.0, "normal")  # warm: connections, keys, page faults
        benchlib.log(f"phase 1: the critical client alone, {phase_s / 2:.0f} s")
        alone = critical.run(phase_s / 2, "critical")
        critical.finish(alone)

        benchlib.log(f"phase 2: the reference load alone and beside the critical client "
                     f"(critical), {pairs} x {2 * WINDOW_S:.0f} s")
        reference = ReferenceLoad(children, workdir)
        ref_load, mixed_load, lat_ref = background_beside(reference.received, critical,
                                                          "critical", pairs)
        reference.stop()

        background = Background(xferd, a.target, size)
        background.start()

        def background_bytes() -> int:
            """a's payload bytes sent so far, less the critical client's."""
            return int(ca.stats().bytes_sent) - critical.written

        background.switch("normal")
        benchlib.log(f"phase 3: the background (normal) alone and beside the critical client "
                     f"(normal), {pairs} x {2 * WINDOW_S:.0f} s")
        ref_normal, mixed_normal, lat_normal = background_beside(background_bytes, critical,
                                                                 "normal", pairs)
        background.switch("bulk")
        benchlib.log(f"phase 4: the background (bulk) alone and beside the critical client "
                     f"(critical), {pairs} x {2 * WINDOW_S:.0f} s")
        ref_bulk, mixed_bulk, lat_prio = background_beside(background_bytes, critical,
                                                           "critical", pairs)
        background.check()
        background.close()
        background = None
        benchlib.log(f"phase 5: the critical client alone again, {phase_s / 2:.0f} s")
        again = critical.run(phase_s / 2, "critical")
        critical.finish(again)
        for key, values in again.items():
            alone[key].extend(values)
        want = sha(src.buffer)
        for i, d in enumerate(dsts):
            if sha(d.buffer) != want:
                raise SystemExit(f"bg_dst{i} differs from bg_src after the run")

        figures: Dict[str, Any] = {"bytes_per_background_write": size, "phase_s": phase_s,
                                   "window_pairs": pairs, "window_s": WINDOW_S, "toml": args.toml,
                                   "critical_fifo": args.critical_fifo,
                                   "transport": args.transport}
        rows = []
        for op in ("write", "read"):
            base = percentiles(alone[op])
            for key, name, lat in (
                    ("alone", "alone", alone),
                    ("beside_reference", "beside the reference load", lat_ref),
                    ("all_normal", "under load, all normal", lat_normal),
                    ("critical_over_bulk", "under load, critical over bulk", lat_prio)):
                p = percentiles(lat[op])
                split = {part: percentiles(lat[f"{op}_{part}"])
                         for part in ("before", "daemon", "after")}
                ratio = p["p99_us"] / base["p99_us"]
                figures[f"{op}_{key}"] = dict(
                    p, p99_ratio=ratio,
                    **{f"{part}_{q}": split[part][q] for part in split
                       for q in ("p50_us", "p99_us")})
                verdict = (benchlib.verdict(ratio, TARGET_P99_RATIO, higher_is_better=False)
                           if key == "critical_over_bulk" else "")
                rows.append([f"critical {op}, {name}", p["n"], f"{p['p50_us']:.0f}",
                             f"{p['p99_us']:.0f}", f"{ratio:.2f}", verdict] +
                            [f"{split[part][q]:.0f}" for part in split
                             for q in ("p50_us", "p99_us")])
        print(table(["64 x 16 KiB", "requests", "p50 us", "p99 us", "p99 / alone", "target <= 2",
                     "until a took it: p50", "p99", "in daemon a: p50", "p99",
                     "back to the client: p50", "p99"], rows))
        print()
        t_rows = []
        for key, name, ref, mixed in (
                ("reference_load", "reference load (no daemon work)", ref_load, mixed_load),
                ("background_all_normal", "background, all normal", ref_normal, mixed_normal),
                ("background_bulk", "background, bulk, critical beside", ref_bulk, mixed_bulk)):
            ratio = mixed / ref
            figures[key] = {"alone_gbps": ref, "beside_critical_gbps": mixed, "ratio": ratio}
            t_rows.append([name, f"{ref:.2f}", f"{mixed:.2f}", f"{ratio:.2f}",
                           benchlib.verdict(ratio, TARGET_THROUGHPUT_RATIO)
                           if key == "background_bulk" else ""])
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
