#!/usr/bin/python3
"""softroce_bench.py: xferd's verbs transport on Soft-RoCE beside perftest, all in
ONE VM boot.

  tests/bench/softroce_bench.py [--quick] [--no-build] [-t SECONDS]
                                [--blocks | --multi-nic | --tls | --qos | --tenants | --integrity]

Builds the daemon, the Python client zip and bench_client with --config=opt,
then boots the Soft-RoCE VM once (tests/softroce/vm_run.sh) and runs
tests/bench/softroce_guest.py there: ib_write_bw (64 KiB and 1 MiB messages)
and ib_write_lat (4 KiB) on rxe0, then two xferd daemons with --transport
verbs --require-rdma: 64 MiB writes at 64 KiB and 1 MiB slices, one
checksummed write, and the latency of a 4 KiB write. With --blocks it runs
blocks_bench's VM part instead (tests/bench/blocks_softroce_guest.py:
requests of 4 KiB and 64 KiB blocks in random order, written and read,
beside ib_write_bw / ib_read_bw -q 2 with post lists); with --multi-nic,
one vs two rxe devices per daemon and the bytes each device carried
(tests/bench/multi_nic_softroce_guest.py); with --tls, TCP data lanes on
the guest's loopback with TLS in user space, with kernel send, and with
kernel send and receive, beside plain (tcp_bench.py --encryption
--kernel-tls, 64 MiB writes: the guest's kernel has the tls module, this
host's may not; under TCG the figures are functional, not a speed); with
--qos, qos_bench.py over verbs (a critical client beside four writers of
64 MiB each, which the VM's 2 GiB holds); with --tenants, tenants_bench.py over
verbs (8 MiB writes, a cap of 8 MB/s: under TCG the link is slow); with --integrity,
integrity_bench.py over verbs (verified against plain, 16 MiB transfers, where the
peer checksums its side over the control plane). The guest's report (a
table, then one JSON line) streams to stdout; the JSON line is also left in
the file --json-out names. Exit status: the guest's (125: the VM failed).
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="short run: fewer, smaller runs")
    p.add_argument("--no-build", action="store_true", help="use the existing --config=opt build")
    p.add_argument("--bazel-bin", help="bazel-bin of an optimized build (default: bazel info)")
    p.add_argument("--reps", type=int, help="rounds of reference + xferd (default 5, quick 2; "
                                            "--blocks: 3, quick 1)")
    p.add_argument("-t", "--timeout", type=int, default=900, help="VM timeout, boot included")
    p.add_argument("--json-out", help="also write the JSON summary line to this file")
    p.add_argument("--blocks", action="store_true",
                   help="blocks_bench's VM part instead: many-block writes and reads beside "
                        "ib_write_bw / ib_read_bw (tests/bench/blocks_softroce_guest.py)")
    p.add_argument("--multi-nic", action="store_true",
                   help="instead: one vs two rxe devices per daemon and the per-device byte "
                        "split (tests/bench/multi_nic_softroce_guest.py)")
    p.add_argument("--tls", action="store_true",
                   help="instead: plain vs TLS TCP lanes in user space, with kernel send, and "
                        "with kernel send and receive (tcp_bench.py --encryption --kernel-tls)")
    p.add_argument("--qos", action="store_true",
                   help="instead: qos_bench over verbs, a critical client beside four bulk "
                        "writers (64 MiB each, 4 s phases: the VM's 2 GiB)")
    p.add_argument("--tenants", action="store_true",
                   help="instead: tenants_bench over verbs, a capped tenant beside an uncapped "
                        "one and two weighted ones (8 MiB writes, an 8 MB/s cap)")
    p.add_argument("--integrity", action="store_true",
                   help="instead: integrity_bench over verbs, verified against plain transfers "
                        "(16 MiB each, 2 rounds)")
    args = p.parse_args()
    bins = benchlib.build(args.no_build, args.bazel_bin)
    if args.integrity:
        return benchlib.run_guest_in_vm(
            os.path.join("tests", "bench", "integrity_bench.py"), bins,
            ["--transport", "verbs", "--no-build", "--size", str(16 * benchlib.MiB),
             "--reps", str(args.reps or 2)], args.timeout, args.json_out)
    if args.tenants:
        return benchlib.run_guest_in_vm(
            os.path.join("tests", "bench", "tenants_bench.py"), bins,
            ["--transport", "verbs", "--no-build", "--size", str(8 * benchlib.MiB),
             "--cap", str(8 * 1000 * 1000)], args.timeout, args.json_out)
    if args.qos:
        return benchlib.run_guest_in_vm(
            os.path.join("tests", "bench", "qos_bench.py"), bins,
            ["--transport", "verbs", "--no-build", "--quick", "--size", str(64 * benchlib.MiB)],
            args.timeout, args.json_out)
    if args.tls:
        reps = args.reps or (2 if args.quick else 3)
        return benchlib.run_guest_in_vm(
            os.path.join("tests", "bench", "tcp_bench.py"), bins,
            ["--encryption", "--kernel-tls", "--no-build", "--size", str(64 * benchlib.MiB),
             "--reps", str(reps)], args.timeout, args.json_out)
    guest = ("multi_nic_softroce_guest.py" if args.multi_nic
             else "blocks_softroce_guest.py" if args.blocks else "softroce_guest.py")
    extra = (["--quick"] if args.quick else []) + (["--reps", str(args.reps)] if args.reps else [])
    return benchlib.run_guest_in_vm(os.path.join("tests", "bench", guest), bins, extra,
                                    args.timeout, args.json_out)


if __name__ == "__main__":
    sys.exit(main())
