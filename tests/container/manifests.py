"""Checks of deploy/kubernetes with Debian's kubectl, offline (no API server).

`kubectl kustomize` renders the base and each overlay. No schema is reachable
without a server, so the DaemonSet is put through kubectl's own typed API
(`kubectl set env --local`, which decodes it into Kubernetes' Go types and
prints them back): a misspelt or unknown field is dropped and a wrong type
refused, so every field written must come back unchanged. The rest are the
invariants the deployment relies on (deploy/kubernetes.md).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
from typing import Any, Dict, List

import yaml

from pod import Manifest, Pod, find

KUSTOMIZATIONS = ("base", "no-device-plugin", "tcp")
PROBE_VARIABLE = "XFERD_KUBECTL_CHECK"


def kubectl(binary: str, *args: str, stdin: str = "") -> str:
    env = dict(os.environ, KUBECONFIG="/dev/null", HOME=os.environ.get("HOME", "/root"))
    result = subprocess.run([binary, *args], input=stdin, capture_output=True, text=True,
                            errors="replace",
                            env=env, timeout=60, check=False)
    if result.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed:\n{result.stderr}")
    return result.stdout


def render(binary: str, root: str, name: str) -> List[Manifest]:
    out = kubectl(binary, "kustomize", os.path.join(root, "deploy", "kubernetes", name))
    return [d for d in yaml.safe_load_all(out) if d]


def _missing(written: Any, typed: Any, path: str) -> List[str]:
    """Fields of `written` that `typed` lacks or holds differently."""
    if isinstance(written, dict):
        if not isinstance(typed, dict):
            return [f"{path}: became {typed!r}"]
        out: List[str] = []
        for key, value in written.items():
            if key not in typed:
                out.append(f"{path}.{key}: dropped (unknown to the Kubernetes API)")
            else:
                out += _missing(value, typed[key], f"{path}.{key}")
        return out
    if isinstance(written, list):
        if not isinstance(typed, list) or len(typed) != len(written):
            return [f"{path}: became {typed!r}"]
        return [m for i, (w, t) in enumerate(zip(written, typed))
                for m in _missing(w, t, f"{path}[{i}]")]
    # Quantities come back as strings ("1" for 1).
    return [] if written == typed or str(written) == str(typed) else \
        [f"{path}: {written!r} came back as {typed!r}"]


def typed_roundtrip(binary: str, ds: Manifest) -> List[str]:
    """What kubectl's typed API drops or changes of the DaemonSet."""
    # A change is needed for kubectl to print the object: a variable, taken
    # out again before comparing.
    out = kubectl(binary, "set", "env", "--local", "-f", "-", "-o", "json",
                  f"{PROBE_VARIABLE}=1", stdin=json.dumps(ds))
    typed = json.loads(out)
    for c in typed["spec"]["template"]["spec"]["containers"]:
        c["env"] = [e for e in c.get("env", []) if e["name"] != PROBE_VARIABLE]
    return _missing(ds, typed, "DaemonSet")


def config_of(docs: List[Manifest]) -> Dict[str, Any]:
    """The xferd.toml the ConfigMap holds, parsed."""
    return tomllib.loads(find(docs, "ConfigMap")["data"]["xferd.toml"])


def check_invariants(docs: List[Manifest], variant: str, version: str) -> None:
    """What the DaemonSet must keep true; AssertionError names the first that does not."""
    ds, cm, ns = find(docs, "DaemonSet"), find(docs, "ConfigMap"), find(docs, "Namespace")
    spec = ds["spec"]["template"]["spec"]
    pod = Pod.from_daemonset(ds)
    config = config_of(docs)
    assert spec.get("hostNetwork") is True, "hostNetwork must be true"
    assert ns["metadata"]["name"] == ds["metadata"]["namespace"] == cm["metadata"]["namespace"]
    assert pod.image == f"localhost/xferd:{version}", \
        f"image {pod.image}: set newTag in deploy/kubernetes/base/kustomization.yaml to {version}"
    assert pod.volumes["config"]["configMap"]["name"] == cm["metadata"]["name"], \
        "the config volume must name the generated ConfigMap"
    assert pod.volumes["tls"]["secret"]["secretName"] == "xferd-tls"
    # Drain: the daemon's drain, then its goodbyes (about 5 s), fit in the
    # preStop's wait, which fits in the grace period.
    drain = _seconds(config["engine"]["drain_timeout"])
    assert pod.pre_stop[:2] == ["xferd-probe", "drain"], f"preStop is {pod.pre_stop}"
    wait = float(next(a.split("=", 1)[1] for a in pod.pre_stop if a.startswith("--wait=")))
    assert drain + 5 <= wait < pod.grace_seconds, \
        f"need drain_timeout ({drain} s) + 5 <= preStop --wait ({wait}) < " \
        f"terminationGracePeriodSeconds ({pod.grace_seconds})"
    assert pod.ready == ["xferd-probe", "ready"] and pod.live == ["xferd-probe", "live"]
    # The unix sockets are on a host path application pods mount (shm
    # regions' memory comes over the local socket: no shared /dev/shm).
    socket_dir = os.path.dirname(config["server"]["unix_socket"])
    assert pod.mounts["run"] == socket_dir and "hostPath" in pod.volumes["run"], \
        f"{socket_dir} must be the hostPath volume run"
    assert all(d.startswith(pod.mounts["data"]) for d in config["regions"]["file_dirs"])
    args = pod.args
    for flag, port in (("--listen", "grpc"), ("--data-listen", "data"),
                       ("--metrics-listen", "metrics")):
        assert f"{flag}=$(HOST_IP):{pod.ports[port]}" in args, f"{flag} on the {port} port"
    for flag in ("--tls-ca", "--tls-cert", "--tls-key"):
        assert any(a.startswith(f"{flag}={pod.mounts['tls']}/") for a in args), flag
    assert config["cluster"]["etcd"], "the ConfigMap names the etcd endpoints"
    assert pod.caps_drop == ["ALL"], "every capability is dropped first"
    rdma_limits = spec["containers"][0].get("resources", {}).get("limits", {})
    if variant == "tcp":
        assert pod.caps_add == [] and "--transport=tcp" in args and not rdma_limits
    else:
        assert pod.caps_add == ["IPC_LOCK"], "pinning memory needs IPC_LOCK, nothing else"
    if variant == "base":
        assert "rdma/hca_shared_devices_a" in rdma_limits, "the device plugin's resource"
    if variant == "no-device-plugin":
        assert pod.privileged and pod.mounts["infiniband"] == "/dev/infiniband" and \
            pod.volumes["infiniband"]["hostPath"]["path"] == "/dev/infiniband" and not rdma_limits


def _seconds(duration: str) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)", duration)
    assert m, f"unexpected duration {duration!r}"
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60}[m.group(2)]


def tls_secret(binary: str, tls_dir: str) -> Manifest:
    """The Secret xferd-tls as deploy/kubernetes.md makes it, from a directory
    of ca.pem and <node>.pem/<node>.key files."""
    out = kubectl(binary, "create", "secret", "generic", "xferd-tls", "--namespace=xferd",
                  f"--from-file={tls_dir}", "--dry-run=client", "-o", "yaml")
    secret: Manifest = yaml.safe_load(out)
    return secret
