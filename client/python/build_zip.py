"""Build tool: packs Python files into a zip importable through PYTHONPATH.

Usage: build_zip.py OUT.zip PACKAGE_DIR FILE...

Each FILE (a source or a generated file) is stored under its path relative to
the last occurrence of PACKAGE_DIR (e.g. "client/python/"), so
client/python/xferd/client.py and bazel-out/.../client/python/xferd/v1/x_pb2.py
become xferd/client.py and xferd/v1/x_pb2.py. Entries are sorted and carry a
fixed timestamp, so the zip is reproducible.
"""

import sys
import zipfile
from typing import List

_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can carry


def archive_name(path: str, package_dir: str) -> str:
    """The path of `path` inside the zip."""
    index = path.rfind(package_dir)
    if index < 0:
        raise SystemExit(f"{path} is not under {package_dir}")
    return path[index + len(package_dir):]


def write_entry(archive: zipfile.ZipFile, name: str, data: bytes) -> None:
    """Adds `data` as `name`, with the fixed timestamp and mode 0644."""
    info = zipfile.ZipInfo(name, date_time=_EPOCH)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    archive.writestr(info, data)


def main(argv: List[str]) -> int:
    """Writes the zip; returns the exit code."""
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    out, package_dir, files = argv[1], argv[2], argv[3:]
    entries = sorted((archive_name(f, package_dir), f) for f in files)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, path in entries:
            with open(path, "rb") as f:
                write_entry(archive, name, f.read())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
