#!/usr/bin/python3
"""integrity_bench: what verifying transfers end to end costs
(docs/integrity.md), over xferd's TCP transport on loopback (or verbs, in
the Soft-RoCE VM: tests/bench/softroce_bench.py --integrity).

  tests/bench/integrity_bench.py [--quick] [--no-build] [--bazel-bin DIR] [--json-out FILE]
                                 [--reps N] [--size BYTES] [--transport tcp|verbs]

Builds the daemon and the Python client with --config=opt (unless
--no-build), starts daemons a and b (their defaults), a connected to b, and
times the same transfers with and without verify, interleaved round by
round so that a change of host load falls on both alike:
  - bulk: one range of --size bytes (default 256 MiB) at 1 MiB slices,
    written a -> b and read back b -> a;
  - 4 KiB blocks: --size bytes as 4 KiB blocks scattered over the
    destination (one many-block transfer), written and read back.
Each figure is the median over --reps rounds (default 5) of the rate of
four such transfers in flight at once, and the CPU seconds both daemons
spent per GiB moved (from /proc: what verification adds on either side).
Targets: verified over unverified >= 0.85 (bulk) and >= 0.7 (4 KiB
blocks). A benchmark, not a test: it checks every destination's bytes
against its source, never the speed.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import GiB, MiB, table  # noqa: E402

IN_FLIGHT = 4
TARGETS = {"bulk": 0.85, "4 KiB blocks": 0.7}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="2 rounds of 64 MiB")
    p.add_argument("--no-build", action="store_true", help="use the existing --config=opt build")
    p.add_argument("--bazel-bin", help="bazel-bin of an optimized build (default: bazel info)")
    p.add_argument("--json-out", help="also write the summary line to this file")
    p.add_argument("--reps", type=int, default=5, help="rounds (default 5)")
    p.add_argument("--size", type=int, default=256 * MiB, help="bytes per transfer")
    p.add_argument("--transport", choices=("tcp", "verbs"), default="tcp",
                   help="verbs: in the Soft-RoCE VM (softroce_bench.py --integrity)")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    if args.quick:
        args.reps, args.size = 2, 64 * MiB
    bins = benchlib.build(args.no_build, args.bazel_bin)
    bins.import_client()
    import numpy as np
    children = benchlib.Children()
    workdir = tempfile.mkdtemp(prefix="integrity-bench-")
    children.dirs.append(workdir)
    try:
        a, b, ca, cb = benchlib.start_pair(children, bins, workdir, args.transport)
        size = args.size
        srcs, dsts, backs = [], [], []
        for i in range(IN_FLIGHT):
            src = ca.register_region(f"src{i}", size, backing="shm")
            src.buffer[:] = np.random.default_rng(i).integers(0, 256, size, np.uint8).tobytes()
            srcs.append(src)
            dsts.append(cb.register_region(f"dst{i}", size, backing="shm", remote_write=True,
                                           remote_read=True))
            backs.append(ca.register_region(f"back{i}", size, backing="shm",
                                            remote_write=True))
        blocks = size // 4096
        linear = np.arange(blocks, dtype=np.uint64) * 4096
        scattered = np.random.default_rng(7).permutation(blocks).astype(np.uint64) * 4096

        def transfers(form: str, direction: str, verify: bool) -> List[Callable[[], Any]]:
            def one(i: int) -> Callable[[], Any]:
                if form == "bulk" and direction == "write":
                    return lambda: ca.write(f"src{i}", "b", f"dst{i}", size, slice_size=MiB,
                                            verify=verify)
                if form == "bulk":
                    return lambda: ca.read("b", f"dst{i}", f"back{i}", size, slice_size=MiB,
                                           verify=verify)
                if direction == "write":
                    return lambda: ca.write_blocks(f"src{i}", "b", f"dst{i}", linear, scattered,
                                                   block_length=4096, verify=verify)
                return lambda: ca.read_blocks("b", f"dst{i}", f"back{i}", scattered, linear,
                                              block_length=4096, verify=verify)
            return [one(i) for i in range(IN_FLIGHT)]

        def run(key: Tuple[str, str, bool]) -> Tuple[float, float]:
            """GB/s of IN_FLIGHT transfers at once, and daemon CPU s per GiB."""
            cpu0 = benchlib.cpu_seconds(a.pid) + benchlib.cpu_seconds(b.pid)
            t0 = time.monotonic()
            handles = [start() for start in transfers(*key)]
            for h in handles:
                h.wait(600)
            elapsed = time.monotonic() - t0
            cpu = benchlib.cpu_seconds(a.pid) + benchlib.cpu_seconds(b.pid) - cpu0
            moved = IN_FLIGHT * size
            return moved / elapsed / 1e9, cpu / (moved / GiB)

        keys = [(form, direction, verify) for form in ("bulk", "4 KiB blocks")
                for direction in ("write", "read") for verify in (False, True)]
        rates: Dict[Any, List[float]] = {k: [] for k in keys}
        cpus: Dict[Any, List[float]] = {k: [] for k in keys}
        for rep in range(args.reps):
            for k in keys:
                rate, cpu = run(k)
                rates[k].append(rate)
                cpus[k].append(cpu)
            benchlib.log(f"round {rep + 1}/{args.reps}: " + ", ".join(
                f"{f} {d}{' verified' if v else ''} {rates[(f, d, v)][-1]:.2f} GB/s"
                for f, d, v in keys))
        # Every destination holds its source (the last round wrote, then read back).
        for i in range(IN_FLIGHT):
            want = hashlib.sha256(srcs[i].buffer).hexdigest()
            if hashlib.sha256(backs[i].buffer).hexdigest() != want:
                raise SystemExit(f"back{i} differs from src{i} after the run")

        rows, summary = [], {}
        for form in ("bulk", "4 KiB blocks"):
            for direction in ("write", "read"):
                plain = statistics.median(rates[(form, direction, False)])
                checked = statistics.median(rates[(form, direction, True)])
                ratio = checked / plain
                rows.append([f"{form}, {direction}", f"{plain:.2f}", f"{checked:.2f}",
                             f"{ratio:.2f}", f"{TARGETS[form]:.2f}",
                             benchlib.verdict(ratio, TARGETS[form]),
                             f"{statistics.median(cpus[(form, direction, False)]):.2f}",
                             f"{statistics.median(cpus[(form, direction, True)]):.2f}"])
                summary[f"{form.replace(' ', '_')}_{direction}_ratio"] = round(ratio, 3)
        print(table(["", "GB/s plain", "GB/s verified", "ratio", "target", "", "CPU s/GiB plain",
                     "CPU s/GiB verified"], rows))
        print(f"{args.transport}; load average {benchlib.load_average()}; {IN_FLIGHT} "
              f"transfers of {benchlib.size_name(size)} in flight, median of {args.reps} rounds")
        benchlib.emit_summary(summary, args.json_out)
    finally:
        children.stop_all()


if __name__ == "__main__":
    main()
