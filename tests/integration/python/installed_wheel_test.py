"""The wheel as a user gets it: //client/python:wheel is pip-installed into a
fresh venv (Debian's python3-venv, --system-site-packages for Debian's grpcio
and protobuf, no package index), then integration cases run against that
installed package, not the source tree: a pytest plugin fails the run unless
`xferd` (and its stubs) import from the venv. Also: pip show and pip uninstall
in the venv, and /usr/bin/python3's own pip installing it under a scratch
--root (the system's site-packages stay untouched).

The cases are the integration suites that exercise the package's surface
(PACKAGE_SUITES: every module of it, sync and asyncio, arrays, TLS, the
request rings, errors), about 50 s on two cores. The suites about the
daemon's own behaviour (failures, the cluster directory, metrics, paging,
systemd) use the same package calls and run from the source tree only."""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
import textwrap
from typing import Dict, Iterator, List

import pytest

import pytest_main
from daemons import daemon_binary

PACKAGE_SUITES = ("aio_test.py", "arrays_test.py", "bad_input_test.py", "blocks_test.py",
                  "readme_example_test.py", "rings_test.py", "security_test.py",
                  "transfers_test.py")
# Bound on the installed run of the cases (about 80 s alone).
CASES_TIMEOUT_S = 600
PIP_TIMEOUT_S = 120

# Loaded into the pytest run by -p: fails it at start unless the package (and
# its generated stubs) come from the venv's site-packages.
_PLUGIN = textwrap.dedent("""
    import os, sys, pytest, xferd, xferd.v1.xferd_pb2 as stubs

    def pytest_configure(config):
        site = os.environ["XFERD_EXPECT_SITE"]
        for module in (xferd, stubs):
            if not os.path.realpath(module.__file__).startswith(site + os.sep):
                raise pytest.UsageError(
                    f"{module.__name__} imports from {module.__file__}, not from {site}")
        print(f"xferd {xferd.__file__} (python {sys.executable})", file=sys.stderr)
""")


def _runfiles(*parts: str) -> str:
    root = os.environ.get("TEST_SRCDIR") or os.environ["RUNFILES_DIR"]
    return os.path.join(root, os.environ.get("TEST_WORKSPACE", "xferd"), *parts)


def _run(args: List[str], env: Dict[str, str], timeout: float,
         cwd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, check=False)


@pytest.fixture(scope="module")
def wheel() -> str:
    found = glob.glob(_runfiles("client", "python", "xferd-*-py3-none-any.whl"))
    assert len(found) == 1, found
    return os.path.realpath(found[0])


@pytest.fixture(scope="module")
def scratch() -> str:
    """A directory with no xferd in it, the children's working directory (a
    `python -m` run puts its cwd first on sys.path)."""
    path = os.path.join(os.environ.get("TEST_TMPDIR", "/tmp"), "installed_wheel")
    os.makedirs(path, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def clean_env(scratch: str) -> Dict[str, str]:
    """This test's environment without Bazel's PYTHONPATH (which holds the
    source tree's package), so only an installed xferd can be imported."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PATH"] = "/usr/bin:/bin"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PIP_ROOT_USER_ACTION"] = "ignore"
    env["XFERD_BIN"] = daemon_binary()
    return env


@pytest.fixture(scope="module")
def venv(wheel: str, scratch: str, clean_env: Dict[str, str]) -> Iterator[str]:
    """A fresh venv with the wheel installed by pip, dependencies checked
    against what the venv sees (Debian's, through --system-site-packages)."""
    path = os.path.join(scratch, "venv")
    made = _run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", path], clean_env,
                PIP_TIMEOUT_S, scratch)
    assert made.returncode == 0, made.stderr
    pip = _run([f"{path}/bin/python", "-m", "pip", "install", "--no-index", wheel], clean_env,
               PIP_TIMEOUT_S, scratch)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    assert "Successfully installed xferd-" in pip.stdout, pip.stdout
    yield path


def _pip_show(python: str, env: Dict[str, str], cwd: str) -> Dict[str, str]:
    shown = _run([python, "-m", "pip", "show", "xferd"], env, PIP_TIMEOUT_S, cwd)
    assert shown.returncode == 0, shown.stderr
    return dict(line.split(": ", 1) for line in shown.stdout.splitlines() if ": " in line)


def test_pip_shows_the_daemons_version(venv: str, wheel: str, clean_env: Dict[str, str],
                                       scratch: str) -> None:
    daemon = _run([daemon_binary(), "--version"], clean_env, 30, scratch)
    version = daemon.stdout.strip()
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), daemon.stdout
    assert os.path.basename(wheel) == f"xferd-{version}-py3-none-any.whl"
    shown = _pip_show(f"{venv}/bin/python", clean_env, scratch)
    assert shown["Name"] == "xferd" and shown["Version"] == version, shown
    assert shown["Location"].startswith(venv + os.sep), shown
    assert sorted(shown["Requires"].split(", ")) == ["grpcio", "protobuf"], shown
    typed = os.path.join(shown["Location"], "xferd", "py.typed")
    assert os.path.exists(typed), typed


