"""The xferd DaemonSet's pod, read from the rendered manifests and run by podman.

The container stage runs the image the way deploy/kubernetes/base describes
its pod: the same arguments (with $(VAR) expanded as the kubelet does), user,
capabilities, read-only root, mounts, probes and preStop hook. Only what a
single test host must change is changed: each node's hostPath directories,
its loopback address and node name, and the etcd endpoints.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional

Manifest = Dict[str, Any]


def find(docs: List[Manifest], kind: str) -> Manifest:
    """The one document of this kind; AssertionError if there is not exactly one."""
    found = [d for d in docs if d.get("kind") == kind]
    assert len(found) == 1, f"expected one {kind} in the manifests, found {len(found)}"
    return found[0]


def expand(value: str, env: Mapping[str, str]) -> str:
    """Kubernetes' $(VAR) expansion: defined names are replaced, $$ is a
    literal $, anything else is left as written."""
    def one(m: "re.Match[str]") -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env[name] if name in env else m.group(0)
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)", one, value)


@dataclass
class Pod:
    """What podman needs of the DaemonSet's pod template."""
    args: List[str]
    field_env: Dict[str, str]            # env name -> fieldRef path
    run_as: Optional[str]                # "uid:gid" from the pod's securityContext
    fs_group: Optional[int]
    caps_add: List[str]
    caps_drop: List[str]
    read_only: bool
    no_new_privileges: bool
    privileged: bool
    mounts: Dict[str, str]               # volume name -> mountPath
    volumes: Dict[str, Manifest]         # volume name -> its definition
    ready: List[str]
    live: List[str]
    pre_stop: List[str]
    grace_seconds: int
    image: str
    ports: Dict[str, int] = field(default_factory=dict)

    @staticmethod
    def from_daemonset(ds: Manifest) -> "Pod":
        spec = ds["spec"]["template"]["spec"]
        assert len(spec["containers"]) == 1, "the pod has one container, xferd"
        c = spec["containers"][0]
        pod_sc = spec.get("securityContext", {})
        sc = c.get("securityContext", {})
        caps = sc.get("capabilities", {})
        run_as = None
        if "runAsUser" in pod_sc:
            run_as = f"{pod_sc['runAsUser']}:{pod_sc.get('runAsGroup', pod_sc['runAsUser'])}"
        return Pod(
            args=list(c.get("args", [])),
            field_env={e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"]
                       for e in c.get("env", []) if "valueFrom" in e},
            run_as=run_as,
            fs_group=pod_sc.get("fsGroup"),
            caps_add=list(caps.get("add", [])),
            caps_drop=list(caps.get("drop", [])),
            read_only=bool(sc.get("readOnlyRootFilesystem")),
            no_new_privileges=sc.get("allowPrivilegeEscalation") is False,
            privileged=bool(sc.get("privileged")),
            mounts={m["name"]: m["mountPath"] for m in c.get("volumeMounts", [])},
            volumes={v["name"]: v for v in spec.get("volumes", [])},
            ready=list(c["readinessProbe"]["exec"]["command"]),
            live=list(c["livenessProbe"]["exec"]["command"]),
            pre_stop=list(c["lifecycle"]["preStop"]["exec"]["command"]),
            grace_seconds=int(spec["terminationGracePeriodSeconds"]),
            image=c["image"],
            ports={p["name"]: int(p["containerPort"]) for p in c.get("ports", [])})

    def expanded_args(self, node_name: str, host_ip: str) -> List[str]:
        values = {"spec.nodeName": node_name, "status.hostIP": host_ip}
        env = {name: values[path] for name, path in self.field_env.items()}
        return [expand(a, env) for a in self.args]

    def podman_run(self, name: str, image: str, node_name: str, host_ip: str,
                   host_dirs: Mapping[str, str], user: Optional[str] = "pod",
                   extra_args: Optional[List[str]] = None) -> List[str]:
        """`podman run` for this pod on one node. host_dirs: volume name ->
        the host directory standing in for it (hostPath, ConfigMap, Secret).
        user: "pod" for the pod's securityContext, None for the image's own."""
        cmd = ["podman", "run", "-d", "--name", name, "--network", "host",
               "--read-only-tmpfs=false"]
        if self.read_only:
            cmd.append("--read-only")
        if self.no_new_privileges:
            cmd += ["--security-opt", "no-new-privileges"]
        for cap in self.caps_drop:
            cmd += ["--cap-drop", cap.lower()]
        for cap in self.caps_add:
            cmd += ["--cap-add", cap.lower()]
        if user == "pod" and self.run_as:
            cmd += ["--user", self.run_as]
            if self.fs_group is not None:
                cmd += ["--group-add", str(self.fs_group)]
        for volume, path in self.mounts.items():
            readonly = ":ro" if "configMap" in self.volumes[volume] or \
                "secret" in self.volumes[volume] else ""
            cmd += ["-v", f"{host_dirs[volume]}:{path}{readonly}"]
        for name_, path in self.field_env.items():
            value = node_name if path == "spec.nodeName" else host_ip
            cmd += ["-e", f"{name_}={value}"]
        cmd.append(image)
        cmd += self.expanded_args(node_name, host_ip) + (extra_args or [])
        return cmd


def podman(*args: str, timeout: float = 120,
           check: bool = True) -> "subprocess.CompletedProcess[str]":
    """Runs podman; with check, a failure raises AssertionError with its output."""
    result = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout,
                            check=False)
    if check and result.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} exited {result.returncode}:\n"
                             f"{result.stdout}{result.stderr}")
    return result
