#!/usr/bin/python3
"""tcp_bench.py: xferd over its TCP transport on loopback, beside references
measured in the same run.

  tests/bench/tcp_bench.py [--quick] [--no-build] [--pollers N] [--toml TEXT]
                           [--encryption [--kernel-tls]]

Builds the daemon, xferctl, the Python client zip and bench_client with
--config=opt, then, on this host:
  1. rounds of: iperf3, one stream on 127.0.0.1, with default settings (THE
     reference) and with -l equal to each slice size (the matched-block
     reference), with -P as many streams as xferd has lanes (the same
     connection count: the reference of the >= 0.9x target) and as many
     single-stream clients at once (stricter), then two xferd daemons (--transport tcp) each
     doing one 1 GiB write between anonymous regions at slice sizes 64 KiB
     to 4 MiB; medians, best, CPU per GiB and per-round ratios;
  2. one 1 GiB SHM-to-SHM write whose bytes are checked by checksum;
  3. 4 KiB writes per second through the Python client, the C++ client (one
     and several in flight) and xferctl processes, beside a bare gRPC unary
     call (GetNodeInfo) on the same daemon;
  4. the daemons' memory: idle RSS beyond registered regions, and peak RSS
     (VmHWM) during 64 MiB and during 1 GiB writes.
With --encryption it instead runs two mTLS pairs that differ only in
transport.tcp_encryption ("off" and "tls"), alternating --size writes at
1 MiB slices, and prints MiB/s and both daemons' CPU s/GiB for each and
the share of plain throughput TLS keeps, after one checksummed write
through TLS lanes. --kernel-tls makes it four pairs: plain, and TLS with
transport.tcp_kernel_tls "off" (user space), "send" (kernel send offload)
and "auto" (kernel send and receive), each checked against what its
daemons logged, and a checksummed write through each TLS pair; for a
kernel with the tls module (the Soft-RoCE VM: softroce_bench.py --tls).
Prints tables, then one JSON line with every figure. A benchmark, not a test:
it checks the bytes, never the speed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import GiB, KiB, MiB, size_name, table  # noqa: E402

SLICES = [64 * KiB, 256 * KiB, 1 * MiB, 4 * MiB]
IPERF3_MAX_BLOCK = 1 * MiB  # iperf3 refuses a larger -l for TCP
SMALL = 4 * KiB
CONCURRENT = 8  # C++ writes in flight
TARGET_RATIO = 0.9
TARGET_IDLE_RSS = 64 * MiB


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="short run (~30 s): fewer, shorter runs")
    p.add_argument("--no-build", action="store_true", help="use the existing --config=opt build")
    p.add_argument("--bazel-bin", help="bazel-bin of an optimized build (default: bazel info)")
    p.add_argument("--pollers", type=int, help="xferd --pollers (default: the daemon's, 2)")
    p.add_argument("--toml", default="", type=benchlib.toml_text,
                   help="extra xferd config for both daemons, e.g. "
                        "'[transport]\\ntcp_socket_buffer = 0' (for investigations)")
    p.add_argument("--size", type=int, default=GiB, help="bytes per bulk write (default 1 GiB)")
    p.add_argument("--reps", type=int, help="bulk runs per slice size (default 5, quick 2)")
    p.add_argument("--json-out", help="also write the JSON summary to this file")
    p.add_argument("--encryption", action="store_true",
                   help="instead: TLS vs plain TCP data lanes (two mTLS pairs, interleaved)")
    p.add_argument("--kernel-tls", action="store_true",
                   help="with --encryption: TLS in user space, with kernel send, and with kernel "
                        "send and receive, beside plain (needs the kernel's tls module)")
    args = p.parse_args()
    args.reps = args.reps or (2 if args.quick else 5)
    args.iperf_seconds = 1 if args.quick else 2
    args.loop_seconds = 0.5 if args.quick else 2.0
    args.xferctl_seconds = 1.0 if args.quick else 3.0
    return args


# ----------------------------------------------------------------- iperf3 --

class Iperf3:
    """iperf3 servers started by pid (one per stream: iperf3 3.12 runs all
    streams of one client in one thread, so parallel streams are parallel
    client processes), and client runs against them."""

    def __init__(self, children: benchlib.Children, seconds: float, servers: int) -> None:
        self.seconds = seconds
        self.servers: List[Tuple[int, subprocess.Popen]] = []
        for _ in range(servers):
            with socket.socket() as probe:  # a free port
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
            server = children.start(["iperf3", "-s", "-B", "127.0.0.1", "-p", str(port)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            benchlib.wait_listening(port, server)
            self.servers.append((port, server))
        self.default_block = 0

    def run(self, block: Optional[int], streams: int = 1, processes: int = 1
            ) -> Tuple[float, float]:
        """`streams` streams from `processes` clients at once (`-P streams /
        processes` each), one per server: the sum of the receivers' MiB/s,
        and the CPU seconds per GiB of servers and clients together."""
        used = self.servers[:processes]
        server_cpu = sum(benchlib.cpu_seconds(server.pid) for _, server in used)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)  # only the clients are reaped
        clients = [subprocess.Popen(
            ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(self.seconds), "-J",
             "-P", str(streams // processes)]
            + (["-l", str(block)] if block else []),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for port, _ in used]
        outputs = [c.communicate(timeout=self.seconds + 30)[0] for c in clients]
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (sum(benchlib.cpu_seconds(server.pid) for _, server in used) - server_cpu
               + after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        mib_s = moved = 0.0
        for output in outputs:
            result = json.loads(output)
            if "error" in result:
                raise SystemExit(f"iperf3: {result['error']}")
            self.default_block = self.default_block or result["start"]["test_start"]["blksize"]
            mib_s += result["end"]["sum_received"]["bits_per_second"] / 8 / MiB
            moved += result["end"]["sum_received"]["bytes"]
        return mib_s, cpu / (moved / GiB)

    def stop(self) -> None:
        for _, server in self.servers:
            benchlib.stop_process(server)


# ------------------------------------------------------------------ xferd --

class Pair:
    """Daemons a and b, a connected to b, with Python clients on both."""

    def __init__(self, children: benchlib.Children, bins: benchlib.Binaries, workdir: str,
                 args: argparse.Namespace, names: Tuple[str, str] = ("a", "b"),
                 flags: Optional[Dict[str, List[str]]] = None, toml: str = "") -> None:
        """`flags`: extra xferd flags per daemon name; `toml` after args.toml."""
        import xferd  # from the build's zip (Binaries.import_client)
        from xferd.v1 import xferd_pb2
        self.pb = xferd_pb2
        extra = ["--pollers", str(args.pollers)] if args.pollers else []
        self.a, self.b = (benchlib.start_daemon(children, bins.xferd, workdir, name, "tcp",
                                                extra + (flags or {}).get(name, []),
                                                args.toml + toml) for name in names)
        self.ca = xferd.Client(self.a.target)
        self.cb = xferd.Client(self.b.target)
        self.idle_at_start = {d.name: self.rss_beyond_registered(c)
                              for d, c in ((self.a, self.ca), (self.b, self.cb))}
        self.peer = self.ca.connect_peer(self.b.address)
        self.info = self.ca.node_info()
        self.cpu: Dict[Tuple[int, int], List[float]] = {}
        self.path = ""  # how its lanes carry records (lanes_path)

    @staticmethod
    def rss_beyond_registered(client: Any) -> int:
        stats = client.stats()
        return stats.resident_bytes - stats.registered_bytes

    def write(self, src: str, dst: str, length: int, slice_size: int = 0) -> Any:
        """A Write with wait through the Python stub; raises on failure."""
        request = self.pb.WriteRequest(src_region=src, peer=self.peer.node_id, dst_region=dst,
                                       length=length,
                                       slice_size=slice_size, wait=True)
        done = self.ca.stub.Write(request, timeout=600)
        if done.state != 3:  # TRANSFER_STATE_DONE
            raise SystemExit(f"transfer failed: {done.error.message}")
        return done

    def cpu_seconds(self) -> float:
        return benchlib.cpu_seconds(self.a.pid) + benchlib.cpu_seconds(self.b.pid)

    def timed_write(self, length: int, slice_size: int) -> float:
        """MiB/s of one bulk write, by the client's clock (gRPC call included);
        both daemons' CPU seconds per GiB go to self.cpu[(length, slice)]."""
        cpu = self.cpu_seconds()
        start = time.perf_counter()
        self.write("bulk_src", "bulk_dst", length, slice_size)
        rate = length / (time.perf_counter() - start) / MiB
        per_gib = (self.cpu_seconds() - cpu) / (length / GiB)
        self.cpu.setdefault((length, slice_size), []).append(per_gib)
        return rate

    def peak_beyond_registered(self) -> Dict[str, int]:
        return {d.name: benchlib.proc_status(d.pid)["VmHWM"] - c.stats().registered_bytes
                for d, c in ((self.a, self.ca), (self.b, self.cb))}

    def reset_peaks(self) -> None:
        for d in (self.a, self.b):
            benchlib.reset_peak_rss(d.pid)

    def close(self) -> None:
        self.ca.close()
        self.cb.close()
        benchlib.stop_daemon(self.a)
        benchlib.stop_daemon(self.b)


