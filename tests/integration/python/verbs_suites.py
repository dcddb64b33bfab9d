"""Runs, in one pytest process, every suite of its target
(//tests/integration/python:verbs_suites lists them): the Soft-RoCE VM's
Python suites over verbs (tests/softroce/suite_guest.sh). Under the VM's
software emulation, starting Python and importing pytest, numpy and gRPC
costs about 15 s a process; the suites share nothing else (each module
starts its own daemons). Arguments go to pytest.
"""

import glob
import os
import sys

import pytest_main

if __name__ == "__main__":
    # The target's runfiles hold its suites and no other *_test.py.
    here = os.path.dirname(os.path.abspath(__file__))
    suites = sorted(glob.glob(os.path.join(here, "*_test.py")))
    if not suites:
        sys.exit(f"verbs_suites: no *_test.py beside {__file__}")
    sys.exit(pytest_main.run(suites, sys.argv[1:]))
