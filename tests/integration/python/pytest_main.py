"""Runs one test file under pytest, as the main of a Bazel py_test (or
several in one process: verbs_suites.py).

Honours Bazel's test filter (--test_filter -> TESTBRIDGE_TEST_ONLY, passed to
pytest's -k) and writes a JUnit XML report where Bazel asks for one.
"""

import os
from typing import List, Sequence

import pytest


def main(test_file: str, argv: List[str]) -> int:
    """Runs the tests of `test_file`; returns pytest's exit code."""
    return run([test_file], argv[1:])


def run(test_files: Sequence[str], extra: List[str]) -> int:
    """Runs the tests of `test_files` with pytest arguments `extra`; returns
    pytest's exit code."""
    args = [*test_files, "-v", "-rs", "-p", "no:cacheprovider", "--durations=5"]  # -rs: why skipped
    only = os.environ.get("TESTBRIDGE_TEST_ONLY")
    if only:
        args += ["-k", only]
    xml = os.environ.get("XML_OUTPUT_FILE")
    if xml:
        args += ["--junitxml", xml]
    return int(pytest.main(args + extra))