def test_integration_cases_against_the_installed_package(
        venv: str, scratch: str, clean_env: Dict[str, str]) -> None:
    plugin_dir = os.path.join(scratch, "plugin")
    os.makedirs(plugin_dir, exist_ok=True)
    with open(os.path.join(plugin_dir, "xferd_installed_check.py"), "w") as f:
        f.write(_PLUGIN)
    tests_dir = _runfiles("tests", "integration", "python")
    site = _run([f"{venv}/bin/python", "-c",
                 "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                clean_env, 30, scratch).stdout.strip()
    env = dict(clean_env,
               # The suites' helpers (testlib, conftest, daemons), never the package.
               PYTHONPATH=os.pathsep.join([plugin_dir, tests_dir,
                                           _runfiles("tests", "testing", "python")]),
               XFERD_EXPECT_SITE=os.path.realpath(site))
    cases = [os.path.join(tests_dir, name) for name in PACKAGE_SUITES]
    missing = [c for c in cases if not os.path.exists(c)]
    assert not missing, f"suites renamed or gone: {missing}"
    result = _run([f"{venv}/bin/python", "-m", "pytest", "-p", "xferd_installed_check",
                   "-p", "no:cacheprovider", "-q", "-rs", *cases],
                  env, CASES_TIMEOUT_S, scratch)
    report = result.stdout + result.stderr
    print(report[-4000:])
    assert result.returncode == 0, report[-8000:]
    assert f"xferd {os.path.realpath(site)}" in report or f"xferd {site}" in report, report[-2000:]
    summary = re.search(r"(\d+) passed", report)
    assert summary and int(summary.group(1)) >= 50, report[-2000:]
    assert " failed" not in report.splitlines()[-1], report[-2000:]


def test_pip_uninstall_removes_it(venv: str, scratch: str, clean_env: Dict[str, str]) -> None:
    python = f"{venv}/bin/python"
    removed = _run([python, "-m", "pip", "uninstall", "-y", "xferd"], clean_env, PIP_TIMEOUT_S,
                   scratch)
    assert removed.returncode == 0, removed.stderr
    assert "Successfully uninstalled xferd-" in removed.stdout, removed.stdout
    gone = _run([python, "-c", "import xferd"], clean_env, 30, scratch)
    assert gone.returncode != 0 and "No module named 'xferd'" in gone.stderr, gone.stderr
    assert _run([python, "-m", "pip", "show", "xferd"], clean_env, 30, scratch).returncode != 0


def test_system_python_installs_it(wheel: str, scratch: str, clean_env: Dict[str, str]) -> None:
    """/usr/bin/python3's pip (Debian's, externally managed) under a scratch
    --root: where Debian puts a root's pip installs, with the metadata."""
    root = os.path.join(scratch, "sysroot")
    pip = _run(["/usr/bin/python3", "-m", "pip", "install", "--break-system-packages",
                "--no-index", "--root", root, wheel], clean_env, PIP_TIMEOUT_S, scratch)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    found = glob.glob(os.path.join(root, "usr/local/lib/python3*/dist-packages"))
    assert len(found) == 1, found
    env = dict(clean_env, PYTHONPATH=found[0])
    shown = _pip_show("/usr/bin/python3", env, scratch)
    assert shown["Location"] == found[0], shown
    imported = _run(["/usr/bin/python3", "-c", "import xferd; print(xferd.__file__)"], env, 30,
                    scratch)
    assert imported.stdout.startswith(found[0] + os.sep), imported.stdout + imported.stderr


if __name__ == "__main__":
    sys.exit(pytest_main.main(__file__, sys.argv))
