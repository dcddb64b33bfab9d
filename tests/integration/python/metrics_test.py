"""Observability end to end: two daemons (a, b) with the Prometheus endpoint
on (port 0) and JSON logs. a writes to b (every byte checked by sha256),
including a transfer that fails (b frozen past the transfer's deadline) and
one that is cancelled; then /metrics is scraped over HTTP, parsed by the
independent prometheus_client parser, and its counters, histograms, errors
and peer labels are checked against what happened. Also: the endpoint's
HTTP behaviour, the configured caps and the directory's state (a real etcd
stopped and started), `xferctl top --iterations 2` on a pipe, a terminal (pty) and
with --json, and that every log line is one JSON object carrying the
transfer ids, outcomes and codes."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Dict, FrozenSet, Iterator, List, Tuple

import pytest
from prometheus_client.parser import text_string_to_metric_families

import pytest_main
import xferd
from conftest import Regions
from daemons import TRANSPORT, Cluster
from etcd import Etcd
from testlib import WAIT_S, fill, sha, wait_until

KiB = 1 << 10
MiB = 1 << 20

# What prometheus-cpp's handler sends: the text format 0.0.4, which
# Prometheus assumes for text/plain without a version.
CONTENT_TYPE = "text/plain; charset=utf-8"
Samples = Dict[Tuple[str, FrozenSet[Tuple[str, str]]], float]
Clients = Dict[str, xferd.Client]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """a and b with metrics on a free port each and JSON logs; a -> b."""
    with Cluster(("a", "b"), extra_args=("--metrics-listen", "127.0.0.1:0",
                                         "--log-json")) as c:
        c["a"].client().connect_peer(c["b"].address)
        yield c


def metrics_url(cluster: Cluster, name: str, path: str = "/metrics") -> str:
    return f"http://{cluster[name].info['metrics_address']}{path}"


def scrape(cluster: Cluster, name: str) -> Samples:
    """Every sample of `name`'s /metrics, by (sample name, labels)."""
    with urllib.request.urlopen(metrics_url(cluster, name), timeout=WAIT_S) as reply:
        assert reply.status == 200
        assert reply.headers["Content-Type"] == CONTENT_TYPE
        text = reply.read().decode("utf-8")
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        assert family.documentation, f"{family.name} has no HELP"
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return samples


