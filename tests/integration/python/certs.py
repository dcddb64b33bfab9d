"""Test certificates, made with the openssl CLI at test time: a CA, and
certificates it issues for daemons and clients, in a temporary directory.

Keys are P-256 (fast to make); certificates are valid for a day and allow
both TLS client and server use, as daemons need. By default a certificate
names its node id and localhost in DNS subjectAltNames and 127.0.0.1 in an
IP subjectAltName, because daemons dial each other at 127.0.0.1:port.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
from typing import Optional, Sequence

__all__ = ["Ca", "Cert"]

_OPENSSL = "openssl"
_DAYS = "1"


def _run(*args: str) -> None:
    done = subprocess.run([_OPENSSL, *args], stdin=subprocess.DEVNULL, capture_output=True)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed:\n{done.stderr.decode()}")


def _new_key(path: str) -> None:
    _run("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path)
    os.chmod(path, 0o600)


@dataclasses.dataclass(frozen=True)
class Cert:
    """PEM files of one certificate and its key."""

    name: str
    cert: str
    key: str

    def daemon_args(self, ca: "Ca") -> list:
        """xferd flags presenting this certificate, trusting `ca`."""
        return ["--tls-cert", self.cert, "--tls-key", self.key, "--tls-ca", ca.cert]


class Ca:
    """A certificate authority in `directory` (created if missing)."""

    def __init__(self, directory: str, name: str) -> None:
        os.makedirs(directory, exist_ok=True)
        self.directory = directory
        self.name = name
        self.cert = os.path.join(directory, f"{name}.pem")
        self.key = os.path.join(directory, f"{name}.key")
        self._serial = 0
        _new_key(self.key)
        _run("req", "-x509", "-new", "-key", self.key, "-out", self.cert, "-days", _DAYS,
             "-subj", f"/CN={name}", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")

    def issue(self, name: str, dns: Optional[Sequence[str]] = None,
              ips: Sequence[str] = ("127.0.0.1",), cn: Optional[str] = None) -> Cert:
        """A certificate for `name` (CN `cn`, default `name`) with DNS SANs
        `dns` (default: name and localhost) and IP SANs `ips`; no SAN at
        all when both are empty."""
        self._serial += 1
        stem = os.path.join(self.directory, f"{self.name}-{name}-{self._serial}")
        key, csr, cert, ext = stem + ".key", stem + ".csr", stem + ".pem", stem + ".ext"
        _new_key(key)
        _run("req", "-new", "-key", key, "-out", csr, "-subj", f"/CN={cn or name}")
        dns = [name, "localhost"] if dns is None else list(dns)
        sans = [f"DNS:{d}" for d in dns] + [f"IP:{ip}" for ip in ips]
        with open(ext, "w") as f:
            f.write("basicConstraints=CA:FALSE\n")
            f.write("extendedKeyUsage=serverAuth,clientAuth\n")
            if sans:
                f.write(f"subjectAltName={','.join(sans)}\n")
        _run("x509", "-req", "-in", csr, "-CA", self.cert, "-CAkey", self.key, "-out", cert,
             "-days", _DAYS, "-set_serial", str(self._serial), "-extfile", ext)
        return Cert(name=name, cert=cert, key=key)
