"""Shared pieces of the benchmark programs in tests/bench (tcp_bench.py, the
Soft-RoCE guest script): building the optimized binaries, running daemons
(through the tests' launcher, tests/testing/python/daemons.py) and reference
tools as child processes (stopped by their own pids, never by name), timing
loops, reading a process's memory, and printing tables.

Benchmarks print figures; they never assert on them.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Awaitable, Callable, Dict, List, Optional, Sequence, Tuple

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests", "testing", "python"))
import daemons  # noqa: E402  (the tests' daemon launcher)

PYTHON = "/usr/bin/python3"  # Debian's grpcio and protobuf live here, not in pyenv
TARGETS = ["//daemon:xferd", "//client/cpp:xferctl", "//client/python:xferd_zip",
           "//tests/bench:bench_client", "//tests/bench:ring_bench_client"]


def log(message: str) -> None:
    """Progress on stderr, so stdout holds only the report."""
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------ build --

class Binaries:
    """Paths of the optimized build outputs under one bazel-bin directory."""

    def __init__(self, bazel_bin: str) -> None:
        self.bazel_bin = bazel_bin
        self.xferd = os.path.join(bazel_bin, "daemon", "xferd")
        self.xferctl = os.path.join(bazel_bin, "client", "cpp", "xferctl")
        self.bench_client = os.path.join(bazel_bin, "tests", "bench", "bench_client")
        self.ring_bench_client = os.path.join(bazel_bin, "tests", "bench", "ring_bench_client")
        self.python_zip = os.path.join(bazel_bin, "client", "python", "xferd.zip")

    def check(self) -> None:
        for path in (self.xferd, self.xferctl, self.bench_client, self.ring_bench_client,
                     self.python_zip):
            if not os.path.exists(path):
                raise SystemExit(f"missing {path}: build with bazel build --config=opt "
                                 + " ".join(TARGETS))

    def import_client(self) -> None:
        """Makes `import xferd` load the zip of this build."""
        if self.python_zip not in sys.path:
            sys.path.insert(0, self.python_zip)


def guest_start(bazel_bin: str, prefix: str) -> "tuple[Binaries, Children, str]":
    """Inside the VM: the build's binaries (with `import xferd` ready), the
    children registry and a fresh work directory under /tmp."""
    bins = Binaries(bazel_bin)
    bins.check()
    bins.import_client()
    return bins, Children(), tempfile.mkdtemp(prefix=prefix, dir="/tmp")


def build(skip: bool, bazel_bin: Optional[str]) -> Binaries:
    """Builds TARGETS with --config=opt (-c opt) and returns their paths."""
    if not skip:
        log("bazel build --config=opt " + " ".join(TARGETS))
        subprocess.run(["bazel", "build", "--config=opt", *TARGETS], cwd=REPO, check=True)
    if bazel_bin is None:
        bazel_bin = subprocess.run(["bazel", "info", "--config=opt", "bazel-bin"], cwd=REPO,
                                   check=True, capture_output=True, text=True).stdout.strip()
    binaries = Binaries(bazel_bin)
    binaries.check()
    return binaries


def run_guest_in_vm(guest: str, bins: Binaries, extra: Sequence[str], timeout: int,
                    json_out: Optional[str]) -> int:
    """Boots the Soft-RoCE VM once (tests/softroce/vm_run.sh) and runs the
    guest script `guest` (a path in the repository) there with `extra`
    arguments; its report streams to our stdout. The JSON summary it leaves
    is copied to `json_out`. Returns the guest's exit status (125: the VM
    failed)."""
    with tempfile.TemporaryDirectory(prefix="softroce-bench-") as results:
        summary = os.path.join(results, "summary.json")
        cmd = [os.path.join(REPO, "tests", "softroce", "vm_run.sh"), "-t", str(timeout),
               "--rw", results, "-C", REPO, "--", PYTHON, guest, "--bazel-bin", bins.bazel_bin,
               "--json-out", summary, *extra]
        log(" ".join(cmd))
        # vm_run.sh streams the guest's output to our stdout and stops its own
        # qemu on SIGTERM; it is our only child, and our signals go to it.
        vm = subprocess.Popen(cmd, stdin=subprocess.DEVNULL)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, lambda signum, _frame: vm.send_signal(signal.SIGTERM))
        status = vm.wait()
        if json_out and os.path.exists(summary):
            shutil.copyfile(summary, json_out)
    return status


# -------------------------------------------------------------- processes --

def stop_process(proc: subprocess.Popen, timeout: float = 20.0) -> Optional[int]:
    """SIGTERM to this child (by its pid), SIGKILL if it ignores it."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


