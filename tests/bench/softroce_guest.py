"""The guest half of softroce_bench: runs inside ONE Soft-RoCE VM boot
(tests/softroce/vm_run.sh), on rxe0 (GID index 1, 10.9.9.1), and prints the
report. Started by tests/bench/softroce_bench on the host; not meant to be
run by hand outside the VM.

  1. perftest references on rxe0: ib_write_bw -x 1 -F at 64 KiB and 1 MiB
     messages (~64 MiB per run), and ib_write_lat -s 4096;
  2. two xferd daemons (--transport verbs --require-rdma): 64 MiB writes at
     64 KiB and 1 MiB slices (several runs; median), one SHM-to-SHM write
     checksummed, and the latency of a 4 KiB write (C++ client, Write with
     wait) beside the bare gRPC round trip and the daemon-side time.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import KiB, MiB, size_name, table  # noqa: E402

SLICES = [64 * KiB, 1 * MiB]
TRANSFER = 64 * MiB
SMALL = 4 * KiB
TARGET_RATIO = 0.9
DEV = os.environ.get("XFERD_RDMA_DEV", "rxe0")
GID_INDEX = os.environ.get("XFERD_RDMA_GID_INDEX", "1")
IP = os.environ.get("XFERD_RDMA_IP", "10.9.9.1")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description="softroce_bench, inside the VM")
    p.add_argument("--bazel-bin", required=True, help="bazel-bin of the --config=opt build")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--reps", type=int, help="xferd runs per slice size (default 5, quick 2)")
    p.add_argument("--json-out", help="also write the JSON summary here (e.g. $XFERD_VM_WORK)")
    args = p.parse_args()
    args.reps = args.reps or (2 if args.quick else 5)
    args.perf_reps = 1 if args.quick else 3
    args.bytes_per_bw_run = 32 * MiB if args.quick else 64 * MiB
    args.lat_writes = 100 if args.quick else 200
    return args


# --------------------------------------------------------------- perftest --

def perftest(children: benchlib.Children, port: int, tool: str, args: Sequence[str],
             workdir: str) -> List[float]:
    """Runs a perftest server and its client on rxe0; the client's result
    line as numbers (ib_write_bw: bytes, iters, peak, average MiB/s, Mpps;
    ib_write_lat: bytes, iters, min, max, typical, avg, stdev, p99, p99.9 us)."""
    common = [tool, "-d", DEV, "-x", GID_INDEX, "-F", "-p", str(port), *args]
    with open(os.path.join(workdir, f"{tool}.{port}.server.log"), "w") as server_log:
        server = children.start(common, stdout=server_log, stderr=subprocess.STDOUT)
    benchlib.wait_listening(port, server)
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
            return [float(f) for f in fields]
    raise SystemExit(f"no result line in {tool} output:\n{client.stdout}")


def run_perftest(children: benchlib.Children, args: argparse.Namespace,
                 workdir: str) -> Dict[str, Any]:
    port = 18515
    bw: Dict[int, List[float]] = {}
    for size in SLICES:
        iters = max(5, args.bytes_per_bw_run // size)
        bw[size] = []
        for _ in range(args.perf_reps):
            port += 1
            result = perftest(children, port, "ib_write_bw",
                              ["-s", str(size), "-n", str(iters)], workdir)
            bw[size].append(result[3])
        benchlib.log(f"ib_write_bw -s {size} -n {iters}: {bw[size]} MiB/s")
    port += 1
    lat = perftest(children, port, "ib_write_lat", ["-s", str(SMALL)], workdir)
    benchlib.log(f"ib_write_lat -s {SMALL}: typical {lat[4]} us, p99 {lat[7]} us")
    return {"bw": bw, "bw_iters": {s: max(5, args.bytes_per_bw_run // s) for s in SLICES},
            "lat": {"iters": int(lat[1]), "min_us": lat[2], "typical_us": lat[4],
                    "avg_us": lat[5], "p99_us": lat[7]}}


# ------------------------------------------------------------------ xferd --

def daemon_side_us(transfer: Any) -> float:
    """finished_at - submitted_at of a transfer, in microseconds."""
    start = transfer.submitted_at.ToNanoseconds()
    return (transfer.finished_at.ToNanoseconds() - start) / 1e3


def run_xferd(children: benchlib.Children, bins: benchlib.Binaries, args: argparse.Namespace,
              workdir: str) -> Dict[str, Any]:
    import xferd
    from xferd.v1 import xferd_pb2
    a = benchlib.Daemon(children, bins.xferd, workdir, "a", "verbs")
    b = benchlib.Daemon(children, bins.xferd, workdir, "b", "verbs")
    ca, cb = xferd.Client(a.target), xferd.Client(b.target)
    peer = ca.connect_peer(b.address)
    info = ca.node_info()
    benchlib.log(f"xferd a -> b connected: transport {peer.transport}, device {peer.device}, "
                 f"lanes {peer.lanes}")
    ca.register_region("src", TRANSFER)
    cb.register_region("dst", TRANSFER, remote_write=True)

    def write(length: int, slice_size: int = 0) -> Any:
        request = xferd_pb2.WriteRequest(src_region="src", peer="b", dst_region="dst",
                                         length=length, slice_size=slice_size, wait=True)
        done = ca.stub.Write(request, timeout=600)
        if done.state != 3:  # TRANSFER_STATE_DONE
            raise SystemExit(f"transfer failed: {done.error.message}")
        return done

    def timed(slice_size: int) -> float:
        start = time.perf_counter()
        write(TRANSFER, slice_size)
        return TRANSFER / (time.perf_counter() - start) / MiB

    write(TRANSFER)  # warm-up: resolves the destination region
    bulk = benchlib.interleaved(args.reps, SLICES, timed, f"xferd {size_name(TRANSFER)}, MiB/s")
    daemon_side = sorted(daemon_side_us(write(SMALL)) for _ in range(args.lat_writes))
    cpp = [bins.bench_client, "--target", a.target]
    bound = ["--max-ops", str(args.lat_writes), "--seconds", "600"]
    lat = benchlib.run_json(cpp + ["write", "--src", "src", "--peer", "b", "--dst", "dst",
                                   "--length", str(SMALL)] + bound)
    rpc = benchlib.run_json(cpp + ["rpc"] + bound)
    benchlib.log(f"4 KiB write p50 {lat['p50_us']:.0f} us; GetNodeInfo p50 {rpc['p50_us']:.0f} us")
    ca.deregister_region("src")
    cb.deregister_region("dst")
    verify = benchlib.run_json(cpp + ["verify", "--peer-target", b.target, "--peer", "b",
                                      "--size", str(TRANSFER)])
    result = {"bulk": bulk, "lat": lat, "rpc": rpc, "verify": verify, "pollers": info.pollers,
              "device": peer.device, "transport": peer.transport, "lanes": peer.lanes,
              "daemon_side": {"p50_us": benchlib.percentile(daemon_side, 50),
                              "p99_us": benchlib.percentile(daemon_side, 99)}}
    ca.close()
    cb.close()
    a.stop()
    b.stop()
    return result


# ----------------------------------------------------------------- report --

def report(ref: Dict[str, Any], x: Dict[str, Any], args: argparse.Namespace) -> str:
    rows = []
    for s in SLICES:
        med, best = statistics.median(x["bulk"][s]), max(x["bulk"][s])
        ib = statistics.median(ref["bw"][s])
        rows.append([size_name(s), f"{med:.1f}", f"{best:.1f}", f"{ib:.1f}",
                     f"{med / ib:.2f}x", benchlib.verdict(med / ib, TARGET_RATIO)])
    lat, rpc, ds, il = x["lat"], x["rpc"], x["daemon_side"], ref["lat"]
    lat_rows = [
        ["ib_write_lat -s 4096 (reference)", il["iters"], f"{il['typical_us']:.1f} (typical)",
         f"{il['p99_us']:.1f}", "RDMA WRITE + poll, both sides busy-polling"],
        ["xferd 4 KiB Write(wait), C++ client", lat["ops"], f"{lat['p50_us']:.0f}",
         f"{lat['p99_us']:.0f}", "gRPC round trip to the local daemon + RDMA write + completion"],
        ["  of which: bare gRPC GetNodeInfo", rpc["ops"], f"{rpc['p50_us']:.0f}",
         f"{rpc['p99_us']:.0f}", "client -> local daemon (unix socket) -> client"],
        ["  of which: daemon-side (submitted->finished)", args.lat_writes, f"{ds['p50_us']:.0f}",
         f"{ds['p99_us']:.0f}", "engine queue, poller, RDMA write, completion"],
    ]
    v = x["verify"]
    perf_args = ", ".join(f"-s {s} -n {ref['bw_iters'][s]}" for s in SLICES)
    return "\n".join([
        f"1. Bandwidth: {size_name(TRANSFER)} xferd writes between anonymous regions, "
        f"{args.reps} runs per slice size, client wall clock (MiB/s = 2^20 B/s), beside "
        f"ib_write_bw -d {DEV} -x {GID_INDEX} -F, same message size "
        f"({perf_args}), median of "
        f"{args.perf_reps}",
        "",
        table(["slice / message", "xferd median", "xferd best", "ib_write_bw avg",
               "xferd/ib_write_bw", f"target >= {TARGET_RATIO}x"], rows),
        "",
        f"2. Bytes checked: {size_name(v['bytes'])} SHM-to-SHM write at the default slice "
        f"({size_name(v['slice'])}): source FNV-1a64 {v['src_checksum']}, destination "
        f"{v['dst_checksum']} -> " + ("MATCH" if v["match"] else "MISMATCH"),
        "",
        "3. Latency of one 4 KiB write, microseconds",
        "",
        table(["what", "samples", "p50 us", "p99 us", "includes"], lat_rows, align="lrrrl"),
        "   The xferd figure is end to end as an application sees it: a gRPC call to the "
        "local daemon,",
        "   which posts the RDMA WRITE, waits for its completion and replies. ib_write_lat "
        "has no RPC and",
        "   times a ping-pong of writes between two busy-polling processes (typical = median).",
    ])


def main() -> int:
    args = parse_args()
    bins = benchlib.Binaries(args.bazel_bin)
    bins.check()
    bins.import_client()
    children = benchlib.Children()
    workdir = tempfile.mkdtemp(prefix="xfb", dir="/tmp")
    started = time.monotonic()
    try:
        ref = run_perftest(children, args, workdir)
        x = run_xferd(children, bins, args, workdir)
    finally:
        children.stop_all()
    print(f"\n== softroce_bench: xferd verbs transport on Soft-RoCE ({DEV}) vs perftest, "
          "one VM boot ==")
    print(f"guest: {os.cpu_count()} vCPUs (qemu TCG), Linux {platform.release()}; xferd "
          f"--config=opt, transport {x['transport']}, device {x['device']}, pollers "
          f"{x['pollers']}, lanes {x['lanes']}; {datetime.date.today()}\n")
    print(report(ref, x, args) + "\n")
    summary = {
        "bench": "softroce_bench", "quick": args.quick, "vcpus": os.cpu_count(),
        "device": x["device"], "transport": x["transport"], "pollers": x["pollers"],
        "transfer_bytes": TRANSFER,
        "ib_write_bw_mib_s": {str(s): benchlib.summary(v) for s, v in ref["bw"].items()},
        "xferd_mib_s": {str(s): benchlib.summary(v) for s, v in x["bulk"].items()},
        "ratio_vs_ib_write_bw": {str(s): statistics.median(x["bulk"][s])
                                 / statistics.median(ref["bw"][s]) for s in SLICES},
        "ib_write_lat_4k": ref["lat"], "xferd_write_4k": x["lat"], "grpc_rpc": x["rpc"],
        "xferd_daemon_side_4k": x["daemon_side"], "verify": x["verify"],
        "seconds": round(time.monotonic() - started, 1),
    }
    line = json.dumps(summary, separators=(",", ":"))
    print(line)
    if args.json_out:
        with open(args.json_out, "w") as f:
            f.write(line + "\n")
    return 0 if x["verify"]["match"] else 1


if __name__ == "__main__":
    sys.exit(main())
