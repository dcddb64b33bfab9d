"""The Soft-RoCE part of blocks_bench: runs inside ONE Soft-RoCE VM boot
(tests/softroce/vm_run.sh) on rxe0 (GID index 1, 10.9.9.1) and prints the
report. Started from the host by `tests/bench/softroce_bench.py --blocks` (or
blocks_bench's VM stage); not meant to be run by hand outside the VM.

Rounds of, per block size (4 KiB and 64 KiB):
  1. ib_write_bw -s SIZE -q 2 -l 16 (2 QPs, post lists of 16: what xferd
     does with its 2 lanes and chained work requests), then one xferd Write of
     a block list in random order, the same bytes, between SHM regions;
  2. ib_read_bw -s SIZE -q 2 -l 16, then one xferd Read of another random
     block list from the peer's region back into a local one.
Every xferd transfer is checked byte for byte afterwards (outside the
timing): block i of the destination must equal block i of the source.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
import statistics
import sys
import time
from array import array
from typing import Any, Dict, List, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import KiB, MiB, size_name, table  # noqa: E402
from softroce_guest import DEV, GID_INDEX, Perftest  # noqa: E402

# Block size -> blocks per request: 4096 small blocks as the issue's
# requests, 1024 large ones (64 MiB) so both regions fit the VM's 2 GiB.
REQUESTS = {4 * KiB: 4096, 64 * KiB: 1024}
REGION = 64 * MiB
POST_LIST = 16  # ib_*_bw -l: work requests per ibv_post_send, like xferd's chains
QPS = 2  # xferd's lanes to the peer (2 pollers)
TARGET_RATIO = 0.9


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description="blocks_bench's Soft-RoCE part, inside the VM")
    p.add_argument("--bazel-bin", required=True, help="bazel-bin of the --config=opt build")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--reps", type=int, help="rounds (default 3, quick 1)")
    p.add_argument("--json-out", help="also write the JSON summary here")
    args = p.parse_args()
    args.reps = args.reps or (1 if args.quick else 3)
    return args


def block_list(pb: Any, size: int, count: int, rng: random.Random) -> Tuple[Any, List[int],
                                                                          List[int]]:
    """`count` blocks of `size` bytes: sources and destinations each a random
    permutation of the first `count` block slots of their region."""
    src = [i * size for i in range(count)]
    dst = list(src)
    rng.shuffle(src)
    rng.shuffle(dst)
    blocks = pb.Blocks(list=pb.BlockList(src_offsets=array("Q", src).tobytes(),
                                         dst_offsets=array("Q", dst).tobytes(),
                                         block_length=size))
    return blocks, src, dst


def mismatches(src: memoryview, dst: memoryview, size: int, src_offsets: Sequence[int],
               dst_offsets: Sequence[int]) -> int:
    return sum(1 for s, d in zip(src_offsets, dst_offsets) if src[s:s + size] != dst[d:d + size])


class Pair(benchlib.VerbsPair):
    """The verbs pair with SHM regions: a's `src` (random bytes) and `back`;
    b's `dst`, which a writes into and then reads from."""

    def __init__(self, children: benchlib.Children, bins: benchlib.Binaries,
                 workdir: str) -> None:
        super().__init__(children, bins, workdir)
        self.src = self.ca.register_region("src", REGION, backing="shm").buffer
        self.back = self.ca.register_region("back", REGION, backing="shm").buffer
        self.dst = self.cb.register_region("dst", REGION, backing="shm", remote_write=True,
                                           remote_read=True).buffer
        self.src[:] = os.urandom(REGION)
        self.rng = random.Random(8)
        self.checked_blocks = 0
        self.bad_blocks = 0

    def run(self, kind: str, size: int) -> float:
        """One request of REQUESTS[size] random blocks; its MiB/s by the
        client's clock around the call (which waits for the transfer)."""
        blocks, src_offsets, dst_offsets = block_list(self.pb, size, REQUESTS[size], self.rng)
        if kind == "write":
            request = self.pb.WriteRequest(src_region="src", peer="b", dst_region="dst",
                                           blocks=blocks, wait=True)
            call, source, sink = self.ca.stub.Write, self.src, self.dst
        else:
            request = self.pb.ReadRequest(peer="b", src_region="dst", dst_region="back",
                                          blocks=blocks, wait=True)
            call, source, sink = self.ca.stub.Read, self.dst, self.back
        start = time.perf_counter()
        done = call(request, timeout=600)
        elapsed = time.perf_counter() - start
        if done.state != 3:  # TRANSFER_STATE_DONE
            raise SystemExit(f"{kind} of {size_name(size)} blocks failed: {done.error.message}")
        self.checked_blocks += len(src_offsets)
        self.bad_blocks += mismatches(source, sink, size, src_offsets, dst_offsets)
        return REQUESTS[size] * size / elapsed / MiB

    def close(self) -> None:
        for mapping in (self.src, self.back, self.dst):
            mapping.release()
        super().close()


