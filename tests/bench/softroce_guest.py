"""The guest half of softroce_bench.py: runs inside ONE Soft-RoCE VM boot
(tests/softroce/vm_run.sh), on rxe0 (GID index 1, 10.9.9.1), and prints the
report. Started by tests/bench/softroce_bench.py on the host; not meant to be
run by hand outside the VM.

  1. two xferd daemons (--transport verbs --require-rdma), then rounds of:
     ib_write_bw -x 1 -F on rxe0 at 64 KiB and at 1 MiB messages (~64 MiB a
     run; also with -q = xferd's queue pairs, for information), each followed
     by one 64 MiB xferd write at that slice size;
  2. ib_write_lat -s 4096, then the latency of a 4 KiB xferd write (C++
     client, Write with wait, and through the local request rings) beside
     the bare gRPC round trip and the daemon-side time;
  3. one 64 MiB SHM-to-SHM write, checksummed.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, List, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import KiB, MiB, size_name, table  # noqa: E402

SLICES = [64 * KiB, 1 * MiB]
TRANSFER = 64 * MiB
SMALL = 4 * KiB
TARGET_RATIO = 0.9
RING_LAT_TARGET = 2.0  # ring 4 KiB write p50 <= 2x ib_write_lat -s 4096
DEV = os.environ.get("XFERD_RDMA_DEV", "rxe0")
GID_INDEX = os.environ.get("XFERD_RDMA_GID_INDEX", "1")
IP = os.environ.get("XFERD_RDMA_IP", "10.9.9.1")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description="softroce_bench, inside the VM")
    p.add_argument("--bazel-bin", required=True, help="bazel-bin of the --config=opt build")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--reps", type=int, help="rounds of ib_write_bw + xferd (default 5, quick 2)")
    p.add_argument("--json-out", help="also write the JSON summary here (e.g. $XFERD_VM_WORK)")
    args = p.parse_args()
    args.reps = args.reps or (2 if args.quick else 5)
    args.bytes_per_bw_run = 32 * MiB if args.quick else 64 * MiB
    args.lat_writes = 100 if args.quick else 200
    return args


# --------------------------------------------------------------- perftest --

class Perftest:
    """perftest server+client pairs on rxe0, each on a fresh port."""

    def __init__(self, children: benchlib.Children, workdir: str) -> None:
        self.children = children
        self.workdir = workdir
        self.port = 18515

    def run(self, tool: str, args: Sequence[str], tries: int = 3) -> List[float]:
        """The client's result line as numbers (ib_write_bw: bytes, iters,
        peak, average MiB/s, Mpps; ib_write_lat: bytes, iters, min, max,
        typical, avg, stdev, p99, p99.9 us). Under TCG a bandwidth run now and
        then reports an average of 0.00 MiB/s (its cycle count is off), which
        is no measurement: such a run is logged and repeated."""
        for attempt in range(1, tries + 1):
            fields, output = self._run_once(tool, args)
            if not tool.endswith("_bw") or fields[3] > 0:
                return fields
            benchlib.log(f"{tool} {' '.join(args)} reported 0 MiB/s (try {attempt} of "
                         f"{tries}):\n{output}")
        raise SystemExit(f"{tool} {' '.join(args)} reported 0 MiB/s {tries} times")

    def _run_once(self, tool: str, args: Sequence[str]) -> Tuple[List[float], str]:
        self.port += 1
        common = [tool, "-d", DEV, "-x", GID_INDEX, "-F", "-p", str(self.port), *args]
        log_path = os.path.join(self.workdir, f"{tool}.{self.port}.server.log")
        with open(log_path, "w") as server_log:
            server = self.children.start(common, stdout=server_log, stderr=subprocess.STDOUT)
        benchlib.wait_listening(self.port, server)
        client = subprocess.run(common + [IP], stdin=subprocess.DEVNULL, capture_output=True,
                                text=True, timeout=300)
        server_rc = benchlib.stop_process(server, timeout=30)
        if client.returncode != 0:
            raise SystemExit(f"{' '.join(common)} {IP} failed ({client.returncode}, server "
                             f"{server_rc}):\n{client.stdout}{client.stderr}")
        size = args[args.index("-s") + 1]
        for line in client.stdout.splitlines():
            fields = line.split()
            if len(fields) >= 5 and fields[0] == size and fields[1].isdigit():
                return [float(f) for f in fields], client.stdout
        raise SystemExit(f"no result line in {tool} output:\n{client.stdout}")

    def bandwidth(self, size: int, iters: int, qps: int = 1) -> float:
        """ib_write_bw's average MiB/s (of all `qps` queue pairs, `iters`
        messages each)."""
        return self.run("ib_write_bw", ["-s", str(size), "-n", str(iters), "-q", str(qps)])[3]

    def latency(self) -> Dict[str, float]:
        lat = self.run("ib_write_lat", ["-s", str(SMALL)])
        return {"iters": int(lat[1]), "min_us": lat[2], "typical_us": lat[4],
                "avg_us": lat[5], "p99_us": lat[7]}


# ------------------------------------------------------------------ xferd --

def daemon_side_us(transfer: Any) -> float:
    """finished_at - submitted_at of a transfer, in microseconds."""
    start = transfer.submitted_at.ToNanoseconds()
    return (transfer.finished_at.ToNanoseconds() - start) / 1e3


class Pair(benchlib.VerbsPair):
    """The verbs pair with a 64 MiB source region on a and destination on b."""

    def __init__(self, children: benchlib.Children, bins: benchlib.Binaries,
                 workdir: str) -> None:
        super().__init__(children, bins, workdir)
        self.ca.register_region("src", TRANSFER)
        self.cb.register_region("dst", TRANSFER, remote_write=True)
        self.write(TRANSFER)  # warm-up: resolves the destination region

    def write(self, length: int, slice_size: int = 0) -> Any:
        request = self.pb.WriteRequest(src_region="src", peer="b", dst_region="dst",
                                       length=length, slice_size=slice_size, wait=True)
        done = self.ca.stub.Write(request, timeout=600)
        if done.state != 3:  # TRANSFER_STATE_DONE
            raise SystemExit(f"transfer failed: {done.error.message}")
        return done

    def bandwidth(self, slice_size: int) -> float:
        """MiB/s of one 64 MiB write, by the client's clock."""
        start = time.perf_counter()
        self.write(TRANSFER, slice_size)
        return TRANSFER / (time.perf_counter() - start) / MiB