def bulk_series(pair: Pair, length: int, reps: int) -> Dict[int, List[float]]:
    return benchlib.interleaved(reps, SLICES, lambda s: pair.timed_write(length, s),
                                f"{size_name(length)} writes, MiB/s")


def rounds(pair: Pair, iperf: Iperf3, args: argparse.Namespace) -> Dict[str, Any]:
    """`args.reps` rounds of: iperf3 default, iperf3 -l each matched block,
    then one xferd write per slice size. Interleaved so that each round's
    ratio compares runs seconds apart, whatever else the host is doing."""
    blocks = [None] + sorted({min(s, IPERF3_MAX_BLOCK) for s in SLICES})
    lanes = pair.peer.lanes  # xferd's TCP connections: one per poller
    # (block, streams, processes): iperf3 -l each block; -P lanes, the issue's
    # reference; and lanes single-stream processes, a stricter one.
    runs = [(b, 1, 1) for b in blocks]
    if lanes > 1:
        runs += [(None, lanes, 1), (None, lanes, lanes)]
    ref: Dict[Tuple[Optional[int], int, int], Dict[str, List[float]]] = {
        r: {"mib_s": [], "cpu_s_per_gib": []} for r in runs}
    xf: Dict[int, List[float]] = {s: [] for s in SLICES}
    for rep in range(args.reps):
        for r in runs:
            mib_s, cpu = iperf.run(*r)
            ref[r]["mib_s"].append(mib_s)
            ref[r]["cpu_s_per_gib"].append(cpu)
        for s in SLICES:
            xf[s].append(pair.timed_write(args.size, s))
        benchlib.log(f"round {rep + 1}/{args.reps}, MiB/s: iperf3 "
                     + ", ".join(f"{iperf_label(*r)} {ref[r]['mib_s'][-1]:.0f}" for r in runs)
                     + "; xferd " + ", ".join(f"{size_name(s)} {xf[s][-1]:.0f}" for s in SLICES))
    return {"ref": ref, "xf": xf}