class Children:
    """Every child a benchmark starts, so all of them stop on any exit
    (including SIGTERM/SIGINT to the benchmark)."""

    def __init__(self) -> None:
        self.procs: List[subprocess.Popen] = []
        self.dirs: List[str] = []  # removed once every child stopped
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self.stop_all()
        raise SystemExit(128 + signum)

    def start(self, args: Sequence[str], **kwargs: Any) -> subprocess.Popen:
        proc = subprocess.Popen(list(args), stdin=subprocess.DEVNULL, **kwargs)
        self.procs.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in reversed(self.procs):
            stop_process(proc)
        self.procs.clear()
        for path in self.dirs:
            shutil.rmtree(path, ignore_errors=True)
        self.dirs.clear()


def wait_listening(port: int, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    """Waits until a TCP socket listens on `port` (any address, from
    /proc/net/tcp{,6}), without connecting: iperf3 and perftest servers would
    take a probe for their client."""
    suffix = f":{port:04X}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        for table_path in ("/proc/net/tcp", "/proc/net/tcp6"):
            with open(table_path) as f:
                next(f)
                if any(fields[1].endswith(suffix) and fields[3] == "0A"
                       for fields in (line.split() for line in f)):
                    return
        time.sleep(0.05)
    raise SystemExit(f"{proc.args[0]} did not listen on port {port}")


def proc_status(pid: int) -> Dict[str, int]:
    """VmRSS, VmHWM (peak RSS), ... of a process, in bytes."""
    values: Dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            parts = rest.split()
            if key.startswith("Vm") and len(parts) == 2 and parts[1] == "kB":
                values[key] = int(parts[0]) * KiB
    return values


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a running process has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load_average() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def reset_peak_rss(pid: int) -> None:
    """Restarts VmHWM from the current RSS (clear_refs 5, Linux >= 4.0)."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


def start_daemon(children: Children, binary: str, workdir: str, name: str, transport: str,
                 args: Sequence[str] = (), toml: str = "") -> daemons.Daemon:
    """Runs one xferd child through the tests' launcher with the daemon's
    defaults (pollers, slice size), info logs and `toml` as extra
    configuration; returns it once it serves."""
    daemon = daemons.Daemon(name, workdir, binary, pollers=None, slice_size=None,
                            extra_args=args, config_extra=toml, transport=transport,
                            log_level="info")
    children.procs.append(daemon.spawn())  # stopped with the others on any exit
    try:
        daemon.wait_ready(timeout=60.0)
    except AssertionError as e:
        raise SystemExit(f"xferd {name} did not start: {e}") from None
    return daemon


def start_pair(children: Children, bins: Binaries, workdir: str, transport: str = "tcp"
               ) -> Tuple[daemons.Daemon, daemons.Daemon, Any, Any]:
    """Daemons a and b on `transport` (loopback, or the VM's rxe0), their
    defaults, a connected to b; and a client to each (the client imported
    by bins.import_client())."""
    import xferd
    a = start_daemon(children, bins.xferd, workdir, "a", transport)
    b = start_daemon(children, bins.xferd, workdir, "b", transport)
    ca, cb = xferd.Client(a.target), xferd.Client(b.target)
    ca.connect_peer(b.address)
    return a, b, ca, cb


def stop_daemon(daemon: daemons.Daemon) -> None:
    """SIGTERM; reports (never raises) an unclean exit or files left behind."""
    try:
        daemon.stop()
    except AssertionError as e:
        log(f"xferd {daemon.name}: {e}")


class VerbsPair:
    """Daemons a and b on the VM's rxe0 (verbs, RDMA required), a client to
    each, a connected to b (`peer`, and a's `info`)."""

    def __init__(self, children: Children, bins: Binaries, workdir: str) -> None:
        import xferd
        from xferd.v1 import xferd_pb2
        self.pb = xferd_pb2
        self.a = start_daemon(children, bins.xferd, workdir, "a", "verbs")
        self.b = start_daemon(children, bins.xferd, workdir, "b", "verbs")
        self.ca, self.cb = xferd.Client(self.a.target), xferd.Client(self.b.target)
        self.peer = self.ca.connect_peer(self.b.address)
        self.info = self.ca.node_info()
        log(f"xferd a -> b connected: transport {self.peer.transport}, device "
            f"{self.peer.device}, lanes {self.peer.lanes}")

    def close(self) -> None:
        self.ca.close()
        self.cb.close()
        stop_daemon(self.a)
        stop_daemon(self.b)


# ----------------------------------------------------------------- timing --

def timed_loop(op: Callable[[], Any], seconds: float, max_ops: int = 0) -> Dict[str, float]:
    """Runs `op` back to back for `seconds` (or `max_ops` times): the rate and
    latency percentiles, in the same keys as bench_client's JSON."""
    latencies: List[float] = []
    start = time.perf_counter()
    while time.perf_counter() - start < seconds and (max_ops == 0 or len(latencies) < max_ops):
        begin = time.perf_counter()
        op()
        latencies.append((time.perf_counter() - begin) * 1e6)
    elapsed = time.perf_counter() - start
    return loop_figures(latencies, elapsed)


async def aio_rate(op: Callable[[], Awaitable[Any]], seconds: float, in_flight: int) -> float:
    """Calls per second of `op` with `in_flight` tasks calling it back to back."""
    count = 0
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal count
        while time.perf_counter() < deadline:
            await op()
            count += 1

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    return count / (time.perf_counter() - start)


def alternating_loops(ops: List[Callable[[], Any]], seconds: float, rounds: int = 4
                      ) -> List[Dict[str, float]]:
    """timed_loop for each of `ops`, taking turns for `rounds` rounds of
    seconds / rounds each, so that load changes on a shared host reach all of
    them alike: each op's latencies of every round, pooled."""
    latencies: List[List[float]] = [[] for _ in ops]
    elapsed = [0.0] * len(ops)
    for _ in range(rounds):
        for i, op in enumerate(ops):
            start = time.perf_counter()
            while time.perf_counter() - start < seconds / rounds:
                begin = time.perf_counter()
                op()
                latencies[i].append((time.perf_counter() - begin) * 1e6)
            elapsed[i] += time.perf_counter() - start
    return [loop_figures(lat, e) for lat, e in zip(latencies, elapsed)]


def loop_figures(latencies_us: List[float], elapsed: float) -> Dict[str, float]:
    ordered = sorted(latencies_us)
    return {"ops": len(ordered), "seconds": elapsed, "rate": len(ordered) / elapsed,
            "p50_us": percentile(ordered, 50), "p99_us": percentile(ordered, 99),
            "min_us": ordered[0], "max_us": ordered[-1]}


def percentile(ordered: List[float], p: float) -> float:
    """Nearest-rank percentile of an already sorted list (same as bench_client)."""
    i = int(p / 100.0 * (len(ordered) - 1) + 0.5)
    return ordered[min(i, len(ordered) - 1)]


def interleaved(reps: int, keys: Sequence[Any], run: Callable[[Any], float],
                what: str) -> Dict[Any, List[float]]:
    """`reps` rounds of run(key) over every key, the keys interleaved so that
    a change of host load spreads over all of them."""
    results: Dict[Any, List[float]] = {k: [] for k in keys}
    for rep in range(reps):
        for k in keys:
            results[k].append(run(k))
        log(f"{what}, round {rep + 1}/{reps}: "
            + ", ".join(f"{size_name(k)} {results[k][-1]:.1f}" for k in keys))
    return results


def summary(values: List[float]) -> Dict[str, Any]:
    """Median, best and every sample of a throughput series."""
    return {"median": statistics.median(values), "best": max(values), "samples": values}


def run_json(args: Sequence[str], timeout: float = 600.0) -> Dict[str, Any]:
    """Runs a helper that prints one JSON line (the last line of its stdout)."""
    done = subprocess.run(list(args), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        raise SystemExit(f"{args[0]} failed ({done.returncode}): {done.stderr.strip()}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------- output --

def emit_summary(summary: Dict[str, Any], json_out: Optional[str]) -> None:
    """Prints the summary as the last line of stdout, one compact JSON
    object, and also writes it to `json_out` when given."""
    line = json.dumps(summary, separators=(",", ":"))
    print(line)
    if json_out:
        with open(json_out, "w") as f:
            f.write(line + "\n")


def toml_text(arg: str) -> str:
    """A --toml argument as configuration: "\\n" in it is a newline, so
    '[engine]\\npollers = 1' fits on a command line (argparse's type=)."""
    return arg.replace("\\n", "\n")


def size_name(size: int) -> str:
    for unit, name in ((GiB, "GiB"), (MiB, "MiB"), (KiB, "KiB")):
        if size >= unit and size % unit == 0:
            return f"{size // unit} {name}"
    return f"{size} B"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], align: str = "l") -> str:
    """A plain-text table. align[i] is "l" or "r" for column i; columns
    past the end of `align` are right-aligned (numbers)."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: List[str]) -> str:
        return "  ".join(c.ljust(w) if align[i:i + 1] == "l" else c.rjust(w)
                         for i, (c, w) in enumerate(zip(row, widths))).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule] + [line(row) for row in cells[1:]])


def verdict(value: float, target: float, higher_is_better: bool = True) -> str:
    ok = value >= target if higher_is_better else value < target
    return "meets" if ok else "BELOW" if higher_is_better else "ABOVE"
