"""Runs the many-block example of client/python/README.md against two real
daemons, so the documented code keeps working: its targets and node id are
replaced by the test cluster's, and each replacement must find its text."""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys

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


def example(text: str) -> str:
    """The Python block under "## Many blocks in one transfer"."""
    section = text.split("## Many blocks in one transfer", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the README lost its many-block example"
    return match.group(1)


def test_kv_cache_example_runs(cluster: Cluster) -> None:
    code = example(readme())
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
        for name in ("prefill", "decode"):
            if name in namespace:
                namespace[name].close()
    assert out.getvalue() == "6 98304\n"


if __name__ == "__main__":
    sys.exit(pytest_main.main(__file__, sys.argv))