def iperf_label(block: Optional[int], streams: int, processes: int) -> str:
    if processes > 1:
        return f"{processes} processes"
    if streams > 1:
        return f"-P {streams}"
    return f"-l {size_name(block)}" if block else "default"


def run_bulk(pair: Pair, iperf: Iperf3, args: argparse.Namespace) -> Dict[str, Any]:
    ca, cb = pair.ca, pair.cb
    ca.register_region("bulk_src", args.size)
    cb.register_region("bulk_dst", args.size, remote_write=True)
    benchlib.log("warm-up write (resolves the destination, fills socket buffers)")
    pair.write("bulk_src", "bulk_dst", args.size)
    small_len = min(64 * MiB, args.size)
    pair.reset_peaks()
    small = bulk_series(pair, small_len, 2 if args.quick else 3)
    peak_small = pair.peak_beyond_registered()
    pair.reset_peaks()
    big = rounds(pair, iperf, args)
    peak_big = pair.peak_beyond_registered()
    registered = ca.stats().registered_bytes
    ca.deregister_region("bulk_src")
    cb.deregister_region("bulk_dst")
    return {"small_length": small_len, "small": small, "big": big["xf"], "ref": big["ref"],
            "peak_small": peak_small, "peak_big": peak_big, "registered": registered}


# ----------------------------------------------------------- small writes --

