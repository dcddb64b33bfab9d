"""Scrape security: daemons whose /metrics requires HTTP basic auth or a
bearer token, HTTPS, or HTTPS with client certificates of a CA. Scrapes
without credentials or with wrong ones are refused (401 names both schemes);
good ones get the metrics. Over HTTPS the scraper verifies the daemon's
certificate; plain HTTP to the HTTPS port gets no HTTP answer, and where a
client CA is set a scraper without a certificate, or with one another CA
signed, fails the TLS handshake. Broken settings stop the daemon at start-up
(and fail --check-config) naming the key. Certificates are made with openssl
at test time (certs.py)."""

from __future__ import annotations

import base64
import contextlib
import http.client
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from typing import Dict, Iterator, List, Optional, Tuple, Union

import pytest

import pytest_main
from certs import Ca, Cert
from daemons import Cluster, daemon_binary
from testlib import WAIT_S

TOKEN = "s3cret-token-of-the-scraper"
PASSWORD = "pa55word"


@contextlib.contextmanager
def daemon_with_auth(metrics: str = "") -> Iterator[Dict[str, str]]:
    """A daemon whose [metrics] has `metrics` and requires basic auth or a
    token."""
    directory = tempfile.mkdtemp(prefix="xferd-scrape-")
    token_file = os.path.join(directory, "token")
    password_file = os.path.join(directory, "password")
    for path, secret in ((token_file, TOKEN), (password_file, PASSWORD)):
        with open(path, "w") as f:
            f.write(secret + "\n")  # the trailing newline is not part of it
    config = (f'[metrics]\nlisten = "127.0.0.1:0"\n{metrics}basic_auth_user = "prometheus"\n'
              f'basic_auth_password_file = "{password_file}"\n'
              f'bearer_token_file = "{token_file}"\n')
    try:
        with Cluster(("a",), config_extra=config) as c:
            yield {"address": str(c["a"].info["metrics_address"])}
    finally:
        shutil.rmtree(directory)


@pytest.fixture(scope="module")
def secured() -> Iterator[Dict[str, str]]:
    """A daemon with metrics over HTTP requiring basic auth or a token."""
    with daemon_with_auth() as daemon:
        yield daemon


NO_ANSWER = "no HTTP answer"


def fetch(secured: Dict[str, str], authorization: Optional[str] = None,
          context: Optional[ssl.SSLContext] = None,
          scheme: Optional[str] = None) -> Union[int, str]:
    """The HTTP status of GET /metrics (the body checked on 200), or
    NO_ANSWER when the connection ended without one (a refused TLS
    handshake, plain HTTP to the HTTPS port). HTTPS with `context`."""
    scheme = scheme or ("https" if context else "http")
    request = urllib.request.Request(f"{scheme}://{secured['address']}/metrics")
    if authorization:
        request.add_header("Authorization", authorization)
    try:
        with urllib.request.urlopen(request, timeout=WAIT_S, context=context) as reply:
            assert b"# HELP xferd_" in reply.read()
            return reply.status
    except urllib.error.HTTPError as e:
        if e.code == 401:
            challenges = e.headers.get_all("WWW-Authenticate")
            assert sorted(c.split()[0] for c in challenges) == ["Basic", "Bearer"], challenges
        return e.code
    except (urllib.error.URLError, ssl.SSLError, ConnectionError, http.client.HTTPException):
        return NO_ANSWER


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_good_credentials_scrape(secured: Dict[str, str]) -> None:
    assert fetch(secured, basic("prometheus", PASSWORD)) == 200
    assert fetch(secured, f"Bearer {TOKEN}") == 200
    assert fetch(secured, f"bearer {TOKEN}") == 200  # schemes are case-insensitive


def test_missing_or_wrong_credentials_get_401(secured: Dict[str, str]) -> None:
    assert fetch(secured) == 401
    assert fetch(secured, basic("prometheus", PASSWORD + "x")) == 401
    assert fetch(secured, basic("someone", PASSWORD)) == 401
    assert fetch(secured, f"Bearer {TOKEN[:-1]}") == 401
    assert fetch(secured, f"Basic {TOKEN}") == 401  # a token is not a password
    assert fetch(secured, "Basic !!!not-base64") == 401
    assert fetch(secured, "Negotiate abc") == 401


class Pki:
    """A CA that signs the daemon's HTTPS certificate and the scraper's
    client certificate, and another CA with a client certificate of its own."""

    def __init__(self, directory: str) -> None:
        self.ca = Ca(os.path.join(directory, "ca"), "metrics-ca")
        self.server = self.ca.issue("metrics")  # DNS localhost, IP 127.0.0.1
        self.client = self.ca.issue("prometheus")
        self.other_ca = Ca(os.path.join(directory, "other"), "other-ca")
        self.stranger = self.other_ca.issue("prometheus")

    def tls_config(self, client_ca: bool) -> str:
        """The [metrics] keys of HTTPS (with client certificates)."""
        lines = f'tls_cert = "{self.server.cert}"\ntls_key = "{self.server.key}"\n'
        return lines + (f'tls_client_ca = "{self.ca.cert}"\n' if client_ca else "")

    def scraper(self, trust: Optional[Ca] = None, cert: Optional[Cert] = None) -> ssl.SSLContext:
        """A scraper's TLS: trusting `trust` (default: the CA), presenting `cert`."""
        context = ssl.create_default_context(cafile=(trust or self.ca).cert)
        if cert is not None:
            context.load_cert_chain(cert.cert, cert.key)
        return context


