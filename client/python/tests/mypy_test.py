"""`mypy --strict` on the xferd package, generated stubs beside it, with the
configuration of client/python/pyproject.toml ([tool.mypy]): Debian's
python3-mypy, run on the package as Bazel lays it out in runfiles (sources and
generated stubs in one tree)."""

import os
import subprocess
import sys
import unittest


def _runfile(*parts: str) -> str:
    root = os.environ.get("TEST_SRCDIR") or os.environ["RUNFILES_DIR"]
    return os.path.join(root, os.environ.get("TEST_WORKSPACE", "xferd"), *parts)


class MypyTest(unittest.TestCase):
    """Type-checks the package; any error fails with mypy's report."""

    def test_package_is_strictly_typed(self) -> None:
        package_root = _runfile("client", "python")
        self.assertTrue(os.path.exists(os.path.join(package_root, "xferd", "v1", "xferd_pb2.py")),
                        "the generated stubs are missing from runfiles")
        cache = os.path.join(os.environ.get("TEST_TMPDIR", "/tmp"), "mypy_cache")
        result = subprocess.run(
            ["/usr/bin/python3", "-m", "mypy", "--config-file",
             os.path.join(package_root, "pyproject.toml"), "--cache-dir", cache,
             "--no-error-summary", "-p", "xferd"],
            env={"MYPYPATH": package_root, "PATH": "/usr/bin:/bin"}, cwd=package_root,
            capture_output=True, text=True, timeout=300, check=False)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertEqual(result.stdout.strip(), "")


if __name__ == "__main__":
    unittest.main(argv=sys.argv)