def run_small(pair: Pair, bins: benchlib.Binaries, args: argparse.Namespace) -> List[Dict]:
    """4 KiB writes and bare unary calls, per client; each row a dict."""
    ca, pb = pair.ca, pair.pb
    ca.register_region("small_src", MiB)
    pair.cb.register_region("small_dst", MiB, remote_write=True)
    pair.write("small_src", "small_dst", SMALL)  # resolves the destination
    secs = args.loop_seconds
    rows: List[Dict] = []

    def add(client: str, op: str, kind: str, figures: Dict[str, float]) -> None:
        family = client.split()[0]  # python, C++, xferctl: compared with its own unary row
        if kind == "part":
            family = rows[-1]["family"]
        rows.append({"client": client, "family": family, "op": op, "kind": kind, **figures})
        benchlib.log(f"{client.strip()}: {op}: {figures['rate']:.0f}/s, p50 "
                     f"{figures['p50_us']:.0f} us")

    info = pb.GetNodeInfoRequest()
    add("python stub", "GetNodeInfo", "unary",
        benchlib.timed_loop(lambda: ca.stub.GetNodeInfo(info, timeout=10), secs))
    daemon_side: List[float] = []

    def python_write() -> None:
        done = pair.write("small_src", "small_dst", SMALL)
        daemon_side.append(
            (done.finished_at.ToNanoseconds() - done.submitted_at.ToNanoseconds()) / 1e3)

    add("python stub", "Write(wait=True) 4 KiB", "write", benchlib.timed_loop(python_write, secs))
    add("  of which, in the daemon", "submitted -> finished (engine, TCP lane, ack)", "part",
        benchlib.loop_figures(daemon_side, secs))
    # The two patterns the README compares, taking turns (the host's load
    # reaches both alike).
    waited, then_wait = benchlib.alternating_loops(
        [lambda: ca.write("small_src", "b", "small_dst", SMALL, wait=True),
         lambda: ca.write("small_src", "b", "small_dst", SMALL).wait(10)], 2 * secs)
    add("python xferd.Client", "write(wait=True) 4 KiB", "write", waited)
    add("python xferd.Client", "write().wait() 4 KiB", "write", then_wait)
    cpp = [bins.bench_client, "--target", pair.a.target]
    loop = ["--seconds", str(secs)]
    add("C++ Client", "GetNodeInfo", "unary", benchlib.run_json(cpp + ["rpc"] + loop))
    write = ["write", "--src", "small_src", "--peer", "b", "--dst", "small_dst",
             "--length", str(SMALL)] + loop
    add("C++ Client", "Write(wait) 4 KiB", "write", benchlib.run_json(cpp + write))
    add(f"C++ Client, {CONCURRENT} threads", f"Write(wait) 4 KiB, {CONCURRENT} in flight",
        "write", benchlib.run_json(cpp + write + ["--threads", str(CONCURRENT)]))
    def xferctl(*extra: str) -> None:
        subprocess.run([bins.xferctl, "--target", pair.a.target, *extra], check=True,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)

    add("xferctl (process per op)", "xferctl info", "unary",
        benchlib.timed_loop(lambda: xferctl("info"), args.xferctl_seconds))
    add("xferctl (process per op)", "xferctl write 4 KiB", "write",
        benchlib.timed_loop(lambda: xferctl("write", "small_src", "b", "small_dst", "--length",
                                            str(SMALL)), args.xferctl_seconds))
    ca.deregister_region("small_src")
    pair.cb.deregister_region("small_dst")
    return rows


def run_verify(pair: Pair, bins: benchlib.Binaries, size: int) -> Dict[str, Any]:
    """SHM-to-SHM writes of `size` at the daemon's default slice size into
    the same regions, three times, both mappings checksummed by bench_client
    after each."""
    benchlib.log(f"checksummed {size_name(size)} SHM-to-SHM writes")
    return benchlib.run_json([bins.bench_client, "--target", pair.a.target, "verify",
                              "--peer-target", pair.b.target, "--peer", pair.peer.node_id,
                              "--size", str(size), "--writes", "3"])


# ----------------------------------------------------------------- report --

def mib(value: float) -> str:
    return f"{value:,.0f}"


def figures(mib_s: List[float], cpu: List[float]) -> Dict[str, Any]:
    """A throughput series (median, best, samples) and its CPU s/GiB (median, samples)."""
    return {**benchlib.summary(mib_s), "cpu_s_per_gib": statistics.median(cpu),
            "cpu_samples": cpu}


