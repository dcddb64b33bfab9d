"""The container stage's checks (tests/container/run.sh builds the image first).

1. Static: the alert rules (promtool check and test), every metric the rules
   and the dashboard read exists in the daemon, the Kubernetes manifests
   through Debian's kubectl (offline), the probe's and these files' types.
2. The image, run as the DaemonSet runs it: two pods on the host network at
   127.0.0.2 and 127.0.0.3 with a real etcd and mutual TLS, 1 GiB moved and
   verified with the image's xferctl, an application container on the shared
   socket, a real Prometheus scraping both: the rules evaluate and every
   dashboard panel returns series.
3. SIGTERM during a transfer: the daemon drains, the bytes land, it exits 0,
   Prometheus sees it down; the preStop hook drains the other.

Prints one line per check and "container: N passed, N failed".
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import subprocess
import sys
import time
import traceback
from typing import Any, Callable, Dict, List, Optional

import yaml

import manifests
import nodes as nodes_mod
from nodes import Node
from pod import Pod, find, podman
from prom import Prometheus, check_panels, metric_names, panel_targets

GIB = 1 << 30


class Checks:
    """Runs checks in order; a failed one prints why. A failed `gate` check
    turns every later `needs` check into a failure that says so."""

    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0
        self.broken: Optional[str] = None

    def __call__(self, what: str, fn: Callable[[], Any], needs: bool = False,
                 gate: bool = False) -> Any:
        if needs and self.broken:
            return self._fail(what, f"not run: '{self.broken}' failed")
        start = time.monotonic()
        try:
            result = fn()
        except Exception as e:  # noqa: BLE001 -- every failure is reported, then counted
            detail = str(e) if isinstance(e, AssertionError) else traceback.format_exc()
            if gate:
                self.broken = what
            return self._fail(what, detail)
        self.passed += 1
        note = f": {result}" if isinstance(result, str) and result else ""
        print(f"ok     {what} ({time.monotonic() - start:.1f} s){note}", flush=True)
        return result

    def _fail(self, what: str, detail: str) -> None:
        self.failed += 1
        print(f"FAILED {what}", flush=True)
        for line in detail.rstrip().splitlines()[-40:]:
            print(f"       {line}")


def load_yaml(path: str) -> Any:
    with open(path) as f:
        return yaml.safe_load(f)


def run(*cmd: str, timeout: float = 300) -> str:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {result.returncode}:\n"
                             f"{result.stdout}{result.stderr}")
    return result.stdout


class Stage:
    def __init__(self, args: argparse.Namespace) -> None:
        self.root: str = args.root
        self.work: str = args.work
        self.image: str = args.image
        self.kubectl: str = args.kubectl
        with open(os.path.join(self.root, "version.bzl")) as f:
            version = re.search(r'XFERD_VERSION = "(.*)"', f.read())
        assert version, "version.bzl has no XFERD_VERSION"
        self.version = version.group(1)
        self.rules = os.path.join(self.root, "deploy", "prometheus", "xferd-alerts.yaml")
        with open(os.path.join(self.root, "deploy", "grafana", "xferd-dashboard.json")) as f:
            self.dashboard: Dict[str, Any] = json.load(f)
        self.rendered: Dict[str, List[Dict[str, Any]]] = {}
        self.pod: Optional[Pod] = None
        self.a = Node("node-a", "127.0.0.2", "xferd-node-a", {}, user="pod")
        self.b = Node("node-b", "127.0.0.3", "xferd-node-b", {}, user=None)
        self.prom: Optional[Prometheus] = None
        self.etcd: Any = None
        self.src_sha = ""

    # --- 1. static ---
    def alert_tests_cover_every_alert(self) -> str:
        alerts = {r["alert"] for g in load_yaml(self.rules)["groups"]
                  for r in g["rules"] if "alert" in r}
        tests = load_yaml(os.path.join(self.root, "tests", "container", "xferd-alerts.test.yaml"))
        fired = {t["alertname"] for test in tests["tests"] for t in test["alert_rule_test"]
                 if t.get("exp_alerts")}
        assert alerts <= fired, f"alerts no test fires: {sorted(alerts - fired)}"
        return f"{len(alerts)} alerts"

    def metrics_exist(self) -> str:
        """Every xferd_/process_ family the rules and panels read is one the
        daemon exports (daemon/metrics/daemon_metrics.cc names each)."""
        with open(os.path.join(self.root, "daemon", "metrics", "daemon_metrics.cc")) as f:
            source = f.read()
        exprs = [r["expr"] for g in load_yaml(self.rules)["groups"] for r in g["rules"]]
        exprs += [t["expr"] for _, t in panel_targets(self.dashboard)]
        names = set().union(*(metric_names(e) for e in exprs))
        missing = sorted(n for n in names if f'"{n}"' not in source)
        assert not missing, f"not exported by the daemon: {missing}"
        return f"{len(names)} families"

    def manifests_ok(self, variant: str) -> str:
        docs = manifests.render(self.kubectl, self.root, variant)
        ds = find(docs, "DaemonSet")
        lost = manifests.typed_roundtrip(self.kubectl, ds)
        assert not lost, "kubectl's typed API does not keep:\n" + "\n".join(lost)
        manifests.check_invariants(docs, variant, self.version)
        self.rendered[variant] = docs
        return ", ".join(f"{d['kind']}/{d['metadata']['name']}" for d in docs)

    def mypy(self) -> str:
        files = [os.path.join(self.root, "deploy", "container", "xferd_probe.py")] + [
            os.path.join(self.root, "tests", "container", f)
            for f in ("container_test.py", "manifests.py", "nodes.py", "pod.py", "prom.py")]
        run("/usr/bin/python3", "-m", "mypy", "--strict", "--no-error-summary",
            "--cache-dir", os.path.join(self.work, "mypy"), "--config-file",
            os.path.join(self.root, "tests", "container", "mypy.ini"), *files)
        return f"{len(files)} files"

    # --- 2. the image as the DaemonSet runs it ---
    def image_config(self) -> str:
        cfg = json.loads(podman("image", "inspect", self.image).stdout)[0]["Config"]
        assert cfg["User"] == "7300:7300", f"user {cfg['User']}"
        assert cfg["Entrypoint"] == ["/usr/bin/xferd"], cfg["Entrypoint"]
        out = podman("run", "--rm", "--network", "host", "--entrypoint", "sh", self.image, "-c",
                     "xferd --version && xferctl --help >/dev/null && "
                     "python3 -c 'import xferd; print(xferd.__name__)' && "
                     "xferd-probe --help >/dev/null && id -u").stdout.split()
        assert out[0] == self.version and out[-1] == "7300", out
        return f"xferd {out[0]}, user 7300, xferctl, python3 xferd, xferd-probe"

    def lay_out_nodes(self) -> str:
        from etcd import Etcd  # tests/testing/python: a real etcd on free loopback ports
        docs = self.rendered["base"]
        self.pod = Pod.from_daemonset(find(docs, "DaemonSet"))
        self.etcd = Etcd().start()
        config = nodes_mod.with_etcd(find(docs, "ConfigMap")["data"]["xferd.toml"],
                                     self.etcd.endpoint)
        # Well above what the stage registers (a few GiB).
        config = nodes_mod.with_registration_cap(config, "16GiB")
        secret = manifests.tls_secret(self.kubectl, nodes_mod.make_tls(self.work, [self.a, self.b]))
        keys = sorted(secret["data"])
        assert keys == ["ca.pem", "node-a.key", "node-a.pem", "node-b.key", "node-b.pem"], keys
        for node in (self.a, self.b):
            nodes_mod.lay_out(self.work, node, secret, config)
        return f"etcd at {self.etcd.endpoint}, Secret keys {keys}"

    def check_config(self) -> str:
        assert self.pod is not None
        cmd = self.pod.podman_run("xferd-check", self.image, self.a.name, self.a.ip, self.a.dirs,
                                  extra_args=["--check-config"])
        cmd[cmd.index("-d")] = "--rm"
        return run(*cmd).strip().splitlines()[-1]

    def start_nodes(self) -> str:
        assert self.pod is not None
        # a as the DaemonSet runs it (uid 0, IPC_LOCK only), with debug logs
        # to show its transfers finishing while it drains; b as the image's
        # own user, non-root.
        nodes_mod.start(self.pod, self.a, self.image, ["--log-level=debug"])
        nodes_mod.start(self.pod, self.b, self.image)
        out = [nodes_mod.wait_ready(self.pod, n).strip() for n in (self.a, self.b)]
        for n in (self.a, self.b):
            out.append(n.exec(*self.pod.live).stdout.strip())
        return "; ".join(out)

    def privileges(self) -> str:
        a, b = nodes_mod.capabilities(self.a), nodes_mod.capabilities(self.b)
        ipc_lock = f"{1 << 14:016x}"  # CAP_IPC_LOCK alone
        assert a == f"uid 0 gid 7300 CapEff {ipc_lock}", f"node-a: {a}"
        assert b == f"uid 7300 gid 7300 CapEff {ipc_lock}", f"node-b: {b}"
        return f"node-a {a}; node-b {b}"

    def directory(self) -> str:
        out = self.a.xferctl("nodes")
        assert "node-a" in out and "node-b" in out and "127.0.0.3:7300" in out, out
        return " / ".join(line.strip() for line in out.splitlines()[1:])

    def start_prometheus(self) -> str:
        self.prom = Prometheus(self.work, [f"{self.a.ip}:9300", f"{self.b.ip}:9300"], [self.rules])
        self.prom.start()
        self.prom.wait_for('count(up{job="xferd"} == 1) == 2')
        return f"{self.prom.url}, both daemons scraped"

    def move_gib(self) -> str:
        self.src_sha = nodes_mod.fill(self.a.host_path("data", "src.bin"), GIB, 0)
        self.a.xferctl("regions", "register", "src", "0", "--backing", "file",
                       "--file", "/var/lib/xferd/data/src.bin")
        for dst in ("dst", "dst2"):
            self.b.xferctl("regions", "register", dst, "1GiB", "--backing", "file", "--file",
                           f"/var/lib/xferd/data/{dst}.bin", "--create", "--remote-write")
        # By node id: node-b's address comes from the directory.
        out = self.a.xferctl("write", "src", "node-b", "dst").strip().splitlines()[-1]
        got = nodes_mod.sha256(self.b.host_path("data", "dst.bin"))
        assert got == self.src_sha, f"dst sha256 {got} != src {self.src_sha}"
        return f"{out}; sha256 {got[:16]}... on both"

    def errors_for_the_dashboard(self) -> str:
        """A refusal and a failed transfer, so that the error panels have series."""
        refused = self.a.exec("xferctl", "write", "src", "node-b", "dst", "--src-offset", "2GiB",
                              "--length", "4KiB", check=False)
        assert refused.returncode != 0 and "OUT_OF_RANGE" in refused.stderr + refused.stdout, \
            f"expected OUT_OF_RANGE: {refused.stdout}{refused.stderr}"
        late = self.a.exec("xferctl", "write", "src", "node-b", "dst", "--timeout", "1ms",
                           check=False)
        assert late.returncode != 0 and "DEADLINE_EXCEEDED" in late.stderr + late.stdout, \
            f"expected DEADLINE_EXCEEDED: {late.stdout}{late.stderr}"
        return "OUT_OF_RANGE refused, DEADLINE_EXCEEDED failed"

    def application_pods(self) -> str:
        """An application container (its own uid, supplementalGroups [7300])
        mounts node-a's socket directory and uses the daemon; without the
        group, the socket's mode keeps it out."""
        app = ["run", "--rm", "--network", "host", "-v", f"{self.a.dirs['run']}:/run/xferd",
               "--user", "1000:1000"]
        info = podman(*app, "--group-add", "7300", "--entrypoint", "xferctl", self.image,
                      "info").stdout
        assert "node-a" in info, info
        connect = "import socket; socket.socket(socket.AF_UNIX).connect('/run/xferd/xferd.sock')"
        denied = podman(*app, "--entrypoint", "python3", self.image, "-c", connect, check=False)
        assert denied.returncode != 0 and "PermissionError" in denied.stderr, \
            f"a client outside group 7300 got in: {denied.stdout}{denied.stderr}"
        return "uid 1000 with group 7300 served; without it: permission denied"

    def rules_evaluate(self) -> str:
        assert self.prom is not None
        deadline = time.monotonic() + 30
        while True:
            rules = [r for g in self.prom.api("rules")["groups"] for r in g["rules"]]
            bad = [f"{r['name']}: {r.get('health')} {r.get('lastError', '')}" for r in rules
                   if r.get("health") != "ok"]
            if not bad or time.monotonic() > deadline:
                break
            time.sleep(1)
        expected = sum(len(g["rules"]) for g in load_yaml(self.rules)["groups"])
        assert len(rules) == expected and not bad, \
            f"{len(rules)} of {expected} rules loaded; unhealthy: {bad}"
        firing = [a["labels"]["alertname"] for a in self.prom.api("alerts")["alerts"]]
        assert not firing, f"alerts pending or firing on healthy daemons: {firing}"
        return f"{len(rules)} rules evaluated, none pending or firing"

    def panels_return_series(self) -> str:
        assert self.prom is not None
        # Let the scrapes after the transfers land, with two samples at least.
        self.prom.wait_for('xferd_errors_total{code="DEADLINE_EXCEEDED"}')
        time.sleep(3)
        problems = check_panels(self.prom, self.dashboard, "tcp")
        assert not problems, "\n".join(problems)
        count = sum(1 for _ in panel_targets(self.dashboard))
        verbs = sum(1 for p in self.dashboard["panels"] if "verbs only" in p["title"].lower())
        return f"{count} queries answered, with series but in the {verbs} verbs-only panels"

    # --- 3. stopping ---
    def sigterm_drains(self) -> str:
        """SIGTERM to node-a while an application's 1 GiB write is in flight:
        the write completes (its bytes verified), node-a exits 0."""
        app = podman("run", "--rm", "--network", "host", "-v", f"{self.a.dirs['run']}:/run/xferd",
                     "--entrypoint", "xferctl", "--user", "1000:1000", "--group-add", "7300",
                     self.image, "write", "src", "node-b", "dst2", "--no-wait").stdout
        transfer = re.search(r"\d+", app)
        assert transfer, app
        podman("kill", "--signal", "TERM", self.a.container)
        code = podman("wait", self.a.container, timeout=60).stdout.strip()
        log = podman("logs", self.a.container).stderr + podman("logs", self.a.container).stdout
        assert code == "0", f"node-a exited {code}:\n{log[-3000:]}"
        drain = log.find("draining")
        done = log.find(f"transfer id={transfer.group(0)} done")
        assert 0 <= drain, f"no drain in node-a's log:\n{log[-3000:]}"
        got = nodes_mod.sha256(self.b.host_path("data", "dst2.bin"))
        assert got == self.src_sha, f"dst2 sha256 {got} != src {self.src_sha}"
        when = "finished during the drain" if done > drain else "had finished before SIGTERM"
        return f"transfer {transfer.group(0)} {when}; bytes verified; node-a exited 0"

    def prometheus_sees_it_down(self) -> str:
        assert self.prom is not None
        self.prom.wait_for(f'up{{instance="{self.a.ip}:9300"}} == 0')
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            alerts = self.prom.api("alerts")["alerts"]
            down = [a for a in alerts if a["labels"]["alertname"] == "XferdDown"]
            if down:
                assert down[0]["labels"]["instance"] == f"{self.a.ip}:9300", down
                return f"XferdDown {down[0]['state']} for {down[0]['labels']['instance']}"
            time.sleep(1)
        raise AssertionError("XferdDown did not become pending for node-a")

    def restart_node_a(self) -> str:
        """node-a comes back under its node id, as a rolling update does."""
        assert self.pod is not None
        podman("rm", self.a.container)
        nodes_mod.start(self.pod, self.a, self.image)
        nodes_mod.wait_ready(self.pod, self.a)
        self.a.xferctl("regions", "register", "back", "1GiB", "--backing", "file", "--file",
                       "/var/lib/xferd/data/back.bin", "--create", "--remote-write")
        return "ready again"

    def pre_stop_drains(self) -> str:
        """The DaemonSet's preStop hook on node-b while an application's 1 GiB
        write to node-a is in flight: the hook returns 0 once node-b is
        drained, the bytes land, node-b exits 0 and leaves the directory."""
        assert self.pod is not None
        podman("run", "--rm", "--network", "host", "-v", f"{self.b.dirs['run']}:/run/xferd",
               "--entrypoint", "xferctl", "--user", "1000:1000", "--group-add", "7300",
               self.image, "write", "dst", "node-a", "back", "--no-wait")
        hook = self.b.exec(*self.pod.pre_stop, timeout=60).stdout.strip().splitlines()
        code = podman("wait", self.b.container, timeout=60).stdout.strip()
        assert code == "0", f"node-b exited {code}"
        got = nodes_mod.sha256(self.a.host_path("data", "back.bin"))
        assert got == self.src_sha, f"back sha256 {got} != {self.src_sha}"
        listed = self.a.xferctl("nodes")
        assert "node-b" not in listed, f"node-b is still in the directory:\n{listed}"
        in_flight = re.search(r"with (\d+) transfers in flight", hook[0])
        return (f"{in_flight.group(1) if in_flight else '?'} in flight at the hook; "
                f"{hook[-1]}; bytes verified; node-b exited 0 and left the directory")

    def cleanup(self) -> None:
        for node in (self.a, self.b):
            podman("rm", "-f", "-t", "5", node.container, check=False)
        if self.prom is not None:
            self.prom.stop()
        if self.etcd is not None:
            self.etcd.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--image", required=True)
    parser.add_argument("--kubectl", required=True)
    parser.add_argument("--image-ok", action="store_true",
                        help="the image was built (else its checks fail, saying so)")
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(args.root, "tests", "testing", "python"))
    os.environ["TEST_TMPDIR"] = args.work  # where the etcd helper keeps its data
    s, check = Stage(args), Checks()
    check("promtool check rules", lambda: run("promtool", "check", "rules", s.rules).strip()
          .splitlines()[-1].strip())
    check("promtool test rules: every alert fires from synthetic series",
          lambda: run("promtool", "test", "rules", os.path.join(
              args.root, "tests", "container", "xferd-alerts.test.yaml")).split()[-1])
    check("every alert has a test that fires it", s.alert_tests_cover_every_alert)
    check("the rules and the dashboard read only metrics the daemon exports", s.metrics_exist)
    for variant in manifests.KUSTOMIZATIONS:
        check(f"kubectl: deploy/kubernetes/{variant} renders, the typed API keeps every field, "
              "invariants hold", functools.partial(s.manifests_ok, variant),
              gate=variant == "base")
    check("mypy --strict: xferd-probe and the stage's modules", s.mypy)
    if not args.image_ok:
        check.broken = check.broken or "building the image"
    try:
        check("the image: user, entrypoint, xferd, xferctl, Python client, probe", s.image_config,
              needs=True, gate=True)
        check("the pods' etcd, TLS Secret (kubectl create secret) and host paths", s.lay_out_nodes,
              needs=True, gate=True)
        check("xferd --check-config with the DaemonSet's flags, ConfigMap and Secret",
              s.check_config, needs=True, gate=True)
        check("two pods start; readiness and liveness probes pass", s.start_nodes, needs=True,
              gate=True)
        check("the daemons hold IPC_LOCK and no other capability", s.privileges, needs=True)
        check("the directory (the ConfigMap's etcd) lists both nodes", s.directory, needs=True)
        check("Prometheus scrapes both daemons", s.start_prometheus, needs=True, gate=True)
        check("1 GiB from node-a to node-b by node id with the image's xferctl, verified",
              s.move_gib, needs=True, gate=True)
        check("an application container uses the shared socket; others are kept out",
              s.application_pods, needs=True)
        check("a refusal and a failed transfer", s.errors_for_the_dashboard, needs=True)
        check("Prometheus loads and evaluates every alert rule", s.rules_evaluate, needs=True)
        check("every dashboard panel's query returns series from the real daemons",
              s.panels_return_series, needs=True)
        check("SIGTERM mid-transfer: node-a drains, the bytes land, exit 0", s.sigterm_drains,
              needs=True)
        check("Prometheus sees node-a down: XferdDown", s.prometheus_sees_it_down, needs=True)
        check("node-a restarts and serves again", s.restart_node_a, needs=True, gate=True)
        check("the preStop hook drains node-b mid-transfer, the bytes land, exit 0",
              s.pre_stop_drains, needs=True)
    finally:
        s.cleanup()
    print(f"container: {check.passed} passed, {check.failed} failed")
    return 0 if check.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