@pytest.fixture(scope="module")
def pki() -> Iterator[Pki]:
    directory = tempfile.mkdtemp(prefix="xferd-scrape-pki-")
    yield Pki(directory)
    shutil.rmtree(directory)


@pytest.fixture(scope="module")
def https(pki: Pki) -> Iterator[Dict[str, str]]:
    """A daemon with metrics over HTTPS, anyone with the CA may scrape."""
    config = f'[metrics]\nlisten = "127.0.0.1:0"\n{pki.tls_config(client_ca=False)}'
    with Cluster(("a",), config_extra=config) as c:
        yield {"address": str(c["a"].info["metrics_address"])}


@pytest.fixture(scope="module")
def mutual(pki: Pki) -> Iterator[Dict[str, str]]:
    """A daemon with metrics over HTTPS requiring a client certificate of the
    CA, and basic auth or a bearer token on top."""
    with daemon_with_auth(pki.tls_config(client_ca=True)) as daemon:
        yield daemon


def test_https_scrape_with_the_ca(https: Dict[str, str], pki: Pki) -> None:
    assert fetch(https, context=pki.scraper()) == 200
    # The scraper checks the daemon: a scraper trusting another CA refuses it.
    assert fetch(https, context=pki.scraper(trust=pki.other_ca)) == NO_ANSWER


def test_plain_http_to_the_https_port_gets_no_answer(https: Dict[str, str]) -> None:
    assert fetch(https, scheme="http") == NO_ANSWER


def test_client_certificate_of_the_ca_is_required(mutual: Dict[str, str], pki: Pki) -> None:
    good = f"Bearer {TOKEN}"
    assert fetch(mutual, good, pki.scraper()) == NO_ANSWER  # none
    assert fetch(mutual, good, pki.scraper(cert=pki.stranger)) == NO_ANSWER  # another CA's
    assert fetch(mutual, good, pki.scraper(cert=pki.client)) == 200
    assert fetch(mutual, good, scheme="http") == NO_ANSWER


def test_credentials_are_still_required_over_https(mutual: Dict[str, str], pki: Pki) -> None:
    context = pki.scraper(cert=pki.client)
    assert fetch(mutual, None, context) == 401
    assert fetch(mutual, f"Bearer {TOKEN[:-1]}", context) == 401
    assert fetch(mutual, basic("prometheus", PASSWORD + "x"), context) == 401
    assert fetch(mutual, basic("prometheus", PASSWORD), context) == 200


def check_config(metrics: str) -> "subprocess.CompletedProcess[str]":
    """`xferd --check-config` of a config whose [metrics] has `metrics`."""
    with tempfile.NamedTemporaryFile("w", suffix=".toml") as config:
        config.write(f'[metrics]\nlisten = "127.0.0.1:0"\n{metrics}\n')
        config.flush()
        return subprocess.run([daemon_binary(), "--config", config.name, "--check-config"],
                              capture_output=True, text=True, timeout=WAIT_S)


@pytest.mark.parametrize("metrics, key", [
    ('basic_auth_user = "prometheus"', "metrics.basic_auth_password_file"),
    ('basic_auth_user = "a:b"\nbasic_auth_password_file = "/etc/hostname"',
     "metrics.basic_auth_user"),
    ('bearer_token_file = "/nonexistent"', "metrics.bearer_token_file"),
])
def test_broken_settings_name_the_key(metrics: str, key: str) -> None:
    done = check_config(metrics)
    assert done.returncode == 2, done
    assert key in done.stderr, done.stderr


def test_broken_tls_settings_name_the_key(pki: Pki) -> None:
    server, client = pki.server, pki.client
    cases: List[Tuple[str, str]] = [
        (f'tls_cert = "{server.cert}"', "metrics.tls_key"),
        (f'tls_key = "{server.key}"', "metrics.tls_cert"),
        (f'tls_client_ca = "{pki.ca.cert}"', "metrics.tls_client_ca"),
        (f'tls_cert = "{server.cert}"\ntls_key = "/nonexistent"', "metrics.tls_key"),
        (f'tls_cert = "{server.cert}"\ntls_key = "{client.key}"', "metrics.tls_key"),
        (f'tls_cert = "{server.key}"\ntls_key = "{server.key}"', "metrics.tls_cert"),
        (pki.tls_config(client_ca=False) + f'tls_client_ca = "{server.key}"',
         "metrics.tls_client_ca"),
    ]
    for metrics, key in cases:
        done = check_config(metrics)
        assert done.returncode == 2, (metrics, done)
        assert f"'{key}'" in done.stderr, (metrics, done.stderr)
    done = check_config(pki.tls_config(client_ca=True))
    assert done.returncode == 0, done


if __name__ == "__main__":
    sys.exit(pytest_main.main(__file__, sys.argv))
