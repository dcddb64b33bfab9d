"""Scrape authentication: a daemon whose /metrics requires HTTP basic auth
or a bearer token. Scrapes without credentials or with wrong ones are
refused (401 names both schemes); good ones get the metrics. Broken
settings stop the daemon at start-up naming the key."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from typing import Dict, Iterator, Optional

import pytest

import pytest_main
from daemons import Cluster, daemon_binary
from testlib import WAIT_S

TOKEN = "s3cret-token-of-the-scraper"
PASSWORD = "pa55word"


@pytest.fixture(scope="module")
def secured() -> Iterator[Dict[str, str]]:
    """A daemon with metrics requiring basic auth or a token."""
    directory = tempfile.mkdtemp(prefix="xferd-scrape-")
    token_file = os.path.join(directory, "token")
    password_file = os.path.join(directory, "password")
    for path, secret in ((token_file, TOKEN), (password_file, PASSWORD)):
        with open(path, "w") as f:
            f.write(secret + "\n")  # the trailing newline is not part of it
    config = (f'[metrics]\nlisten = "127.0.0.1:0"\nbasic_auth_user = "prometheus"\n'
              f'basic_auth_password_file = "{password_file}"\n'
              f'bearer_token_file = "{token_file}"\n')
    with Cluster(("a",), config_extra=config) as c:
        yield {"address": c["a"].info["metrics_address"]}
    shutil.rmtree(directory)


def fetch(secured: Dict[str, str], authorization: Optional[str] = None) -> int:
    """The HTTP status of GET /metrics (the body checked on 200)."""
    request = urllib.request.Request(f"http://{secured['address']}/metrics")
    if authorization:
        request.add_header("Authorization", authorization)
    try:
        with urllib.request.urlopen(request, timeout=WAIT_S) as reply:
            assert b"# HELP xferd_" in reply.read()
            return reply.status
    except urllib.error.HTTPError as e:
        if e.code == 401:
            challenges = e.headers.get_all("WWW-Authenticate")
            assert sorted(c.split()[0] for c in challenges) == ["Basic", "Bearer"], challenges
        return e.code


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


@pytest.mark.parametrize("metrics, key", [
    ('basic_auth_user = "prometheus"', "metrics.basic_auth_password_file"),
    ('basic_auth_user = "a:b"\nbasic_auth_password_file = "/etc/hostname"',
     "metrics.basic_auth_user"),
    ('bearer_token_file = "/nonexistent"', "metrics.bearer_token_file"),
])
def test_broken_settings_name_the_key(metrics: str, key: str) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".toml") as config:
        config.write(f'[metrics]\nlisten = "127.0.0.1:0"\n{metrics}\n')
        config.flush()
        done = subprocess.run([daemon_binary(), "--config", config.name, "--check-config"],
                              capture_output=True, text=True, timeout=WAIT_S)
    assert done.returncode == 2, done
    assert key in done.stderr, done.stderr


if __name__ == "__main__":
    sys.exit(pytest_main.main(__file__, sys.argv))
