#!/usr/bin/python3
"""blocks_bench: many-block transfers over xferd's TCP transport on loopback,
beside one bulk write measured in the same run.

  tests/bench/blocks_bench.py [--quick] [--no-build]

Builds the daemon, xferctl, the Python client zip and bench_client with
--config=opt, starts two daemons (a connected to b) and measures:
  1. the bulk reference: a 1 GiB SHM-to-SHM write (256 MiB with --quick),
     checksummed, into regions already written once (the first write into
     fresh regions also pays for first touches of their pages, which some
     hosts make costly: it is shown beside);
  2. requests of 4096 blocks of 4 KiB, 16 KiB and 64 KiB in random order,
     written and read back, one request after the other: blocks/s, GB/s and
     the ratio to the bulk rate (targets: 4 KiB >= 0.4, 64 KiB >= 0.9);
  3. submission of a 100,000-block request (packed arrays): the client's
     time to get the reply (queued), and the daemon's planning cost per block
     from its log line;
  4. the daemon's memory with a 1,000,000-block transfer in flight against
     idle (bytes per block; target ~32), after it ended (target 0), and at
     the peak of its submission.
Prints a table, then one JSON line with every figure. A benchmark, not a
test: it checks the bytes of the bulk write, never the speed.
"""

from __future__ import annotations

import argparse
import array
import json
import os
import random
import re
import sys
import tempfile
import threading
import time
from typing import Any, Dict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import GiB, KiB, table  # noqa: E402

BLOCK_SIZES = [4 * KiB, 16 * KiB, 64 * KiB]
TARGETS = {4 * KiB: 0.4, 64 * KiB: 0.9}
COUNT = 4096


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="short run: fewer, smaller requests")
    p.add_argument("--no-build", action="store_true", help="use the existing --config=opt build")
    p.add_argument("--bazel-bin", help="bazel-bin of an optimized build (default: bazel info)")
    return p.parse_args()


def bench_client(bins: benchlib.Binaries, a: benchlib.Daemon, *args: str) -> Dict[str, Any]:
    return benchlib.run_json([bins.bench_client, "--target", a.target, *args])


def blocks(bins, a, b, block: int, requests: int, read: bool, count: int = COUNT,
           no_wait: bool = False) -> Dict[str, Any]:
    args = ["blocks", "--peer-target", b.target, "--peer", "b", "--block", str(block),
            "--count", str(count), "--requests", str(requests)]
    if read:
        args.append("--read")
    if no_wait:
        args.append("--no-wait")
    return bench_client(bins, a, *args)


def planning_ns_per_block(a: benchlib.Daemon) -> float:
    """The last 'planned N blocks ... (x ns/block)' line of a's log."""
    with open(a.log_path, errors="replace") as f:
        found = re.findall(r"planned \d+ blocks .*\(([\d.]+) ns/block\)", f.read())
    return float(found[-1]) if found else float("nan")


