"""A PEP 517 build backend that refuses to build from the source tree.

The package needs gRPC stubs generated at build time, so its wheel is built by
Bazel (`bazel build //client/python:wheel`, see README.md). `pip install
client/python` reaches this backend and gets that advice, not a wheel
without stubs that fails on import.
"""

from typing import Any, Dict, List, Optional

_ADVICE = ("the xferd wheel is built by Bazel, with its generated gRPC stubs: run "
           "`bazel build //client/python:wheel`, then "
           "`pip install bazel-bin/client/python/xferd-*-py3-none-any.whl`")


def _refuse(*_: Any, **__: Any) -> str:
    raise RuntimeError(_ADVICE)


def get_requires_for_build_wheel(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    """Nothing to install first: the build is refused anyway."""
    return []


build_wheel = _refuse
build_sdist = _refuse
