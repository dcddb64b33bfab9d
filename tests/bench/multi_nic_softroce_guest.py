"""The multi-NIC part of the Soft-RoCE bench: runs inside ONE Soft-RoCE VM
boot (tests/softroce/vm_run.sh), lays two veth cables with an rxe device on
each end (tests/softroce/rxe_wire.sh: rxe1-rxe2 and rxe3-rxe4), and prints
the report. Started from the host by `tests/bench/softroce_bench.py --multi-nic`;
not meant to be run by hand outside the VM.

Two daemon pairs in the same boot, one over cable 1 only (a on rxe1, b on
rxe2) and one over both cables (a on rxe1 and rxe3, b on rxe2 and rxe4;
transport.verbs_devices, paired by index), take turns writing
the same SHM region of WRITE_BYTES: MiB/s by the client's clock around a
Write with wait, and per device the bytes it carried (Stats.devices). The
last write of each pair is checked by sha256. Every figure is functional:
both devices are software in one guest, so the emulated CPU bounds them all
and a second device cannot add bandwidth here; on hardware each NIC brings
its own.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import MiB  # noqa: E402

WRITE_BYTES = 128 * MiB
SLICE = 1 * MiB
# Each pair's devices: daemon a's, then b's.
DEVICES = {"one device": (["rxe1"], ["rxe2"]),
           "two devices": (["rxe1", "rxe3"], ["rxe2", "rxe4"])}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description="the multi-NIC Soft-RoCE bench, inside the VM")
    p.add_argument("--bazel-bin", required=True, help="bazel-bin of the --config=opt build")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--reps", type=int, help="rounds (default 3, quick 1)")
    p.add_argument("--json-out", help="also write the JSON summary here")
    args = p.parse_args()
    args.reps = args.reps or (1 if args.quick else 3)
    return args


class Pair:
    """Daemons `<tag>a` and `<tag>b` driving `devices`, a connected to b,
    with a's `src` and b's `dst` SHM regions."""

    def __init__(self, children: benchlib.Children, bins: benchlib.Binaries, workdir: str,
                 tag: str, devices: Tuple[List[str], List[str]]) -> None:
        import xferd

        def toml(names: List[str]) -> str:
            return f"[transport]\nverbs_devices = {names!r}\n".replace("'", '"')

        self.a = benchlib.start_daemon(children, bins.xferd, workdir, f"{tag}a", "verbs",
                                       toml=toml(devices[0]))
        self.b = benchlib.start_daemon(children, bins.xferd, workdir, f"{tag}b", "verbs",
                                       toml=toml(devices[1]))
        self.ca, self.cb = xferd.Client(self.a.target), xferd.Client(self.b.target)
        self.ca.connect_peer(self.b.address)
        self.peer = self.b.name
        self.src = self.ca.register_region("src", WRITE_BYTES, backing="shm").buffer
        self.dst = self.cb.register_region("dst", WRITE_BYTES, backing="shm",
                                           remote_write=True).buffer
        self.src[:] = os.urandom(WRITE_BYTES)
        self.split: Dict[str, int] = {}

    def device_bytes(self) -> Dict[str, int]:
        return {d.name: d.bytes_sent for d in self.ca.stats().devices}

    def run(self) -> float:
        """One timed write of the whole region; adds each device's bytes."""
        before = self.device_bytes()
        start = time.perf_counter()
        done = self.ca.write("src", self.peer, "dst", WRITE_BYTES, slice_size=SLICE, wait=True)
        elapsed = time.perf_counter() - start
        if done.last.state != "done":
            raise SystemExit(f"write failed: {done.last}")
        for name, sent in self.device_bytes().items():
            self.split[name] = self.split.get(name, 0) + sent - before.get(name, 0)
        return WRITE_BYTES / elapsed / MiB

    def verified(self) -> bool:
        return hashlib.sha256(self.src).digest() == hashlib.sha256(self.dst).digest()

    def close(self) -> None:
        for mapping in (self.src, self.dst):
            mapping.release()
        self.ca.close()
        self.cb.close()
        benchlib.stop_daemon(self.a)
        benchlib.stop_daemon(self.b)


def main() -> int:
    args = parse_args()
    bins, children, workdir = benchlib.guest_start(args.bazel_bin, "xfmn")
    started = time.monotonic()
    wire = os.path.join(benchlib.REPO, "tests", "softroce", "rxe_wire.sh")
    for cable in ("1", "2"):
        if subprocess.run(["bash", wire, cable], stdin=subprocess.DEVNULL).returncode != 0:
            raise SystemExit(f"cable {cable}'s Soft-RoCE devices did not come up")
    rates: Dict[str, List[float]] = {label: [] for label in DEVICES}
    try:
        pairs = {label: Pair(children, bins, workdir, f"d{len(devs[0])}", devs)
                 for label, devs in DEVICES.items()}
        for label, pair in pairs.items():
            pair.run()  # warm-up: resolves the region, faults the pages in
            pair.split.clear()
        for rep in range(args.reps):
            for label, pair in pairs.items():
                rates[label].append(pair.run())
            benchlib.log(f"round {rep + 1}/{args.reps}, MiB/s: " + ", ".join(
                f"{label} {rates[label][-1]:.1f}" for label in DEVICES))
        verified = {label: pair.verified() for label, pair in pairs.items()}
        splits = {label: dict(pair.split) for label, pair in pairs.items()}
        for pair in pairs.values():
            pair.close()
    finally:
        children.stop_all()
    one, two = (statistics.median(rates[label]) for label in DEVICES)
    print("\n== softroce_bench --multi-nic: one vs two rxe devices per daemon, one VM boot ==")
    print(f"guest: {os.cpu_count()} vCPUs (qemu TCG), Linux {platform.release()}; xferd "
          f"--config=opt; {args.reps} rounds of a {WRITE_BYTES // MiB} MiB write "
          f"({SLICE // MiB} MiB slices) per pair, taking turns; {datetime.date.today()}\n")
    rows = []
    for label, devices in DEVICES.items():
        total = sum(splits[label].values()) or 1
        shares = ", ".join(f"{name} {100 * sent / total:.1f}%"
                           for name, sent in sorted(splits[label].items()))
        pair_devices = " - ".join(", ".join(names) for names in devices)
        rows.append([label, pair_devices, f"{statistics.median(rates[label]):.1f}",
                     shares, "match" if verified[label] else "MISMATCH"])
    print(benchlib.table(["pair", "devices", "MiB/s (median)", "bytes per device",
                          "last write sha256"], rows, align="llrll"))
    print(f"\ntwo devices / one device: {two / one:.2f}x. Functional figures: every rxe "
          "device is software in one TCG guest, so the emulated CPU bounds both pairs; the "
          "split shows the striping, not a NIC's bandwidth.\n")
    summary: Dict[str, Any] = {
        "bench": "softroce_multi_nic", "quick": args.quick, "vcpus": os.cpu_count(),
        "write_bytes": WRITE_BYTES, "slice": SLICE,
        "runs": {label: {"devices": DEVICES[label], "mib_s": benchlib.summary(rates[label]),
                         "bytes_per_device": splits[label], "verified": verified[label]}
                 for label in DEVICES},
        "two_vs_one": two / one, "seconds": round(time.monotonic() - started, 1),
    }
    benchlib.emit_summary(summary, args.json_out)
    return 0 if all(verified.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
