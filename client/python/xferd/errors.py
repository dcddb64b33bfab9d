"""Errors raised by the xferd client.

Every failure the daemon reports (an RPC status, or the error of a transfer
that ended FAILED or CANCELLED) becomes an `XferdError` subclass chosen by its
gRPC status code, carrying the code and the daemon's message unchanged.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Dict, Optional, Type

import grpc

if TYPE_CHECKING:  # pragma: no cover - typing only
    from xferd.models import Transfer

__all__ = [
    "XferdError",
    "Cancelled",
    "Unknown",
    "InvalidArgument",
    "DeadlineExceeded",
    "NotFound",
    "AlreadyExists",
    "PermissionDenied",
    "ResourceExhausted",
    "FailedPrecondition",
    "Aborted",
    "OutOfRange",
    "Unimplemented",
    "Internal",
    "Unavailable",
    "DataLoss",
    "Unauthenticated",
    "code_from_number",
    "error_for",
    "from_rpc_error",
]

# SubmitBatch prefixes the message of an invalid write with its index.
_WRITE_INDEX = re.compile(r"^write #(\d+): ")


class XferdError(Exception):
    """A failure reported by an xferd daemon.

    Attributes:
        code: The canonical gRPC status code.
        message: The daemon's message, unchanged.
        transfer: For a transfer that ended FAILED or CANCELLED, its final
            snapshot; None for errors of an RPC itself.
    """

    #: The status code this class stands for (None on the base class).
    grpc_code: Optional[grpc.StatusCode] = None

    def __init__(self, code: grpc.StatusCode, message: str,
                 transfer: Optional["Transfer"] = None) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message
        self.transfer = transfer

    @property
    def write_index(self) -> Optional[int]:
        """For a refused batch, the index of the write the daemon named."""
        match = _WRITE_INDEX.match(self.message)
        return int(match.group(1)) if match else None


class Cancelled(XferdError):
    """CANCELLED: the operation or transfer was cancelled."""

    grpc_code = grpc.StatusCode.CANCELLED


class Unknown(XferdError):
    """UNKNOWN: an error the daemon could not classify."""

    grpc_code = grpc.StatusCode.UNKNOWN


class InvalidArgument(XferdError):
    """INVALID_ARGUMENT: a malformed request (name, size, length, option)."""

    grpc_code = grpc.StatusCode.INVALID_ARGUMENT


class DeadlineExceeded(XferdError):
    """DEADLINE_EXCEEDED: a transfer or call did not finish in time."""

    grpc_code = grpc.StatusCode.DEADLINE_EXCEEDED


class NotFound(XferdError):
    """NOT_FOUND: no such region, peer or transfer."""

    grpc_code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(XferdError):
    """ALREADY_EXISTS: the region name is taken."""

    grpc_code = grpc.StatusCode.ALREADY_EXISTS


class PermissionDenied(XferdError):
    """PERMISSION_DENIED: access flags or the ACL forbid the operation."""

    grpc_code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhausted(XferdError):
    """RESOURCE_EXHAUSTED: memory, registration or transfer limits reached."""

    grpc_code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPrecondition(XferdError):
    """FAILED_PRECONDITION: the system is not in a state that allows it."""

    grpc_code = grpc.StatusCode.FAILED_PRECONDITION


class Aborted(XferdError):
    """ABORTED: the operation was aborted (e.g. a conflict)."""

    grpc_code = grpc.StatusCode.ABORTED


class OutOfRange(XferdError):
    """OUT_OF_RANGE: an offset or length beyond a region's bounds."""

    grpc_code = grpc.StatusCode.OUT_OF_RANGE


class Unimplemented(XferdError):
    """UNIMPLEMENTED: the daemon does not support the operation."""

    grpc_code = grpc.StatusCode.UNIMPLEMENTED


class Internal(XferdError):
    """INTERNAL: a broken invariant inside the daemon."""

    grpc_code = grpc.StatusCode.INTERNAL


class Unavailable(XferdError):
    """UNAVAILABLE: the daemon or a peer cannot be reached (retryable)."""

    grpc_code = grpc.StatusCode.UNAVAILABLE


class DataLoss(XferdError):
    """DATA_LOSS: unrecoverable data loss or corruption."""

    grpc_code = grpc.StatusCode.DATA_LOSS


class Unauthenticated(XferdError):
    """UNAUTHENTICATED: the caller could not be authenticated."""

    grpc_code = grpc.StatusCode.UNAUTHENTICATED


_BY_CODE: Dict[grpc.StatusCode, Type[XferdError]] = {
    cls.grpc_code: cls for cls in XferdError.__subclasses__() if cls.grpc_code is not None
}
# google.rpc.Code numbers (as carried in xferd.v1.Error) -> grpc.StatusCode.
_BY_NUMBER: Dict[int, grpc.StatusCode] = {code.value[0]: code for code in grpc.StatusCode}


def code_from_number(number: int) -> grpc.StatusCode:
    """The grpc.StatusCode of a google.rpc.Code number (UNKNOWN if unknown)."""
    return _BY_NUMBER.get(number, grpc.StatusCode.UNKNOWN)


def error_for(code: "grpc.StatusCode | int", message: str,
              transfer: Optional["Transfer"] = None) -> XferdError:
    """Builds the XferdError subclass for a status code (enum or number)."""
    if isinstance(code, int):
        code = code_from_number(code)
    return _BY_CODE.get(code, XferdError)(code, message, transfer)


def from_rpc_error(error: grpc.RpcError) -> XferdError:
    """Converts an exception raised by a gRPC stub into an XferdError."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = error.details() if hasattr(error, "details") else str(error)
    return error_for(code or grpc.StatusCode.UNKNOWN, details or "")
