"""A TLS upstream whose certificate is refused, or an ``https`` base URL at a port that speaks no
TLS, fails as aiohttp's client failed (``ClientConnectorCertificateError``,
``ClientConnectorSSLError``), and the client's 502 and the request's log line say which: against
real servers on loopback, with a self-signed certificate for ``localhost`` (``certificate``, in
conftest) that the system's CAs do not know."""

from __future__ import annotations

import ssl
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from ctxproxy.errors import UpstreamUnavailable
from ctxproxy.upstream.client import UpstreamHttp
from ctxproxy.upstream.pool import Pool
from tests.conftest import MakeProxy, Upstream
from tests.logs.lines import capture, request_lines
from tests.upstream.test_http1_pool import MakeServer, call, ok, port_for, start

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello"}]}
REFUSED = "could not connect to the upstream: its certificate failed verification (ClientConnectorCertificateError)"
NO_TLS = "could not connect to the upstream: the TLS handshake failed (ClientConnectorSSLError)"


async def tls_server(aiohttp_server: MakeServer, certificate: tuple[Path, Path]) -> TestServer:
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(*certificate)
    server, _ = await start(aiohttp_server, ok, ssl=served)
    return server


@pytest.mark.parametrize("trusted", [False, True])
async def test_a_refused_certificate_is_a_certificate_error(
    aiohttp_server: MakeServer, certificate: tuple[Path, Path], trusted: bool
) -> None:
    """Not trusted: the system's CAs do not know it. Trusted: its CA is known, but the URL's host
    (127.0.0.1) is not the name it is for."""
    server = await tls_server(aiohttp_server, certificate)
    tls = ssl.create_default_context(cafile=str(certificate[0])) if trusted else None
    host = "127.0.0.1" if trusted else "localhost"
    http = UpstreamHttp(Pool(tls=tls), aiohttp.ClientSession())
    try:
        with pytest.raises(UpstreamUnavailable) as caught:
            await call(port_for(http, f"https://{host}:{server.port}/v1"))
        cause = caught.value.__cause__
        assert isinstance(cause, aiohttp.ClientConnectorCertificateError)
        assert isinstance(cause.certificate_error, ssl.SSLCertVerificationError)
        assert (cause.host, cause.port, cause.ssl) == (host, server.port, True)
        assert "TLS certificate failed verification" in caught.value.message
        assert caught.value.cause == REFUSED
        assert http.pool.open == 0
    finally:
        await http.close()


async def test_https_to_a_port_without_tls_is_an_ssl_error(upstream_http: UpstreamHttp, upstream: Upstream) -> None:
    port = port_for(upstream_http, f"https://127.0.0.1:{upstream.server.port}/v1")  # plain HTTP there
    with pytest.raises(UpstreamUnavailable) as caught:
        await call(port)
    cause = caught.value.__cause__
    assert isinstance(cause, aiohttp.ClientConnectorSSLError)
    assert not isinstance(cause, aiohttp.ClientConnectorCertificateError)
    assert "TLS handshake failed" in caught.value.message
    assert caught.value.cause == NO_TLS
    assert upstream_http.pool.open == 0


async def test_the_client_and_the_log_are_told_of_the_certificate(
    make_proxy: MakeProxy, upstream: Upstream, aiohttp_server: MakeServer, certificate: tuple[Path, Path]
) -> None:
    """Through the proxy (its own pool, the system's CAs): a 502 whose message names the
    certificate, and the request's log line's cause; a plain-HTTP port given as https alike."""
    server = await tls_server(aiohttp_server, certificate)
    proxy = await make_proxy(
        {
            "refused": f'[upstream]\nbase_url = "https://localhost:{server.port}/v1"\n',
            "plain": f'[upstream]\nbase_url = "https://127.0.0.1:{upstream.server.port}/v1"\n',
        }
    )
    with capture() as logs:
        async with aiohttp.ClientSession() as http:
            for tenant, said in [("refused", "TLS certificate failed verification"), ("plain", "TLS handshake failed")]:
                async with http.post(proxy.url(f"/t/{tenant}/v1/chat/completions"), json=CHAT) as resp:
                    assert resp.status == 502
                    error = (await resp.json())["error"]
                    assert error["code"] == "upstream_connection_error" and said in error["message"]
        lines = await request_lines(logs, 2)
    assert [(line["tenant"], line["error_code"], line["cause"]) for line in lines] == [
        ("refused", "upstream_connection_error", REFUSED),
        ("plain", "upstream_connection_error", NO_TLS),
    ]
    assert upstream.fake.requests == []  # nothing reached the plain upstream as a request
