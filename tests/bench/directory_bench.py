#!/usr/bin/python3
"""The cluster directory at scale (issue 9, item 9): a real etcd holding the
records of N simulated daemons with R regions each (1,000 and 10 by default),
written by directory_bench_tool with the daemon's own encoding, and real
daemons against it. Prints, each beside a reference from the same run:

  load     a new daemon's start-up time until it is ready (it reads the whole
           directory before) and its resident memory, beside the same daemon
           on an empty prefix of the same etcd: the difference is the cost of
           loading and caching the directory;
  etcd     keys and bytes (keys + values) per simulated daemon, and etcd's
           database growth per daemon;
  watch    from before an etcd put of a new node record until the first and
           the last of D daemons (1 and 4 by default) have it in their cache
           (their NodeInfo.directory.revision reaches the put's), beside the
           put's own round trip;
  lookup   FindRegion answered from the cache and ListNodes of the whole
           directory, beside GetNodeInfo (a bare unary call), with ListNodes'
           answer size.

Asserts nothing. Needs etcd (Debian's etcd-server, etcd-client) and
  bazel build //daemon:xferd //client/cpp:xferctl //tests/bench:directory_bench_tool
(add --config=opt for optimized figures; --bazel-bin names the output tree).

  tests/bench/directory_bench.py [--nodes 1000] [--regions 10] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from etcd import Etcd  # noqa: E402  (benchlib put tests/testing/python on the path)

PREFIX = "/bench/"
EMPTY = "/bench-empty/"


def toml(etcd: Etcd, prefix: str) -> str:
    return f'[cluster]\netcd = ["{etcd.endpoint}"]\nprefix = "{prefix}"\n'


def db_size(etcd: Etcd) -> int:
    out = etcd.ctl("endpoint", "status", "-w", "json").stdout
    return int(json.loads(out)[0]["Status"]["dbSize"])


def start_timed(children: benchlib.Children, xferd: str, workdir: str, name: str,
                prefix: str, etcd: Etcd) -> Dict[str, Any]:
    """Starts a daemon; seconds until ready and its RSS then."""
    start = time.monotonic()
    daemon = benchlib.start_daemon(children, xferd, workdir, name, "tcp", toml=toml(etcd, prefix))
    took = time.monotonic() - start
    rss = benchlib.proc_status(daemon.pid)["VmRSS"]
    return {"daemon": daemon, "seconds": took, "rss": rss}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--regions", type=int, default=10, help="per simulated daemon")
    parser.add_argument("--rounds", type=int, default=3, help="start-ups of each kind")
    parser.add_argument("--daemons", type=int, default=4, help="watchers for the fan-out")
    parser.add_argument("--puts", type=int, default=20)
    parser.add_argument("--bazel-bin", default=os.path.join(benchlib.REPO, "bazel-bin"))
    parser.add_argument("--json-out")
    args = parser.parse_args()
    xferd = os.path.join(args.bazel_bin, "daemon", "xferd")
    xferctl = os.path.join(args.bazel_bin, "client", "cpp", "xferctl")
    tool = os.path.join(args.bazel_bin, "tests", "bench", "directory_bench_tool")
    for path in (xferd, xferctl, tool):
        if not os.path.exists(path):
            raise SystemExit(f"missing {path}: bazel build //daemon:xferd //client/cpp:xferctl "
                             "//tests/bench:directory_bench_tool")

    children = benchlib.Children()
    workdir = tempfile.mkdtemp(prefix="xf-dirbench-", dir="/tmp")
    children.dirs.append(workdir)
    etcd = Etcd("bench")
    out: Dict[str, Any] = {"nodes": args.nodes, "regions_per_node": args.regions,
                           "load_average_start": benchlib.load_average()}
    try:
        etcd.start()
        before = db_size(etcd)
        benchlib.log(f"writing {args.nodes} daemons x {args.regions} regions into etcd")
        fill = benchlib.run_json([tool, "fill", "--etcd", etcd.endpoint, "--prefix", PREFIX,
                                  "--nodes", str(args.nodes), "--regions", str(args.regions)])
        grown = db_size(etcd) - before
        out["etcd"] = {"keys": fill["keys"], "bytes": fill["bytes"],
                       "keys_per_node": fill["keys"] / args.nodes,
                       "bytes_per_node": fill["bytes"] / args.nodes,
                       "node_record_bytes": fill["node_record_bytes"] / args.nodes,
                       "db_growth_per_node": grown / args.nodes, "fill_seconds": fill["seconds"]}

        # Start-ups, alternating empty and full so that load hits both alike.
        starts: Dict[str, List[Dict[str, Any]]] = {"empty": [], "full": []}
        for r in range(args.rounds):
            for kind, prefix in (("empty", EMPTY), ("full", PREFIX)):
                s = start_timed(children, xferd, workdir, f"{kind}{r}", prefix, etcd)
                benchlib.stop_daemon(s.pop("daemon"))
                starts[kind].append(s)
                benchlib.log(f"{kind} start {s['seconds'] * 1000:.0f} ms, "
                             f"RSS {s['rss'] / benchlib.MiB:.1f} MiB")
        med = {k: {f: statistics.median(x[f] for x in v) for f in ("seconds", "rss")}
               for k, v in starts.items()}
        out["load"] = {"empty": med["empty"], "full": med["full"],
                       "extra_seconds": med["full"]["seconds"] - med["empty"]["seconds"],
                       "extra_rss": med["full"]["rss"] - med["empty"]["rss"]}

        # Watchers on the full directory; one of them has a region to find.
        watchers = [start_timed(children, xferd, workdir, f"w{i}", PREFIX, etcd)["daemon"]
                    for i in range(args.daemons)]
        subprocess.run([xferctl, "--target", watchers[0].target, "regions", "register", "probe",
                        "1MiB"], check=True, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 10  # published by its directory thread
        while not etcd.get_prefix(f"{PREFIX}regions/{watchers[0].name}/probe"):
            if time.monotonic() > deadline:
                raise SystemExit("the probe region was not published within 10 s")
            time.sleep(0.05)
        targets = [w.target for w in watchers]
        out["watch_1"] = benchlib.run_json([tool, "watch", "--etcd", etcd.endpoint, "--prefix",
                                            PREFIX, "--count", str(args.puts),
                                            "--target", targets[0]])
        fan = [tool, "watch", "--etcd", etcd.endpoint, "--prefix", PREFIX,
               "--count", str(args.puts)]
        for t in targets:
            fan += ["--target", t]
        out[f"watch_{len(targets)}"] = benchlib.run_json(fan)
        out["lookup"] = benchlib.run_json([tool, "lookup", "--target", targets[-1],
                                           "--region", "probe", "--seconds", "2"])
        for w in watchers:
            benchlib.stop_daemon(w)
    finally:
        children.stop_all()
        etcd.close()
    out["load_average_end"] = benchlib.load_average()
    report(out, args.daemons)
    benchlib.emit_summary(out, args.json_out)
    return 0


def report(out: Dict[str, Any], daemons: int) -> None:
    e, load = out["etcd"], out["load"]
    mib = benchlib.MiB
    print(f"cluster directory: {out['nodes']} simulated daemons x {out['regions_per_node']} "
          f"regions (load average {out['load_average_start']} -> {out['load_average_end']})\n")
    print(benchlib.table(["etcd", "value"], [
        ["keys", e["keys"]],
        ["keys per daemon", f"{e['keys_per_node']:.0f}"],
        ["bytes per daemon (keys + values)", f"{e['bytes_per_node']:.0f}"],
        ["  of which the node record", f"{e['node_record_bytes']:.0f}"],
        ["etcd db growth per daemon", f"{e['db_growth_per_node']:.0f}"],
    ], "lr"))
    print()
    print(benchlib.table(["daemon start-up (median)", "to ready", "RSS"], [
        ["empty prefix (reference)", f"{load['empty']['seconds'] * 1000:.0f} ms",
         f"{load['empty']['rss'] / mib:.1f} MiB"],
        [f"{out['nodes']} daemons in the directory", f"{load['full']['seconds'] * 1000:.0f} ms",
         f"{load['full']['rss'] / mib:.1f} MiB"],
        ["difference: loading and caching it", f"{load['extra_seconds'] * 1000:+.0f} ms",
         f"{load['extra_rss'] / mib:+.1f} MiB"],
    ], "lrr"))
    print()
    rows = []
    for key in ("watch_1", f"watch_{daemons}"):
        w = out[key]
        rows.append([f"etcd put round trip (reference), {w['targets']} watching",
                     f"{w['put']['p50_ms']:.2f}", f"{w['put']['p99_ms']:.2f}"])
        rows.append(["put until the first cache has it", f"{w['first']['p50_ms']:.2f}",
                     f"{w['first']['p99_ms']:.2f}"])
        rows.append([f"put until all {w['targets']} caches have it", f"{w['all']['p50_ms']:.2f}",
                     f"{w['all']['p99_ms']:.2f}"])
    print(benchlib.table(["watch-to-cache", "p50 ms", "p99 ms"], rows, "lrr"))
    print()
    lk = out["lookup"]
    print(benchlib.table(["lookup (one client, back to back)", "p50 ms", "p99 ms"], [
        ["GetNodeInfo (reference)", f"{lk['node_info']['p50_ms']:.3f}",
         f"{lk['node_info']['p99_ms']:.3f}"],
        ["FindRegion from the cache", f"{lk['find_region']['p50_ms']:.3f}",
         f"{lk['find_region']['p99_ms']:.3f}"],
        [f"ListNodes ({lk['list_nodes_nodes']} daemons, "
         f"{lk['list_nodes_bytes'] / mib:.2f} MiB)", f"{lk['list_nodes']['p50_ms']:.3f}",
         f"{lk['list_nodes']['p99_ms']:.3f}"],
    ], "lrr"))


if __name__ == "__main__":
    sys.exit(main())
