"""Build tool: writes the xferd wheel (a zip with a .dist-info directory).

Usage: build_wheel.py OUT.whl VERSION PYPROJECT README PACKAGE_DIR FILE...

The package files are placed as build_zip.py places them (relative to the last
PACKAGE_DIR in their path, so generated stubs join the sources). METADATA
(core metadata 2.1) comes from PYPROJECT's [project] table, with VERSION (the
daemon's, from //:version.bzl) and README as the long description; WHEEL says
pure Python, py3-none-any; RECORD has every file's sha256 and size. Entries are
sorted with a fixed timestamp, so the wheel is reproducible.
"""

import base64
import hashlib
import sys
import tomllib
import zipfile
from typing import Any, Dict, List, Tuple

from build_zip import archive_name, write_entry

_WHEEL = """Wheel-Version: 1.0
Generator: xferd build_wheel.py
Root-Is-Purelib: true
Tag: py3-none-any
"""


def metadata(project: Dict[str, Any], version: str, readme: str) -> str:
    """The METADATA file of `project` (a pyproject [project] table)."""
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {version}",
        f"Summary: {project['description']}",
        f"Requires-Python: {project['requires-python']}",
    ]
    lines += [f"Classifier: {c}" for c in project.get("classifiers", [])]
    lines += [f"Requires-Dist: {d}" for d in project.get("dependencies", [])]
    for extra, deps in sorted(project.get("optional-dependencies", {}).items()):
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {d}; extra == "{extra}"' for d in deps]
    lines.append("Description-Content-Type: text/markdown")
    return "\n".join(lines) + "\n\n" + readme


def record_line(name: str, data: bytes) -> str:
    """A RECORD row: path, urlsafe-base64 sha256 without padding, size."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"{name},sha256={digest.decode()},{len(data)}"


def main(argv: List[str]) -> int:
    """Writes the wheel; returns the exit code."""
    if len(argv) < 7:
        print(__doc__, file=sys.stderr)
        return 2
    out, version, pyproject, readme, package_dir, files = (
        argv[1], argv[2], argv[3], argv[4], argv[5], argv[6:])
    with open(pyproject, "rb") as f:
        project = tomllib.load(f)["project"]
    if project.get("dynamic") != ["version"]:
        raise SystemExit(f"{pyproject}: [project] must declare dynamic = [\"version\"]: "
                         "the version is the daemon's, from //:version.bzl")
    with open(readme, encoding="utf-8") as f:
        description = f.read()

    entries: List[Tuple[str, bytes]] = []
    for name, path in sorted((archive_name(p, package_dir), p) for p in files):
        with open(path, "rb") as f:
            entries.append((name, f.read()))
    top_level = "".join(f"{n}\n" for n in sorted({name.split("/")[0] for name, _ in entries}))
    dist_info = f"{project['name']}-{version}.dist-info"
    entries += [
        (f"{dist_info}/METADATA", metadata(project, version, description).encode()),
        (f"{dist_info}/WHEEL", _WHEEL.encode()),
        (f"{dist_info}/top_level.txt", top_level.encode()),
    ]
    record = "".join(record_line(n, d) + "\n" for n, d in entries) + f"{dist_info}/RECORD,,\n"
    entries.append((f"{dist_info}/RECORD", record.encode()))
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries:
            write_entry(archive, name, data)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