def report_bulk(ref: Dict[str, Any], xf: Dict[int, Dict[str, Any]], bulk: Dict[str, Any],
                verify: Dict[str, Any], args: argparse.Namespace) -> str:
    default, parallel, streams = ref["default"], ref["parallel"], ref["streams"]
    streams_p = ref["streams_p"]
    rows = []
    for s in SLICES:
        x, matched = xf[s], ref["matched"][min(s, IPERF3_MAX_BLOCK)]
        note = " (1 MiB: iperf3 max)" if s > IPERF3_MAX_BLOCK else ""
        rows.append([size_name(s), mib(x["median"]), mib(x["best"]), f"{x['cpu_s_per_gib']:.2f}",
                     mib(matched["median"]) + note, f"{matched['cpu_s_per_gib']:.2f}",
                     f"{x['ratio_default']:.2f}x", f"{x['ratio_matched']:.2f}x",
                     f"{x['ratio_streams']:.2f}x", f"{x['ratio_parallel']:.2f}x",
                     benchlib.verdict(x["ratio_streams"], TARGET_RATIO)])
    return "\n".join([
        f"1. Bulk throughput: one {size_name(args.size)} write between anonymous regions per slice "
        f"size in each of {args.reps} rounds; each round also runs iperf3 (1 stream, "
        f"127.0.0.1, {args.iperf_seconds} s) with default settings and with -l = slice size",
        "   MiB/s = 2^20 B/s, xferd by the client's wall clock with the gRPC call; "
        "CPU = user+system s per GiB moved, of both daemons / of iperf3 server+client",
        f"   THE reference: iperf3 default settings (-l {size_name(ref['default_block'])}): median "
        f"{mib(default['median'])} MiB/s, CPU {default['cpu_s_per_gib']:.2f} s/GiB "
        f"(rounds: {', '.join(mib(v) for v in default['samples'])})",
        "   the fair one: iperf3 -l = slice size (same write size). Ratios: median over the "
        "rounds of xferd / the iperf3 run of the same round",
        f"   the same connection count (xferd opens {streams} TCP connections, one per poller), "
        f"the target's reference: iperf3 -P {streams}, median {mib(streams_p['median'])} MiB/s, "
        f"CPU {streams_p['cpu_s_per_gib']:.2f} s/GiB; stricter, since iperf3 runs all of one "
        f"client's streams on one thread: {streams} single-stream clients at once, median "
        f"{mib(parallel['median'])} MiB/s, CPU {parallel['cpu_s_per_gib']:.2f} s/GiB",
        "",
        table(["slice", "xferd median", "xferd best", "xferd CPU", "iperf3 -l slice",
               "iperf3 CPU", "xferd/iperf3 default", "xferd/iperf3 matched",
               f"xferd/iperf3 -P {streams}", f"xferd/iperf3 x{streams} processes",
               f"target >= {TARGET_RATIO}x -P {streams}"], rows),
        "",
        "   Each round, MiB/s (the host's load shows as whole rounds that are slower):",
        "",
        table(["round", "iperf3 default"] + [f"iperf3 -l {size_name(b)}" for b in ref["blocks"]]
              + [f"iperf3 -P {streams}", f"iperf3 x{streams}"]
              + [f"xferd {size_name(s)}" for s in SLICES],
              [[r + 1, mib(default["samples"][r])]
               + [mib(ref["matched"][b]["samples"][r]) for b in ref["blocks"]]
               + [mib(streams_p["samples"][r]), mib(parallel["samples"][r])]
               + [mib(xf[s]["samples"][r]) for s in SLICES] for r in range(args.reps)]),
        "",
        f"   {size_name(bulk['small_length'])} writes (same daemons; memory phase): "
        + ", ".join(f"{size_name(s)} median {mib(statistics.median(bulk['small'][s]))}"
                    for s in SLICES) + " MiB/s",
        "",
        f"2. Bytes checked: {size_name(verify['bytes'])} SHM-to-SHM writes at the default slice "
        f"({size_name(verify['slice'])}), each checksummed: last source FNV-1a64 "
        f"{verify['src_checksum']}, destination {verify['dst_checksum']} -> "
        + ("MATCH" if verify["match"] else "MISMATCH")
        + f" (MiB/s: first write {mib(verify['bytes'] / verify['write_seconds'][0] / MiB)},"
        f" which first-touches the SHM pages; later {mib(verify['bytes'] / verify['seconds'] / MiB)})",
    ])


def report_small(rows: List[Dict], secs: float) -> str:
    unary = {r["family"]: r["rate"] for r in rows if r["kind"] == "unary"}
    out = []
    for r in rows:
        rel = {"write": f"{r['rate'] / unary[r['family']]:.2f}x", "unary": "(reference)",
               "part": ""}[r["kind"]]
        rate = "" if r["kind"] == "part" else f"{r['rate']:,.0f}"
        out.append([r["client"], r["op"], rate, f"{r['p50_us']:,.0f}",
                    f"{r['p99_us']:,.0f}", r["ops"], rel])
    return "\n".join([
        f"3. Small writes: 4 KiB Write with wait, one after the other unless noted; each client "
        f"over the daemon's unix socket, {secs:g} s per row (xferctl rows: process start, "
        "channel set-up and one call per op)",
        "",
        table(["client", "operation", "ops/s", "p50 us", "p99 us", "ops",
               "vs same client's unary"], out, align="ll"),
        "   Write(wait=True) and write(wait=True) are one unary call whose reply comes when the "
        "transfer ended;",
        "   write().wait() is a Write whose reply lingers up to the client's linger (10 ms) for "
        "the end, so wait() mostly makes no call;",
        f"   write().wait() / write(wait=True), taking turns: {wait_ratio(rows):.2f}x "
        "(target: no less than 1 within the noise)",
    ])


