"""Fixtures of the port tests: the fake upstream with its ``/v1`` base URL; a self-signed certificate
for ``localhost`` (made by the ``openssl`` command) and its key."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.upstream import FakeUpstream, start_fake_upstream


@pytest.fixture
async def fake(aiohttp_server: Any) -> tuple[FakeUpstream, str]:
    upstream, server = await start_fake_upstream(aiohttp_server)
    return upstream, str(server.make_url("/v1"))


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key
