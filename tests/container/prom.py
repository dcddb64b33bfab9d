"""Debian's Prometheus server for the container stage, and the checks that
need it: the alert rules load and evaluate, and every panel of the Grafana
dashboard returns series from real daemons.

The server listens on a free loopback port, keeps its data in the stage's
work directory and is stopped by the pid this module started.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from typing import Any, Dict, Iterator, List, Set, Tuple

import yaml

# Grafana's variables, as the dashboard's defaults resolve them: every
# instance and job, and a window that holds many 1 s scrapes.
GRAFANA_VARIABLES = {"$instance": ".+", "$job": ".+", "$__rate_interval": "30s"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Prometheus:
    """One server scraping `targets` every second, with `rule_files` loaded."""

    def __init__(self, work: str, targets: List[str], rule_files: List[str]) -> None:
        self.work = work
        self.port = _free_port()
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": rule_files,
            "scrape_configs": [{"job_name": "xferd", "static_configs": [{"targets": targets}]}],
        }
        self.config_path = os.path.join(work, "prometheus.yml")
        with open(self.config_path, "w") as f:
            yaml.safe_dump(config, f)
        self.log_path = os.path.join(work, "prometheus.log")
        self.proc: "subprocess.Popen[bytes] | None" = None

    def start(self) -> None:
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                ["/usr/bin/prometheus", f"--config.file={self.config_path}",
                 f"--storage.tsdb.path={os.path.join(self.work, 'tsdb')}",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise AssertionError(f"prometheus did not become ready:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log_tail(self) -> str:
        with open(self.log_path, errors="replace") as f:
            return "".join(f.readlines()[-20:])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def api(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", f"{path} {params}: {body}"
        return body["data"]

    def query(self, expr: str) -> List[Dict[str, Any]]:
        """An instant query's series; AssertionError if Prometheus refuses it."""
        try:
            data = self.api("query", query=expr)
        except urllib.error.HTTPError as e:
            raise AssertionError(f"{expr}: {e.read().decode(errors='replace')}") from e
        result: List[Dict[str, Any]] = data["result"]
        return result

    def wait_for(self, expr: str, timeout: float = 30) -> List[Dict[str, Any]]:
        """Polls until `expr` has a series; AssertionError at the timeout."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.query(expr)
            if result or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert result, f"no series for {expr} within {timeout} s"
        return result


def panel_targets(dashboard: Dict[str, Any]) -> Iterator[Tuple[Dict[str, Any], Dict[str, Any]]]:
    """Every (panel, target) of the dashboard, rows included."""
    for panel in dashboard["panels"]:
        for sub in [panel] + panel.get("panels", []):
            for target in sub.get("targets", []):
                yield sub, target


def resolve(expr: str) -> str:
    for name, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(name, value)
    assert "$" not in expr, f"an unknown variable is left in {expr}"
    return expr


def check_panels(prom: Prometheus, dashboard: Dict[str, Any], transport: str) -> List[str]:
    """Each panel query's problems: refused by Prometheus, no series (unless
    the panel is verbs only and the daemons run TCP), or a legend naming a
    label its series lack. Returns one line per panel query."""
    problems: List[str] = []
    for panel, target in panel_targets(dashboard):
        expr = resolve(target["expr"])
        try:
            series = prom.query(expr)
        except AssertionError as e:
            problems.append(f"{panel['title']}: refused: {e}")
            continue
        verbs_only = "verbs only" in panel["title"].lower()
        if not series:
            if not (verbs_only and transport == "tcp"):
                problems.append(f"{panel['title']}: no series for {expr}")
            continue
        for label in re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat", "")):
            if not any(label in s["metric"] for s in series):
                problems.append(f"{panel['title']}: legend names {label}, absent from {expr}")
    return problems


def metric_names(expr: str) -> Set[str]:
    """The xferd_ and process_ metric names an expression reads (histogram
    series by their family's name)."""
    names = set(re.findall(r"\b((?:xferd|process)_[a-z_]+)\b", expr))
    return {re.sub(r"_(bucket|sum|count)$", "", n) for n in names}