def memory_per_block(ca: Any, pb: Any, blocks_n: int) -> Dict[str, float]:
    """Daemon a's resident bytes beyond its registered regions: idle, at the
    peak of submission (the request's offset arrays, 16 bytes a block, and
    the plan being built beside them), while the transfer is in flight after
    its submission returned (the plan alone), and after it ended. The write
    has `blocks_n` 64-byte blocks in random order, so nothing merges."""
    size = blocks_n * 64
    ca.register_region("mem_src", size)
    # The destination is on b; a only plans and sends.
    idle = ca.stats().resident_bytes - ca.stats().registered_bytes
    offsets = array.array("Q", range(0, size, 64))
    dst = list(range(blocks_n))
    random.Random(9).shuffle(dst)
    dst_offsets = array.array("Q", (d * 64 for d in dst)).tobytes()
    src_offsets = offsets.tobytes()
    step = 65536  # blocks per SubmitStream message (1 MiB of offsets)

    def chunks():
        first = pb.WriteRequest(src_region="mem_src", peer="b", dst_region="mem_dst")
        for i in range(0, blocks_n, step):
            part = pb.Blocks(list=pb.BlockList(src_offsets=src_offsets[i * 8:(i + step) * 8],
                                               dst_offsets=dst_offsets[i * 8:(i + step) * 8],
                                               block_length=64))
            if i == 0:
                first.blocks.CopyFrom(part)
                yield pb.TransferChunk(write=first)
            else:
                yield pb.TransferChunk(more_blocks=part)

    # peak[0]: until SubmitStream returned; peak[1]: from then to the end.
    peak = [idle, idle]
    phase = [0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            s = ca.stats()
            p = phase[0]
            peak[p] = max(peak[p], s.resident_bytes - s.registered_bytes)
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    t = ca.stub.SubmitStream(chunks(), timeout=600)
    phase[0] = 1
    samples_in_flight = 0
    while ca.stub.GetTransfer(pb.GetTransferRequest(id=t.id)).state not in (3, 4, 5):
        samples_in_flight += 1
        time.sleep(0.005)
    done.set()
    sampler.join()
    time.sleep(3)  # the engine sweeps ended transfers within ~2.5 s
    after = ca.stats().resident_bytes - ca.stats().registered_bytes
    ca.deregister_region("mem_src")
    return {"idle_rss": idle, "submit_peak_rss": peak[0], "inflight_rss": peak[1],
            "after_rss": after, "inflight_polls": samples_in_flight,
            "bytes_per_block_submit_peak": (peak[0] - idle) / blocks_n,
            "bytes_per_block_inflight": (peak[1] - idle) / blocks_n,
            "bytes_per_block_after": (after - idle) / blocks_n}


def main() -> None:
    args = parse_args()
    bins = benchlib.build(args.no_build, args.bazel_bin)
    bins.import_client()
    from xferd.v1 import xferd_pb2 as pb
    children = benchlib.Children()
    workdir = tempfile.mkdtemp(prefix="blocks-bench-")
    children.dirs.append(workdir)
    try:
        a, b, ca, cb = benchlib.start_pair(children, bins, workdir)
        bulk_size = 256 * 1024 * 1024 if args.quick else GiB
        bulk = bench_client(bins, a, "verify", "--peer-target", b.target, "--peer", "b",
                            "--size", str(bulk_size), "--writes", "4")
        if not bulk["match"]:
            raise SystemExit("bulk write: checksums differ")
        bulk_gbps = bulk_size / bulk["seconds"] / 1e9
        first_gbps = bulk_size / bulk["write_seconds"][0] / 1e9
        requests = 3 if args.quick else 10
        rows, figures = [], {"bulk_gbps": bulk_gbps, "bulk_first_write_gbps": first_gbps,
                         "bulk_bytes": bulk_size, "blocks": {}}
        for block in BLOCK_SIZES:
            for read in (False, True):
                r = blocks(bins, a, b, block, requests, read)
                ratio = r["gbps"] / bulk_gbps
                key = f"{'read' if read else 'write'}_{block // KiB}k"
                figures["blocks"][key] = dict(r, ratio=ratio)
                target = TARGETS.get(block)
                rows.append([key, f"{r['blocks_per_s']:,.0f}", f"{r['gbps']:.2f}",
                             f"{ratio:.2f}",
                             benchlib.verdict(ratio, target) if target else ""])
        cb.register_region("mem_dst", 1_000_000 * 64, remote_write=True)
        sub = blocks(bins, a, b, 64, 1, False, count=100_000, no_wait=True)
        figures["submit_100k"] = {"client_ms": sub["submit_ms"],
                                  "daemon_ns_per_block": planning_ns_per_block(a)}
        figures["memory"] = memory_per_block(ca, pb, 100_000 if args.quick else 1_000_000)
        print(table(["requests of 4096 blocks", "blocks/s", "GB/s", "x bulk", "target"], rows))
        print(f"bulk: {bulk_gbps:.2f} GB/s ({bulk_size >> 20} MiB, median of writes 2-4 into "
              f"the same regions; the first, into fresh pages: {first_gbps:.2f} GB/s)")
        print(f"submission of 100,000 blocks: {sub['submit_ms']:.1f} ms client, "
              f"{figures['submit_100k']['daemon_ns_per_block']:.0f} ns/block planning")
        m = figures["memory"]
        print(f"memory: {m['bytes_per_block_inflight']:.1f} B/block in flight "
              f"(target ~32), {m['bytes_per_block_after']:.1f} B/block after it ended, "
              f"{m['bytes_per_block_submit_peak']:.1f} B/block at the peak of submission")
        print(json.dumps(figures))
    finally:
        children.stop_all()


if __name__ == "__main__":
    main()