def wait_ratio(rows: List[Dict]) -> float:
    """write().wait()'s rate over write(wait=True)'s (the Python client)."""
    rate = {r["op"]: r["rate"] for r in rows if r["client"] == "python xferd.Client"}
    return rate["write().wait() 4 KiB"] / rate["write(wait=True) 4 KiB"]


def report_memory(pair_idle: Dict[str, int], idle_end: Dict[str, int], bulk: Dict[str, Any],
                  args: argparse.Namespace) -> str:
    rows = []
    for name in ("a", "b"):
        rows.append([name, mib(pair_idle[name] / MiB), mib(idle_end[name] / MiB),
                     mib(bulk["peak_small"][name] / MiB), mib(bulk["peak_big"][name] / MiB),
                     benchlib.verdict(max(pair_idle[name], idle_end[name]), TARGET_IDLE_RSS,
                                      higher_is_better=False)])
    return "\n".join([
        "4. Memory, MiB beyond registered regions (RSS from Stats.resident_bytes, peak = VmHWM "
        "of /proc/<pid>/status, reset before each phase; registered during the writes: "
        f"{size_name(bulk['registered'])} per daemon)",
        "",
        table(["daemon", "idle at start", "idle after the run",
               f"peak, {size_name(bulk['small_length'])} writes",
               f"peak, {size_name(args.size)} writes", "idle < 64 MiB"], rows),
        "   a = sender, b = receiver. Equal peaks for both sizes mean no memory grows with the "
        "transfer size.",
    ])


def host_line(pair: Pair, args: argparse.Namespace, load: List[str]) -> str:
    return (f"host: {os.cpu_count()} CPUs, Linux {platform.release()}, load average "
            f"{load[0]} at start, {load[1]} at end; xferd --config=opt, transport "
            f"{pair.info.transport}, pollers {pair.info.pollers}, default slice "
            f"{size_name(pair.info.default_slice_size)}, lanes {pair.peer.lanes}"
            + (f", extra config {args.toml!r}" if args.toml else ""))


# ------------------------------------------------------------------- main --

def measure(children: benchlib.Children, bins: benchlib.Binaries, workdir: str,
            args: argparse.Namespace) -> Dict[str, Any]:
    """Every figure: the bulk rounds (iperf3 and xferd interleaved), then the
    small writes, the checksummed write and the idle memory."""
    load = [benchlib.load_average()]
    benchlib.log("xferd daemons")
    pair = Pair(children, bins, workdir, args)
    iperf = Iperf3(children, args.iperf_seconds, servers=pair.peer.lanes)
    bulk = run_bulk(pair, iperf, args)
    iperf.stop()
    small = run_small(pair, bins, args)
    verify = run_verify(pair, bins, args.size)
    idle_end = {"a": pair.rss_beyond_registered(pair.ca),
                "b": pair.rss_beyond_registered(pair.cb)}
    load.append(benchlib.load_average())
    default, lanes = bulk["ref"][(None, 1, 1)], pair.peer.lanes
    streams_p = bulk["ref"][(None, lanes, 1)]
    parallel = bulk["ref"][(None, lanes, lanes)]
    ref = {"default": figures(default["mib_s"], default["cpu_s_per_gib"]),
           "parallel": figures(parallel["mib_s"], parallel["cpu_s_per_gib"]),
           "streams_p": figures(streams_p["mib_s"], streams_p["cpu_s_per_gib"]),
           "streams": lanes, "default_block": iperf.default_block,
           "blocks": [b for b, n, p in bulk["ref"] if b is not None],
           "matched": {b: figures(v["mib_s"], v["cpu_s_per_gib"])
                       for (b, n, p), v in bulk["ref"].items() if b is not None}}

    def ratio(xs: List[float], refs: List[float]) -> float:
        return statistics.median(x / r for x, r in zip(xs, refs))

    xf = {}
    for s, v in bulk["big"].items():
        matched = bulk["ref"][(min(s, IPERF3_MAX_BLOCK), 1, 1)]["mib_s"]
        xf[s] = {**figures(v, pair.cpu[(args.size, s)]),
                 "ratio_default": ratio(v, default["mib_s"]),
                 "ratio_matched": ratio(v, matched),
                 "ratio_parallel": ratio(v, parallel["mib_s"]),
                 "ratio_streams": ratio(v, streams_p["mib_s"])}
    pair.close()
    return {"ref": ref, "xf": xf, "bulk": bulk, "small": small, "verify": verify,
            "idle_end": idle_end, "load": load, "pair": pair}