def rounds(perf: Perftest, pair: Pair, reps: int) -> Dict[Tuple[str, int], Dict[str, List[float]]]:
    """Per (write|read, block size): the reference and xferd, seconds apart
    in each round (TCG speed follows the host's load)."""
    tools = {"write": "ib_write_bw", "read": "ib_read_bw"}
    results = {(k, s): {"ref": [], "xferd": []} for k in tools for s in REQUESTS}
    for rep in range(reps):
        for (kind, size), r in results.items():
            iters = max(5, REQUESTS[size] // QPS)
            iters -= iters % POST_LIST
            r["ref"].append(perf.run(tools[kind], ["-s", str(size), "-n", str(iters), "-q",
                                                   str(QPS), "-l", str(POST_LIST)])[3])
            r["xferd"].append(pair.run(kind, size))
        benchlib.log(f"round {rep + 1}/{reps}, MiB/s: " + ", ".join(
            f"{k} {size_name(s)} {tools[k]} {r['ref'][-1]:.1f} xferd {r['xferd'][-1]:.1f}"
            for (k, s), r in results.items()))
    return results


def ratio(r: Dict[str, List[float]]) -> float:
    return statistics.median(x / ref for x, ref in zip(r["xferd"], r["ref"]))


def report(results: Dict[Tuple[str, int], Dict[str, List[float]]], pair: Pair,
           reps: int) -> str:
    rows = []
    for (kind, size), r in results.items():
        xf = statistics.median(r["xferd"])
        rows.append([kind, size_name(size), REQUESTS[size], f"{xf * MiB / size:,.0f}",
                     f"{xf:.1f}", f"{statistics.median(r['ref']):.1f}", f"{ratio(r):.2f}x",
                     benchlib.verdict(ratio(r), TARGET_RATIO)])
    tool = f"ib_{{write,read}}_bw -d {DEV} -x {GID_INDEX} -F -q {QPS} -l {POST_LIST}"
    return "\n".join([
        f"Blocks: {reps} rounds of {tool} (the same bytes as the request), then one xferd",
        "request of that many blocks in random order on both sides (SHM regions; client wall",
        "clock around Write/Read with wait). MiB/s = 2^20 B/s; ratio = median over rounds of",
        "xferd / reference of the same round. The VM runs under qemu TCG: every figure is",
        "bounded by the emulated CPU (Soft-RoCE does its work in the guest kernel), not a NIC.",
        "",
        table(["op", "block", "blocks/request", "xferd blocks/s", "xferd MiB/s",
               "reference MiB/s", "xferd/reference", f"target >= {TARGET_RATIO}x"], rows,
              align="ll"),
        "",
        f"Bytes checked: {pair.checked_blocks} blocks compared after their transfers, "
        f"{pair.bad_blocks} differed -> " + ("MATCH" if pair.bad_blocks == 0 else "MISMATCH"),
    ])


def main() -> int:
    args = parse_args()
    bins, children, workdir = benchlib.guest_start(args.bazel_bin, "xfbb")
    started = time.monotonic()
    try:
        perf = Perftest(children, workdir)
        pair = Pair(children, bins, workdir)
        results = rounds(perf, pair, args.reps)
        pair.close()
    finally:
        children.stop_all()
    print(f"\n== blocks_bench, Soft-RoCE part: many-block writes and reads on {DEV} vs "
          "perftest, one VM boot ==")
    print(f"guest: {os.cpu_count()} vCPUs (qemu TCG), Linux {platform.release()}; xferd "
          f"--config=opt, transport {pair.peer.transport}, device {pair.peer.device}, "
          f"lanes {pair.peer.lanes}; {datetime.date.today()}\n")
    print(report(results, pair, args.reps) + "\n")
    summary = {
        "bench": "blocks_bench_softroce", "quick": args.quick, "vcpus": os.cpu_count(),
        "device": pair.peer.device, "transport": pair.peer.transport, "qps": QPS,
        "post_list": POST_LIST,
        "runs": {f"{k}_{s}": {"blocks": REQUESTS[s], "reference_mib_s": benchlib.summary(r["ref"]),
                              "xferd_mib_s": benchlib.summary(r["xferd"]), "ratio": ratio(r)}
                 for (k, s), r in results.items()},
        "checked_blocks": pair.checked_blocks, "bad_blocks": pair.bad_blocks,
        "seconds": round(time.monotonic() - started, 1),
    }
    line = json.dumps(summary, separators=(",", ":"))
    print(line)
    if args.json_out:
        with open(args.json_out, "w") as f:
            f.write(line + "\n")
    return 0 if pair.bad_blocks == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