def get(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def delta(after: Samples, before: Samples, name: str, **labels: str) -> float:
    key = (name, frozenset(labels.items()))
    return after[key] - before.get(key, 0.0)


def settled(cluster: Cluster, name: str) -> Samples:
    """A scrape once nothing is in flight and the byte counters stopped
    moving (late acknowledgements of the frozen transfers included)."""
    previous: List[Samples] = []

    def stable() -> bool:
        s = scrape(cluster, name)
        previous.append(s)
        if len(previous) < 2 or get(s, "xferd_transfers_in_flight") != 0:
            return False
        keys = [k for k in s if k[0] in ("xferd_tx_bytes_total", "xferd_rx_bytes_total")]
        return all(previous[-2].get(k) == s[k] for k in keys)

    wait_until(f"{name}'s counters to settle", stable, period=0.1)
    return previous[-1]


def test_transfers_errors_latency_and_peers_are_counted(cluster: Cluster, clients: Clients,
                                                        regions: Regions) -> None:
    a, b = clients["a"], clients["b"]
    started = time.monotonic()
    before_a, before_b = scrape(cluster, "a"), scrape(cluster, "b")
    src = regions.make("a", "m_src", 64 * MiB)
    dst = regions.make("b", "m_dst", 64 * MiB, remote_write=True)
    fill(src, seed=7)
    done_lengths = [1, 4 * KiB, MiB + 77, 8 * MiB]
    for length in done_lengths:
        t = a.write("m_src", "b", "m_dst", length).wait(WAIT_S)
        assert (t.state, t.bytes_done, t.transport) == ("done", length, TRANSPORT)
        assert sha(dst.buffer[:length]) == sha(src.buffer[:length])

    # b frozen: one write runs out of its deadline, another is cancelled.
    cluster["b"].pause()
    try:
        late = a.write("m_src", "b", "m_dst", 64 * MiB, slice_size=64 * KiB, timeout=0.3)
        with pytest.raises(xferd.DeadlineExceeded):
            late.wait(WAIT_S)
        stuck = a.write("m_src", "b", "m_dst", 64 * MiB, slice_size=64 * KiB)
        assert stuck.cancel().state == "cancelled"
    finally:
        cluster["b"].resume()

    after_a, after_b = settled(cluster, "a"), settled(cluster, "b")
    elapsed = time.monotonic() - started
    peer_b = {"peer": "b", "transport": TRANSPORT}
    peer_a = {"peer": "a", "transport": TRANSPORT}

    # Transfers by outcome and the errors of the two that did not finish.
    assert delta(after_a, before_a, "xferd_transfers_total", outcome="done", **peer_b) == 4
    assert delta(after_a, before_a, "xferd_transfers_total", outcome="failed", **peer_b) == 1
    assert delta(after_a, before_a, "xferd_transfers_total", outcome="cancelled", **peer_b) == 1
    assert delta(after_a, before_a, "xferd_errors_total", code="DEADLINE_EXCEEDED") == 1
    assert delta(after_a, before_a, "xferd_errors_total", code="CANCELLED") == 1
    assert delta(after_a, before_a, "xferd_transfers_submitted_total") == 6
    assert get(after_a, "xferd_transfers_in_flight") == 0

    # Latency: only the 4 done transfers, in cumulative buckets ending in +Inf.
    count = get(after_a, "xferd_xfer_time_seconds_count", **peer_b)
    assert delta(after_a, before_a, "xferd_xfer_time_seconds_count", **peer_b) == 4
    buckets = sorted((float(dict(labels)["le"]), value) for (name, labels), value
                     in after_a.items() if name == "xferd_xfer_time_seconds_bucket"
                     and dict(labels)["peer"] == "b")
    assert [le for le, _ in buckets][0] == 0.0001 and buckets[-2][0] == 100
    assert buckets[-1] == (float("inf"), count)
    assert all(x[1] <= y[1] for x, y in zip(buckets, buckets[1:])), buckets
    assert 0 < get(after_a, "xferd_xfer_time_seconds_sum", **peer_b) < 4 * WAIT_S

    # Bytes by peer: at least every done byte, and what GetStats says.
    tx = delta(after_a, before_a, "xferd_tx_bytes_total", **peer_b)
    assert tx >= sum(done_lengths)
    assert get(after_a, "xferd_tx_bytes_total", **peer_b) == a.stats().bytes_sent
    rx = delta(after_b, before_b, "xferd_rx_bytes_total", **peer_a)
    assert rx >= sum(done_lengths)
    assert get(after_b, "xferd_rx_bytes_total", **peer_a) == b.stats().bytes_received
    assert get(after_b, "xferd_rejected_writes_total", **peer_a) == 0
    # Each done transfer raised one landed event on b; the others none.
    assert delta(after_b, before_b, "xferd_landed_events_total") == 4
    # b never wrote to a: its series for a exist, at zero.
    assert get(after_b, "xferd_transfers_total", outcome="done", **peer_a) == 0

    # Peers, memory, lanes, pollers, build and process.
    assert get(after_a, "xferd_peers", state="connected") == 1
    assert get(after_a, "xferd_peers", state="broken") == 0
    assert get(after_a, "xferd_memory_registered_bytes") == 64 * MiB
    assert get(after_a, "xferd_memory_regions") == 1
    assert get(after_a, "xferd_transport_lanes", transport=TRANSPORT) == 2
    for poller in ("0", "1"):
        # Both pollers served the link and were idle in between (the client's
        # round trips, b frozen): they slept, and never longer than the test ran.
        asleep = delta(after_a, before_a, "xferd_poller_sleep_seconds_total", poller=poller)
        assert 0 < asleep <= elapsed, (poller, asleep, elapsed)
        assert delta(after_a, before_a, "xferd_poller_sleeps_total", poller=poller) >= 1
        assert get(after_a, "xferd_poller_sleeping", poller=poller) in (0, 1)
    version = a.node_info().version
    assert get(after_a, "xferd_build_info", version=version, transport=TRANSPORT) == 1
    for name in ("process_resident_memory_bytes", "process_open_fds", "process_threads",
                 "process_start_time_seconds"):
        assert get(after_a, name) > 0, name

    # The same story in a's JSON log, one object per line.
    lines = log_objects(cluster, "a")
    failed = [l for l in lines if "code=DEADLINE_EXCEEDED" in l["msg"]]
    assert len(failed) == 1 and failed[0]["level"] == "warning", failed
    assert failed[0]["msg"].startswith(
        f"transfer id={late.id} failed direction=write peer=b transport={TRANSPORT}")
    cancelled = [l for l in lines if l["msg"].startswith(f"transfer id={stuck.id} cancelled")]
    assert len(cancelled) == 1 and cancelled[0]["level"] == "info", cancelled
    assert "code=CANCELLED" in cancelled[0]["msg"]
    queued = [l for l in lines if l["msg"].startswith(f"transfer id={late.id} queued direction=write peer=b")]
    assert len(queued) == 1 and queued[0]["level"] == "debug", queued


def log_objects(cluster: Cluster, name: str) -> List[Dict[str, object]]:
    """Every line the daemon logged, each parsed as one JSON object (the
    harness's own "---- start" lines excepted)."""
    objects = []
    with open(cluster[name].log_path, encoding="utf-8") as log:
        for line in log:
            if line.startswith("---- "):
                continue
            obj = json.loads(line)
            assert set(obj) == {"time", "level", "thread", "msg"}, obj
            objects.append(obj)
    return objects


def test_endpoint_speaks_http(cluster: Cluster) -> None:
    head = urllib.request.Request(metrics_url(cluster, "a"), method="HEAD")
    with urllib.request.urlopen(head, timeout=WAIT_S) as reply:
        assert reply.status == 200 and reply.read() == b""
        assert reply.headers["Content-Type"] == CONTENT_TYPE
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(metrics_url(cluster, "a", "/nope"), timeout=WAIT_S)
    assert missing.value.code == 404
    post = urllib.request.Request(metrics_url(cluster, "a"), data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(post, timeout=WAIT_S)
    assert refused.value.code == 405
    assert refused.value.headers["Allow"] == "GET, HEAD"


def test_caps_and_directory_state_follow_the_config_and_a_real_etcd(cluster: Cluster) -> None:
    """The caps the alerts divide by are the configured ones (0: no
    regions.max_registered_bytes), and xferd_directory_connected follows a
    real etcd stopped and started again; a daemon without [cluster] has none."""
    assert ("xferd_directory_connected", frozenset()) not in scrape(cluster, "a")
    with Etcd() as etcd:
        config = ('[engine]\nmax_inflight_transfers = 123\n'
                  f'[cluster]\netcd = ["{etcd.endpoint}"]\nprefix = "/xferd-metrics/"\n'
                  'lease_ttl = "2s"\n')
        with Cluster(("d",), extra_args=("--metrics-listen", "127.0.0.1:0"),
                     config_extra=config) as c:
            s = scrape(c, "d")
            assert get(s, "xferd_transfers_in_flight_max") == 123
            assert get(s, "xferd_memory_registered_bytes_max") == 0
            assert get(s, "xferd_directory_connected") == 1
            etcd.stop()
            try:
                wait_until("the gauge to say etcd is gone",
                           lambda: get(scrape(c, "d"), "xferd_directory_connected") == 0,
                           timeout=10)
            finally:
                etcd.start()
            wait_until("the gauge to say etcd is back",
                       lambda: get(scrape(c, "d"), "xferd_directory_connected") == 1,
                       timeout=10)


def xferctl() -> str:
    """The xferctl binary in this test's runfiles."""
    root = os.environ["TEST_SRCDIR"]
    return os.path.join(root, os.environ.get("TEST_WORKSPACE", "xferd"), "client", "cpp",
                        "xferctl")


def top_command(cluster: Cluster, *extra: str) -> List[str]:
    return [xferctl(), "--target", cluster["a"].target, "top", "--iterations", "2",
            "--interval", "200ms", *extra]


def test_top_on_a_pipe_prints_two_plain_frames(cluster: Cluster) -> None:
    out = subprocess.run(top_command(cluster), capture_output=True, text=True,
                         timeout=WAIT_S, check=True).stdout
    assert "\x1b" not in out, "escape codes without a terminal"
    headers = [line for line in out.splitlines() if line.startswith("xferd a (")]
    assert len(headers) == 2, out
    assert all(h.startswith(f"xferd a ({TRANSPORT})  up ") for h in headers), out
    assert "\n\nxferd a (" in out, "frames are not separated by a blank line"
    assert out.count("throughput  out -, in -") == 1, out  # only the first has no rates
    assert out.count("throughput  out ") == 2, out
    peer_rows = [line for line in out.splitlines() if line.startswith("b ")]
    assert len(peer_rows) == 2 and all(f"connected  {TRANSPORT}" in r for r in peer_rows), out


def test_top_json_is_one_document_per_refresh(cluster: Cluster) -> None:
    out = subprocess.run(top_command(cluster, "--json"), capture_output=True, text=True,
                         timeout=WAIT_S, check=True).stdout
    docs = [json.loads(line) for line in out.splitlines()]
    assert len(docs) == 2, out
    assert docs[0]["tx_bytes_per_second"] is None and docs[0]["interval_seconds"] is None
    assert docs[1]["interval_seconds"] > 0.1
    # The rates are the counters' change over the interval (0 when idle).
    for rate, counter in (("tx_bytes_per_second", "bytes_sent"),
                          ("rx_bytes_per_second", "bytes_received")):
        moved = int(docs[1]["stats"][counter]) - int(docs[0]["stats"][counter])
        assert docs[1][rate] == pytest.approx(moved / docs[1]["interval_seconds"]), (rate, docs)
    for doc in docs:
        assert doc["node_id"] == "a"
        assert doc["stats"]["transport"] == f"TRANSPORT_KIND_{TRANSPORT.upper()}"
        assert [p["node_id"] for p in doc["peers"]] == ["b"]
        assert "b" in doc["peer_rates"]


def test_top_on_a_terminal_redraws_the_screen(cluster: Cluster) -> None:
    controller, terminal = pty.openpty()
    try:
        proc = subprocess.Popen(top_command(cluster), stdout=terminal, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL)
        os.close(terminal)
        terminal = -1
        out = b""
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: the other side closed
                break
            if not chunk:
                break
            out += chunk
        assert proc.wait(WAIT_S) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        os.close(controller)
        if terminal >= 0:
            os.close(terminal)
    assert out.count(b"\x1b[H\x1b[2J") == 2, out
    assert out.count(b"xferd a (") == 2, out


if __name__ == "__main__":
    sys.exit(pytest_main.main(__file__, sys.argv))