# ------------------------------------------------------------ encryption --

# What each pair of the encryption comparison sets, and (--kernel-tls) the
# path its lanes must log ("data lanes with b: ...").
Variant = Tuple[str, str, str, str]  # name, tcp_encryption, tcp_kernel_tls, expected path
VARIANTS: List[Variant] = [("plain", "off", "auto", "unencrypted"), ("tls", "tls", "auto", "")]
KERNEL_VARIANTS: List[Variant] = [
    ("plain", "off", "auto", "unencrypted"),
    ("tls user space", "tls", "off", "tls (user space)"),
    ("tls kernel send", "tls", "send", "tls (kernel send offload)"),
    ("tls kernel send+receive", "tls", "auto", "tls (kernel send and receive)"),
]


def lanes_path(pair: Pair) -> str:
    """How the pair's lanes carry records, as both daemons logged it
    ("tls (kernel send and receive)", ...), with any lane's refusal of
    kernel receive."""
    paths = set()
    for daemon in (pair.a, pair.b):
        with open(daemon.log_path, encoding="utf-8", errors="replace") as log:
            for line in log:
                if "receive stays in user space" in line:
                    paths.add("refused: " + line.split("user space: ", 1)[-1].strip())
                elif "data lanes with " in line:
                    paths.add(line.rsplit(": ", 1)[-1].strip())
    return ", ".join(sorted(paths)) or "unencrypted"


def ensure_tls_module() -> None:
    """--kernel-tls: the kernel's tls module, loaded now (the daemons would
    load it themselves as root) so that a kernel without one fails here. In
    the VM also the CPU's AES-GCM drivers, which udev loads on a booted
    Debian and the VM (no udev) lacks: else the kernel's records would be
    encrypted by its generic C code, the user-space ones with AES-NI."""
    if os.environ.get("XFERD_VM") == "1":
        for module in ("aesni_intel", "ghash_clmulni_intel"):
            subprocess.run(["modprobe", module], check=False)
    with open("/proc/sys/net/ipv4/tcp_available_ulp", encoding="utf-8") as f:
        if "tls" in f.read().split():
            return
    if subprocess.run(["modprobe", "tls"], check=False).returncode != 0:
        raise SystemExit("--kernel-tls: this kernel has no tls module (modprobe tls failed)")


def start_variants(children: benchlib.Children, bins: benchlib.Binaries, workdir: str,
                   args: argparse.Namespace, variants: List[Variant]) -> Dict[str, Pair]:
    """One mTLS pair per variant, its regions registered and one write done."""
    sys.path.insert(0, os.path.join(benchlib.REPO, "tests", "integration", "python"))
    import certs  # the tests' CA, made with openssl
    ca = certs.Ca(os.path.join(workdir, "ca"), "bench-ca")
    pairs = {}
    for i, (name, encryption, kernel, expected) in enumerate(variants):
        names = (f"v{i}-a", f"v{i}-b")
        flags = {n: ca.issue(n).daemon_args(ca) for n in names}
        pair = Pair(children, bins, workdir, args, names, flags,
                    f'\n[transport]\ntcp_encryption = "{encryption}"\n'
                    f'tcp_kernel_tls = "{kernel}"\n')
        if f"data lanes: {'TLS' if encryption == 'tls' else 'unencrypted'}" not in \
                pair.info.transport_reason:
            raise SystemExit(f"{name}: {pair.info.transport_reason}")
        pair.ca.register_region("bulk_src", args.size)
        pair.cb.register_region("bulk_dst", args.size, remote_write=True)
        pair.write("bulk_src", "bulk_dst", args.size)  # warm-up; lanes connected
        pair.path = lanes_path(pair)
        if expected and pair.path != expected:
            raise SystemExit(f"{name}: lanes are {pair.path!r}, not {expected!r}")
        pairs[name] = pair
    return pairs


