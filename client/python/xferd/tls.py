"""`TlsConfig`: mutual TLS to a daemon's TCP address.

A daemon with a [tls] section requires a client certificate issued by its CA
(tls.ca, or tls.client_ca) on its TCP address; its unix socket stays plain
(access there is by file permission). The daemon's certificate must name the
host of the target (DNS or IP subjectAltName), or give `server_name`.
"""

from __future__ import annotations

import dataclasses
import os
from typing import List, Optional, Tuple

import grpc

__all__ = ["TlsConfig"]


def _read(path: Optional[str]) -> Optional[bytes]:
    if not path:
        return None
    with open(path, "rb") as f:
        return f.read()


@dataclasses.dataclass(frozen=True)
class TlsConfig:
    """PEM files for mTLS: `ca` verifies the daemon; `cert` and `key` are
    this client's certificate and key (required by daemons with [tls]).

    `server_name` overrides the name checked against the daemon's
    certificate (default: the host of the target).
    """

    ca: str
    cert: Optional[str] = None
    key: Optional[str] = None
    server_name: Optional[str] = None

    @classmethod
    def from_env(cls) -> Optional["TlsConfig"]:
        """From $XFERD_TLS_CA, $XFERD_TLS_CERT, $XFERD_TLS_KEY (as xferctl);
        None when $XFERD_TLS_CA is unset."""
        ca = os.environ.get("XFERD_TLS_CA")
        if not ca:
            return None
        return cls(ca=ca, cert=os.environ.get("XFERD_TLS_CERT") or None,
                   key=os.environ.get("XFERD_TLS_KEY") or None)

    def credentials(self) -> grpc.ChannelCredentials:
        """gRPC channel credentials from the files (read now).

        Raises:
            ValueError: only one of cert and key is given.
            OSError: a file cannot be read.
        """
        if bool(self.cert) != bool(self.key):
            raise ValueError("TlsConfig: give both cert and key, or neither")
        return grpc.ssl_channel_credentials(root_certificates=_read(self.ca),
                                            private_key=_read(self.key),
                                            certificate_chain=_read(self.cert))

    def channel_options(self) -> List[Tuple[str, str]]:
        """Channel options the configuration needs (the name override)."""
        if self.server_name:
            return [("grpc.ssl_target_name_override", self.server_name)]
        return []
