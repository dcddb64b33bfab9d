"""Runs the Python examples of client/python/README.md (blocking, asyncio,
numpy, torch when installed, many blocks) against two real daemons, so the
documented code keeps working: its targets and node id are replaced by the
test cluster's, and each replacement must find its text."""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
from typing import List, Optional, Sequence

import pytest

import pytest_main
from daemons import Cluster

DAEMONS = ("a", "b")
CONNECT = ()  # the example connects the peers itself


def readme() -> str:
    """client/python/README.md from the test's runfiles."""
    root = os.environ.get("TEST_SRCDIR") or os.environ["RUNFILES_DIR"]
    workspace = os.environ.get("TEST_WORKSPACE", "xferd")
    with open(os.path.join(root, workspace, "client", "python", "README.md")) as f:
        return f.read()


def examples(text: str, heading: Optional[str]) -> List[str]:
    """The Python blocks under `heading` (None: before the first "## ")."""
    if heading is None:
        section = text.split("\n## ", 1)[0]
    else:
        section = text.split(heading + "\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks, f"the README lost its examples under {heading}"
    return blocks


def run(code: str, cluster: Cluster, closing: Sequence[str] = ()) -> str:
    """Runs one example against the cluster; returns what it printed."""
    for documented, actual in (('"unix:/run/xferd/xferd.sock"', repr(cluster["a"].target)),
                               ('"10.0.0.2:7300"', repr(cluster["b"].address)),
                               ('"node-b"', '"b"')):
        assert documented in code, f"the example no longer uses {documented}"
        code = code.replace(documented, actual)
    namespace: dict = {}
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, "README.md example", "exec"), namespace)  # its asserts check
    finally:
        for name in closing:
            if name in namespace:
                namespace[name].close()
    return out.getvalue()


def test_kv_cache_example_runs(cluster: Cluster) -> None:
    [code] = examples(readme(), "## Many blocks in one transfer")
    assert run(code, cluster, ("prefill", "decode")) == "6 98304\n"


def test_sync_example_runs(cluster: Cluster) -> None:
    [code] = examples(readme(), None)
    assert run(code, cluster) == ""


def test_asyncio_example_runs(cluster: Cluster) -> None:
    [code] = examples(readme(), "## asyncio")
    assert run(code, cluster).splitlines()[-1] == "done 6553600"


def test_numpy_example_runs(cluster: Cluster) -> None:
    code = examples(readme(), "## numpy and torch")[0]
    assert run(code, cluster).startswith("region 'acts' was deregistered or its client closed")


def test_torch_example_runs(cluster: Cluster) -> None:
    pytest.importorskip("torch", reason="torch is not installed (python3-torch): its "
                        "README example is not run")
    code = examples(readme(), "## numpy and torch")[1]
    assert run(code, cluster) == ""


if __name__ == "__main__":
    sys.exit(pytest_main.main(__file__, sys.argv))
