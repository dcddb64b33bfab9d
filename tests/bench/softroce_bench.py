#!/usr/bin/python3
"""softroce_bench.py: xferd's verbs transport on Soft-RoCE beside perftest, all in
ONE VM boot.

  tests/bench/softroce_bench.py [--quick] [--no-build] [-t SECONDS]

Builds the daemon, the Python client zip and bench_client with --config=opt,
then boots the Soft-RoCE VM once (tests/softroce/vm_run.sh) and runs
tests/bench/softroce_guest.py there: ib_write_bw (64 KiB and 1 MiB messages)
and ib_write_lat (4 KiB) on rxe0, then two xferd daemons with --transport
verbs --require-rdma: 64 MiB writes at 64 KiB and 1 MiB slices, one
checksummed write, and the latency of a 4 KiB write. The guest's report (a
table, then one JSON line) streams to stdout; the JSON line is also left in
the file --json-out names. Exit status: the guest's (125: the VM failed).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="short run: fewer, smaller runs")
    p.add_argument("--no-build", action="store_true", help="use the existing --config=opt build")
    p.add_argument("--bazel-bin", help="bazel-bin of an optimized build (default: bazel info)")
    p.add_argument("--reps", type=int, help="rounds of ib_write_bw + xferd (default 5, quick 2)")
    p.add_argument("-t", "--timeout", type=int, default=900, help="VM timeout, boot included")
    p.add_argument("--json-out", help="also write the JSON summary line to this file")
    args = p.parse_args()
    bins = benchlib.build(args.no_build, args.bazel_bin)
    with tempfile.TemporaryDirectory(prefix="softroce-bench-") as results:
        guest = [benchlib.PYTHON, "tests/bench/softroce_guest.py", "--bazel-bin", bins.bazel_bin,
                 "--json-out", os.path.join(results, "summary.json")]
        if args.quick:
            guest.append("--quick")
        if args.reps:
            guest += ["--reps", str(args.reps)]
        cmd = [os.path.join(benchlib.REPO, "tests", "softroce", "vm_run.sh"), "-t",
               str(args.timeout), "--rw", results, "-C", benchlib.REPO, "--", *guest]
        benchlib.log(" ".join(cmd))
        # vm_run.sh streams the guest's output to our stdout and stops its own
        # qemu on SIGTERM; it is our only child, and our signals go to it.
        vm = subprocess.Popen(cmd, stdin=subprocess.DEVNULL)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, lambda signum, _frame: vm.send_signal(signal.SIGTERM))
        status = vm.wait()
        summary = os.path.join(results, "summary.json")
        if args.json_out and os.path.exists(summary):
            with open(summary) as src, open(args.json_out, "w") as dst:
                dst.write(src.read())
    return status


if __name__ == "__main__":
    sys.exit(main())