def run_encryption(children: benchlib.Children, bins: benchlib.Binaries, workdir: str,
                   args: argparse.Namespace) -> Dict[str, Any]:
    """Pairs that differ only in transport.tcp_encryption (and, with
    --kernel-tls, tcp_kernel_tls), written to in alternation (the same host
    load for all); MiB/s and both daemons' CPU seconds per GiB, and the
    bytes of a checksummed write through every TLS pair checked."""
    if args.kernel_tls:
        ensure_tls_module()
    pairs = start_variants(children, bins, workdir, args,
                           KERNEL_VARIANTS if args.kernel_tls else VARIANTS)
    slice_size = 1 * MiB
    rates: Dict[str, List[float]] = {name: [] for name in pairs}
    for rep in range(args.reps):
        for name, pair in pairs.items():
            rates[name].append(pair.timed_write(args.size, slice_size))
        benchlib.log(f"round {rep + 1}/{args.reps}, MiB/s: " +
                     ", ".join(f"{name} {rates[name][-1]:.0f}" for name in pairs))
    result: Dict[str, Any] = {}
    for name, pair in pairs.items():
        pair.ca.deregister_region("bulk_src")
        pair.cb.deregister_region("bulk_dst")
        result[name] = {**figures(rates[name], pair.cpu[(args.size, slice_size)]),
                        "lanes": pair.path}
        if name != "plain":  # bytes through TLS lanes
            verify = run_verify(pair, bins, args.size)
            if not verify.get("match"):
                raise SystemExit(f"{name}: TLS lanes corrupted the checksummed write: {verify}")
            result[name]["verify"] = verify
    return result


def report_encryption(result: Dict[str, Any], args: argparse.Namespace) -> str:
    plain = result["plain"]["median"]
    lines = [f"{size_name(args.size)} writes, 1 MiB slices, {args.reps} rounds alternating; "
             "CPU = both daemons; a checksummed write through each TLS pair matched"]
    for name, r in result.items():
        lines.append(f"  {name + ':':25} {mib(r['median']):>7} MiB/s (best {mib(r['best'])}), "
                     f"{r['cpu_s_per_gib']:.2f} CPU s/GiB, {r['median'] / plain:.0%} of plain"
                     f"  [{r['lanes']}]")
    return "\n".join(lines)


def main() -> int:
    args = parse_args()
    bins = benchlib.build(args.no_build, args.bazel_bin)
    bins.import_client()
    children = benchlib.Children()
    workdir = tempfile.mkdtemp(prefix="xfb", dir="/tmp")
    if args.encryption:
        try:
            result = run_encryption(children, bins, workdir, args)
        finally:
            children.stop_all()
            shutil.rmtree(workdir, ignore_errors=True)
        print("\n== tcp_bench --encryption: TLS vs plain TCP data lanes, same run ==")
        print(f"host: {os.cpu_count()} CPUs, Linux {platform.release()}")
        print(report_encryption(result, args))
        benchlib.emit_summary({"bench": "tcp_bench_encryption", "cpus": os.cpu_count(),
                               "transfer_bytes": args.size, **result}, args.json_out)
        return 0
    started = time.monotonic()
    try:
        m = measure(children, bins, workdir, args)
    finally:
        children.stop_all()
        shutil.rmtree(workdir, ignore_errors=True)
    pair, ref, bulk = m["pair"], m["ref"], m["bulk"]
    print("\n== tcp_bench: xferd TCP transport on loopback vs iperf3, same run ==")
    print(host_line(pair, args, m["load"]) + "\n")
    print(report_bulk(ref, m["xf"], bulk, m["verify"], args) + "\n")
    print(report_small(m["small"], args.loop_seconds) + "\n")
    print(report_memory(pair.idle_at_start, m["idle_end"], bulk, args) + "\n")
    summary = {
        "bench": "tcp_bench", "quick": args.quick, "cpus": os.cpu_count(),
        "load_average": m["load"], "pollers": pair.info.pollers, "lanes": pair.peer.lanes,
        "extra_config": args.toml, "transfer_bytes": args.size,
        "iperf3_default": ref["default"], "iperf3_default_block": ref["default_block"],
        "iperf3_parallel": ref["parallel"], "iperf3_parallel_streams": ref["streams"],
        "iperf3_P": ref["streams_p"],
        "iperf3_matched": {str(b): v for b, v in ref["matched"].items()},
        "xferd": {str(s): v for s, v in m["xf"].items()},
        "xferd_64mib_mib_s": {str(s): benchlib.summary(v) for s, v in bulk["small"].items()},
        "verify": m["verify"], "small_ops": m["small"], "wait_vs_wait_true": wait_ratio(m["small"]),
        "memory_bytes": {"idle_at_start": pair.idle_at_start, "idle_end": m["idle_end"],
                         "peak_64mib": bulk["peak_small"], "peak_big": bulk["peak_big"],
                         "registered_during_writes": bulk["registered"]},
        "seconds": round(time.monotonic() - started, 1),
    }
    benchlib.emit_summary(summary, args.json_out)
    return 0 if m["verify"]["match"] else 1


if __name__ == "__main__":
    sys.exit(main())
