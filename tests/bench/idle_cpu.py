#!/usr/bin/python3
"""CPU an idle xferd uses, per thread.

Starts one daemon on loopback (or two, connected, with --peer), lets it settle,
then samples every thread of the daemon from /proc/<pid>/task/<tid>/ at the
start and the end of a window (60 s by default) and prints, per thread:
user+system time from `stat` (clock ticks) as a share of one core, the run
time the scheduler accounted in `schedstat` (nanoseconds: finer than ticks)
and how often it was switched out voluntarily per second (its wakeups). An idle
daemon should use at most 0.1% of a core in total and wake no thread
periodically. With --rings N, N local clients hold request rings open
(docs/local-rings.md) through the window: idle rings must cost nothing
either. Prints figures; asserts nothing.

  tests/bench/idle_cpu.py                       # bazel-bin/daemon/xferd, 60 s
  tests/bench/idle_cpu.py --xferd PATH --seconds 30 --peer --rings 16
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Any, Dict, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")

# tid -> (name, stat ticks, schedstat ns or -1, voluntary context switches)
Sample = Dict[int, Tuple[str, int, int, int]]


def sample_threads(pid: int) -> Sample:
    threads: Sample = {}
    for entry in os.listdir(f"/proc/{pid}/task"):
        base = f"/proc/{pid}/task/{entry}"
        try:
            with open(f"{base}/stat") as f:
                head, _, rest = f.read().rpartition(")")
            fields = rest.split()
            name = head.partition("(")[2]
            ticks = int(fields[11]) + int(fields[12])  # utime + stime
            run_ns = -1
            if os.path.exists(f"{base}/schedstat"):
                with open(f"{base}/schedstat") as f:
                    run_ns = int(f.read().split()[0])
            switches = 0
            with open(f"{base}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        switches = int(line.split()[1])
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread ended between listing and reading
        threads[int(entry)] = (name, ticks, run_ns, switches)
    return threads


def report(before: Sample, after: Sample, seconds: float) -> List[List[str]]:
    rows = []
    total_ticks = total_ns = 0
    for tid in sorted(after):
        name, ticks, run_ns, switches = after[tid]
        _, ticks0, run_ns0, switches0 = before.get(tid, (name, 0, 0, 0))
        d_ticks, d_ns = ticks - ticks0, (run_ns - run_ns0 if run_ns >= 0 else -1)
        total_ticks += d_ticks
        total_ns += max(d_ns, 0)
        rows.append([name, str(tid), f"{100.0 * d_ticks / TICK / seconds:.3f}",
                     f"{100.0 * d_ns / 1e9 / seconds:.4f}" if d_ns >= 0 else "-",
                     f"{(switches - switches0) / seconds:.1f}"])
    rows.append(["total", "", f"{100.0 * total_ticks / TICK / seconds:.3f}",
                 f"{100.0 * total_ns / 1e9 / seconds:.4f}", ""])
    return rows


def open_rings(target: str, count: int, python_zip: str) -> List[Any]:
    """`count` request-ring sessions on the daemon at `target` (unix:), each
    with its rings mapped, as local clients that went quiet hold them."""
    if count == 0:
        return []
    sys.path.insert(0, python_zip)
    from xferd.rings import LocalRings
    return [LocalRings(target[len("unix:"):] + ".local", client_name=f"idle-{i}")
            for i in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--xferd", default=os.path.join(benchlib.REPO, "bazel-bin/daemon/xferd"))
    parser.add_argument("--seconds", type=float, default=60.0, help="measurement window")
    parser.add_argument("--settle", type=float, default=3.0, help="wait after start-up")
    parser.add_argument("--peer", action="store_true",
                        help="start a second daemon and connect the first to it (idle lanes)")
    parser.add_argument("--xferctl",
                        default=os.path.join(benchlib.REPO, "bazel-bin/client/cpp/xferctl"),
                        help="used by --peer")
    parser.add_argument("--rings", type=int, default=0,
                        help="local clients holding request rings open while idle")
    parser.add_argument("--python-zip",
                        default=os.path.join(benchlib.REPO, "bazel-bin/client/python/xferd.zip"),
                        help="the Python client, used by --rings")
    args = parser.parse_args()
    if not os.path.exists(args.xferd):
        raise SystemExit(f"missing {args.xferd}: bazel build //daemon:xferd")

    children = benchlib.Children()
    workdir = tempfile.mkdtemp(prefix="xferd-idle-")
    children.dirs.append(workdir)
    try:
        daemon = benchlib.start_daemon(children, args.xferd, workdir, "idle", "tcp")
        if args.peer:
            other = benchlib.start_daemon(children, args.xferd, workdir, "other", "tcp")
            benchlib.run_json([args.xferctl, "--target", daemon.target, "--json", "peers",
                               "connect", other.address])
        sessions = open_rings(daemon.target, args.rings, args.python_zip)
        time.sleep(args.settle)
        benchlib.log(f"sampling xferd pid {daemon.pid} for {args.seconds:.0f} s")
        before = sample_threads(daemon.pid)
        start = time.monotonic()
        time.sleep(args.seconds)
        after = sample_threads(daemon.pid)
        elapsed = time.monotonic() - start
        for rings in sessions:
            rings.close()
        print(f"idle xferd ({args.xferd}), {len(sessions)} idle ring sessions, "
              f"{elapsed:.1f} s, {TICK} ticks/s; "
              f"target: total <= 0.1% of a core")
        print(benchlib.table(["thread", "tid", "stat %core", "schedstat %core", "wakeups/s"],
                             report(before, after, elapsed)))
    finally:
        children.stop_all()


if __name__ == "__main__":
    main()
