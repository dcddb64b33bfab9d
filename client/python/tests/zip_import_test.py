"""The zip built by //client/python:xferd_zip imports with /usr/bin/python3
alone, outside Bazel: PYTHONPATH=xferd.zip is all it takes, and its stubs are
those of the current proto (many-block transfers, layouts, SubmitStream)."""

import os
import subprocess
import sys
import unittest

_PROBE = """
import xferd, xferd.v1.xferd_pb2_grpc as stubs
assert xferd.__file__.startswith(ZIP), xferd.__file__
assert stubs.__file__.startswith(ZIP), stubs.__file__
assert issubclass(xferd.NotFound, xferd.XferdError)
from xferd.v1 import xferd_pb2
assert xferd_pb2.TransferChunk(more_blocks=xferd_pb2.Blocks()).HasField("more_blocks")
import grpc
stub = stubs.XferdStub(grpc.insecure_channel("unix:/nonexistent.sock"))  # connects lazily
assert callable(stub.SubmitStream) and callable(stub.PrepareLayout) and callable(stub.Read)
assert callable(xferd.Client.write_blocks) and xferd.Strided and xferd.Layout
print(xferd.Client.__name__)
"""


def _zip_path() -> str:
    root = os.environ.get("TEST_SRCDIR") or os.environ["RUNFILES_DIR"]
    workspace = os.environ.get("TEST_WORKSPACE", "xferd")
    return os.path.join(root, workspace, "client", "python", "xferd.zip")


class ZipImportTest(unittest.TestCase):
    """Runs a fresh interpreter with only the zip on its path."""

    def test_imports_from_zip(self) -> None:
        zip_path = os.path.realpath(_zip_path())
        result = subprocess.run(
            ["/usr/bin/python3", "-c", f"ZIP = {zip_path!r}\n{_PROBE}"],
            env={"PYTHONPATH": zip_path, "PATH": "/usr/bin:/bin"}, cwd="/",
            capture_output=True, text=True, timeout=60, check=False)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.strip(), "Client")


if __name__ == "__main__":
    unittest.main(argv=sys.argv)