def bandwidth_rounds(perf: Perftest, pair: Pair, args: argparse.Namespace) -> Dict[str, Any]:
    """Rounds of ib_write_bw then xferd per message/slice size, so each ratio
    compares runs seconds apart (TCG speed follows the host's load)."""
    iters = {s: max(5, args.bytes_per_bw_run // s) for s in SLICES}
    qps = pair.peer.lanes  # xferd's queue pairs to the peer: one per poller
    ib: Dict[int, List[float]] = {s: [] for s in SLICES}
    ib_qps: Dict[int, List[float]] = {s: [] for s in SLICES}
    xf: Dict[int, List[float]] = {s: [] for s in SLICES}
    for rep in range(args.reps):
        for s in SLICES:
            ib[s].append(perf.bandwidth(s, iters[s]))
            ib_qps[s].append(perf.bandwidth(s, max(5, iters[s] // qps), qps))
            xf[s].append(pair.bandwidth(s))
        benchlib.log(f"round {rep + 1}/{args.reps}, MiB/s: "
                     + ", ".join(f"{size_name(s)} ib_write_bw {ib[s][-1]:.1f}, -q {qps} "
                                 f"{ib_qps[s][-1]:.1f}, xferd {xf[s][-1]:.1f}" for s in SLICES))

    def ratio(xs: List[float], refs: List[float]) -> float:
        return statistics.median(x / r for x, r in zip(xs, refs))

    return {"iters": iters, "qps": qps, "ib": ib, "ib_qps": ib_qps, "xf": xf,
            "ratio": {s: ratio(xf[s], ib[s]) for s in SLICES},
            "ratio_qps": {s: ratio(xf[s], ib_qps[s]) for s in SLICES}}


def latency(perf: Perftest, pair: Pair, bins: benchlib.Binaries,
            args: argparse.Namespace) -> Dict[str, Any]:
    ref = perf.latency()
    daemon_side = sorted(daemon_side_us(pair.write(SMALL)) for _ in range(args.lat_writes))
    cpp = [bins.bench_client, "--target", pair.a.target]
    bound = ["--max-ops", str(args.lat_writes), "--seconds", "600"]
    lat = benchlib.run_json(cpp + ["write", "--src", "src", "--peer", "b", "--dst", "dst",
                                   "--length", str(SMALL)] + bound)
    rpc = benchlib.run_json(cpp + ["rpc"] + bound)
    # The same write through the local request rings (docs/local-rings.md),
    # between SHM regions, which the client compares at the end.
    slots = 256
    ring_src = pair.ca.register_region("ring_src", SMALL * slots, backing="shm")
    pair.cb.register_region("ring_dst", SMALL * slots, backing="shm", remote_write=True)
    ring_src.buffer[:] = os.urandom(SMALL * slots)
    ring = benchlib.run_json([bins.ring_bench_client, "--target", pair.a.target,
                              "--src", "ring_src", "--peer", "b", "--dst", "ring_dst",
                              "--size", str(SMALL), "--slots", str(slots),
                              "--verify-dst-target", pair.b.target,
                              "--seconds", "5" if args.quick else "10", "lat"])
    pair.ca.deregister_region("ring_src")
    pair.cb.deregister_region("ring_dst")
    if not ring.get("verified"):
        raise SystemExit("ring write: the destination differs from the source")
    benchlib.log(f"4 KiB: ib_write_lat typical {ref['typical_us']} us; xferd write p50 "
                 f"{lat['p50_us']:.0f} us (ring {ring['p50_us']:.0f} us); GetNodeInfo p50 "
                 f"{rpc['p50_us']:.0f} us")
    return {"ref": ref, "write": lat, "rpc": rpc, "ring": ring,
            "daemon_side": {"p50_us": benchlib.percentile(daemon_side, 50),
                            "p99_us": benchlib.percentile(daemon_side, 99)}}


def verify(pair: Pair, bins: benchlib.Binaries) -> Dict[str, Any]:
    pair.ca.deregister_region("src")
    pair.cb.deregister_region("dst")
    return benchlib.run_json([bins.bench_client, "--target", pair.a.target, "verify",
                              "--peer-target", pair.b.target, "--peer", "b",
                              "--size", str(TRANSFER)])


# ----------------------------------------------------------------- report --

def report(bw: Dict[str, Any], lat: Dict[str, Any], checked: Dict[str, Any],
           args: argparse.Namespace) -> str:
    rows = []
    for s in SLICES:
        xf, ib = bw["xf"][s], bw["ib"][s]
        rows.append([size_name(s), f"{statistics.median(xf):.1f}", f"{max(xf):.1f}",
                     f"{statistics.median(ib):.1f}", f"{statistics.median(bw['ib_qps'][s]):.1f}",
                     f"{bw['ratio'][s]:.2f}x", f"{bw['ratio_qps'][s]:.2f}x",
                     benchlib.verdict(bw["ratio"][s], TARGET_RATIO)])
    w, rpc, ds, il, ring = lat["write"], lat["rpc"], lat["daemon_side"], lat["ref"], lat["ring"]
    ring_ratio = ring["p50_us"] / il["typical_us"]
    lat_rows = [
        ["ib_write_lat -s 4096 (reference)", il["iters"], f"{il['typical_us']:.1f} (typical)",
         f"{il['p99_us']:.1f}", "half a ping-pong of writes (one way), both sides busy-polling"],
        ["xferd 4 KiB Write(wait), C++ client", w["ops"], f"{w['p50_us']:.0f}",
         f"{w['p99_us']:.0f}", "gRPC round trip to the local daemon + RDMA write + completion"],
        ["xferd 4 KiB write through the request rings, C++", ring["ops"],
         f"{ring['p50_us']:.0f}", f"{ring['p99_us']:.0f}",
         "shared-memory submit -> RDMA write + completion -> completion ring"],
        ["  of which: bare gRPC GetNodeInfo", rpc["ops"], f"{rpc['p50_us']:.0f}",
         f"{rpc['p99_us']:.0f}", "client -> local daemon (unix socket) -> client"],
        ["  of which: daemon-side (submitted->finished)", args.lat_writes, f"{ds['p50_us']:.0f}",
         f"{ds['p99_us']:.0f}", "engine queue, poller, RDMA write, completion"],
    ]
    perf_args = ", ".join(f"-s {s} -n {bw['iters'][s]}" for s in SLICES)
    return "\n".join([
        f"1. Bandwidth: {args.reps} rounds of ib_write_bw -d {DEV} -x {GID_INDEX} -F "
        f"({perf_args}) then one {size_name(TRANSFER)} xferd write",
        "   between anonymous regions at the same slice size (client wall clock). "
        "MiB/s = 2^20 B/s; ratio = median over the rounds of xferd / ib_write_bw of the same "
        "round.",
        f"   For information, ib_write_bw -q {bw['qps']} too (same bytes): xferd spreads a "
        f"transfer over {bw['qps']} queue pairs, one per poller.",
        "",
        table(["slice / message", "xferd median", "xferd best", "ib_write_bw avg, median",
               f"ib_write_bw -q {bw['qps']}", "xferd/ib_write_bw",
               f"xferd/ib_write_bw -q {bw['qps']}", f"target >= {TARGET_RATIO}x"], rows),
        "",
        f"2. Bytes checked: {size_name(checked['bytes'])} SHM-to-SHM write at the default slice "
        f"({size_name(checked['slice'])}): source FNV-1a64 {checked['src_checksum']}, destination "
        f"{checked['dst_checksum']} -> " + ("MATCH" if checked["match"] else "MISMATCH"),
        "",
        "3. Latency of one 4 KiB write, microseconds",
        "",
        table(["what", "samples", "p50 us", "p99 us", "includes"], lat_rows, align="lrrrl"),
        "   The xferd figure is end to end as an application sees it: a gRPC call to the "
        "local daemon, which posts",
        "   the RDMA WRITE, waits for its completion (the responder's ACK: a round trip on the "
        "wire) and replies.",
        "   ib_write_lat has no RPC and reports half the round trip of a ping-pong of writes "
        "between two busy-polling",
        f"   processes (typical = median); a write plus its ACK is about twice that, "
        f"{2 * il['typical_us']:.0f} us here.",
        f"   Ring write p50 / ib_write_lat typical = {ring_ratio:.1f}x (target <= "
        f"{RING_LAT_TARGET:.0f}x): {benchlib.verdict(ring_ratio, RING_LAT_TARGET, False)}",
    ])


def main() -> int:
    args = parse_args()
    bins, children, workdir = benchlib.guest_start(args.bazel_bin, "xfb")
    started = time.monotonic()
    try:
        perf = Perftest(children, workdir)
        pair = Pair(children, bins, workdir)
        bw = bandwidth_rounds(perf, pair, args)
        lat = latency(perf, pair, bins, args)
        checked = verify(pair, bins)
        pair.close()
    finally:
        children.stop_all()
    print(f"\n== softroce_bench: xferd verbs transport on Soft-RoCE ({DEV}) vs perftest, "
          "one VM boot ==")
    print(f"guest: {os.cpu_count()} vCPUs (qemu TCG), Linux {platform.release()}; xferd "
          f"--config=opt, transport {pair.peer.transport}, device {pair.peer.device}, pollers "
          f"{pair.info.pollers}, lanes {pair.peer.lanes}; {datetime.date.today()}\n")
    print(report(bw, lat, checked, args) + "\n")
    summary = {
        "bench": "softroce_bench", "quick": args.quick, "vcpus": os.cpu_count(),
        "device": pair.peer.device, "transport": pair.peer.transport,
        "pollers": pair.info.pollers, "transfer_bytes": TRANSFER,
        "ib_write_bw_mib_s": {str(s): benchlib.summary(v) for s, v in bw["ib"].items()},
        "ib_write_bw_iters": {str(s): v for s, v in bw["iters"].items()},
        "xferd_mib_s": {str(s): benchlib.summary(v) for s, v in bw["xf"].items()},
        "ratio_vs_ib_write_bw": {str(s): v for s, v in bw["ratio"].items()},
        "ib_write_bw_qps": bw["qps"],
        "ib_write_bw_multi_qp_mib_s": {str(s): benchlib.summary(v)
                                       for s, v in bw["ib_qps"].items()},
        "ratio_vs_ib_write_bw_multi_qp": {str(s): v for s, v in bw["ratio_qps"].items()},
        "ib_write_lat_4k": lat["ref"], "xferd_write_4k": lat["write"], "grpc_rpc": lat["rpc"],
        "ring_write_4k": lat["ring"],
        "xferd_daemon_side_4k": lat["daemon_side"], "verify": checked,
        "seconds": round(time.monotonic() - started, 1),
    }
    benchlib.emit_summary(summary, args.json_out)
    return 0 if checked["match"] else 1


if __name__ == "__main__":
    sys.exit(main())
