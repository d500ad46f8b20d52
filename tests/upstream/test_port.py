"""``UpstreamPort``: what reaches the upstream and how failures come back, against the real fake.

The chat handler's and the tool loop's use of the port is covered through the proxy (tests/server,
tests/tools), the summariser's and embeddings' through theirs; here are the rules they share that
no other test reaches: own-call headers, the key header seam, the deadline, the path check before
anything is sent, and what ``transport_failure`` reports.
"""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import pytest
from multidict import CIMultiDict

from ctxproxy.config.models import UpstreamConfig
from ctxproxy.errors import BadRequest, UpstreamTimeout, UpstreamUnavailable
from ctxproxy.upstream.client import UpstreamHttp
from ctxproxy.upstream.headers import KeyHeader
from ctxproxy.upstream.port import UpstreamPort, transport_failure
from tests.fakes.upstream import FakeUpstream

CHAT = "/chat/completions"
BODY = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'


def config(base_url: str, **fields: Any) -> UpstreamConfig:
    return UpstreamConfig.model_validate({"base_url": base_url, **fields})


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_own_call_sends_the_tenant_key_once_and_its_extra_headers_win(
    upstream_http: UpstreamHttp, fake: tuple[FakeUpstream, str]
) -> None:
    upstream, base_url = fake
    tenant = config(base_url, api_key="sk-tenant", headers={"accept": "application/x-ndjson", "X-Org": "acme"})
    port = UpstreamPort(upstream_http, tenant)
    async with port.post(CHAT, BODY, port.own_call_headers("Bearer sk-client")) as response:
        assert response.status == 200
    [sent] = upstream.chat_requests()
    assert sent.headers.getall("Authorization") == ["Bearer sk-tenant"]
    assert sent.headers.getall("Accept") == ["application/x-ndjson"]  # one header, whatever its case
    assert sent.headers["X-Org"] == "acme"
    assert sent.headers["Content-Type"] == "application/json"
    assert sent.body == BODY


@pytest.mark.parametrize("credential", ["Bearer sk-client", None, ""])
async def test_own_call_without_a_tenant_key_sends_the_clients_credential(
    upstream_http: UpstreamHttp, fake: tuple[FakeUpstream, str], credential: str | None
) -> None:
    upstream, base_url = fake
    port = UpstreamPort(upstream_http, config(base_url))
    async with port.post(CHAT, BODY, port.own_call_headers(credential)) as response:
        assert response.status == 200
    sent = upstream.chat_requests()[0].headers
    assert sent.getall("Authorization", []) == ([credential] if credential else [])
    assert sent["Accept"] == "application/json"


async def test_a_protocol_with_its_own_key_header(upstream_http: UpstreamHttp, fake: tuple[FakeUpstream, str]) -> None:
    upstream, base_url = fake
    port = UpstreamPort(upstream_http, config(base_url, api_key="sk-tenant"), KeyHeader("X-Api-Key"))
    client = CIMultiDict(
        {"x-api-key": "sk-client", "X-Ctx-User": "ann", "Connection": "keep-alive, X-Hop", "X-Hop": "1"}
    )
    async with port.post(CHAT, BODY, client) as response:
        assert response.status == 200
    sent = upstream.chat_requests()[0].headers
    assert sent.getall("X-Api-Key") == ["sk-tenant"]
    assert "Authorization" not in sent  # the Bearer rule is OpenAI's, not every protocol's
    assert "X-Ctx-User" not in sent and "X-Hop" not in sent
    assert port.own_call_headers("sk-client")["X-Api-Key"] == "sk-client"


async def test_the_query_goes_as_the_client_encoded_it(
    upstream_http: UpstreamHttp, fake: tuple[FakeUpstream, str]
) -> None:
    upstream, base_url = fake
    port = UpstreamPort(upstream_http, config(base_url))
    async with port.post(CHAT, BODY, CIMultiDict(), raw_query="after=a%26b&pct=100%25") as response:
        assert response.status == 200
    # As the server decodes it (keeping %26, which means something else decoded); an escape
    # encoded again on the way would show as ``100%25``.
    assert upstream.chat_requests()[0].query_string == "after=a%26b&pct=100%"


@pytest.mark.parametrize("path", ["/chat/completions/../../admin", "/chat/%2e%2e/x", "/chat%2Fcompletions"])
async def test_an_escaping_path_is_refused_before_anything_is_sent(
    upstream_http: UpstreamHttp, fake: tuple[FakeUpstream, str], path: str
) -> None:
    upstream, base_url = fake
    port = UpstreamPort(upstream_http, config(base_url))
    with pytest.raises(BadRequest) as refused:
        async with port.post(path, BODY, CIMultiDict()):
            pytest.fail("the block must not run")
    assert refused.value.code == "invalid_path"
    assert upstream.requests == []


async def test_leaving_the_block_early_closes_the_connection(
    upstream_http: UpstreamHttp, fake: tuple[FakeUpstream, str]
) -> None:
    upstream, base_url = fake
    upstream.reply_stream(["a", "b", "c"], delay=0.5)
    port = UpstreamPort(upstream_http, config(base_url))
    async with port.post(CHAT, BODY, CIMultiDict()) as response:
        assert await response.content.readany()  # the first event; the rest is still coming
        assert not response.closed
    assert response.closed
    await asyncio.wait_for(upstream.cancelled.wait(), 2.0)  # the upstream saw its client go


async def test_a_deadline_bounds_the_wait_for_an_answer(
    upstream_http: UpstreamHttp, fake: tuple[FakeUpstream, str]
) -> None:
    upstream, base_url = fake
    upstream.reply_delay(2.0)
    port = UpstreamPort(upstream_http, config(base_url))
    started = time.monotonic()
    with pytest.raises(UpstreamTimeout) as caught:
        async with port.post(CHAT, BODY, CIMultiDict(), deadline=0.2):
            pytest.fail("no answer came")
    assert time.monotonic() - started < 1.5
    assert "0.2s" in caught.value.message
    assert transport_failure(caught.value) == ("timeout", "TimeoutError")


async def test_a_deadline_bounds_reading_the_body_too(
    upstream_http: UpstreamHttp, fake: tuple[FakeUpstream, str]
) -> None:
    upstream, base_url = fake
    upstream.reply_stream(["a", "b", "c"], delay=1.0)  # the status comes at once, the events slowly
    port = UpstreamPort(upstream_http, config(base_url))
    started = time.monotonic()
    with pytest.raises(UpstreamTimeout):
        async with port.post(CHAT, BODY, CIMultiDict(), deadline=0.3) as response:
            assert response.status == 200
            await port.read(response)
    assert time.monotonic() - started < 1.5


async def test_a_timeout_of_the_block_itself_is_not_the_deadlines(
    upstream_http: UpstreamHttp, fake: tuple[FakeUpstream, str]
) -> None:
    _, base_url = fake
    port = UpstreamPort(upstream_http, config(base_url))
    with pytest.raises(TimeoutError, match="the caller's own") as caught:
        async with port.post(CHAT, BODY, CIMultiDict(), deadline=5.0):
            raise TimeoutError("the caller's own")
    assert not isinstance(caught.value, UpstreamTimeout)


async def test_a_stalled_read_is_the_tenants_read_timeout(
    upstream_http: UpstreamHttp, fake: tuple[FakeUpstream, str]
) -> None:
    upstream, base_url = fake
    upstream.reply_stream(["a", "b"], delay=1.0)
    port = UpstreamPort(upstream_http, config(base_url, read_timeout=0.2))
    with pytest.raises(UpstreamTimeout) as caught:
        async with port.post(CHAT, BODY, CIMultiDict()) as response:
            await port.read(response)
    assert "read_timeout 0.2s" in caught.value.message
    assert transport_failure(caught.value).reason == "timeout"


async def test_a_refused_connection(upstream_http: UpstreamHttp) -> None:
    port = UpstreamPort(upstream_http, config(f"http://127.0.0.1:{closed_port()}/v1"))
    with pytest.raises(UpstreamUnavailable) as caught:
        async with port.post(CHAT, BODY, CIMultiDict()):
            pytest.fail("nothing listens there")
    assert caught.value.code == "upstream_connection_error"
    assert transport_failure(caught.value) == ("connection", "ClientConnectorError")


async def test_a_connection_closed_before_the_answer(
    upstream_http: UpstreamHttp, fake: tuple[FakeUpstream, str]
) -> None:
    upstream, base_url = fake
    upstream.reply_reset()
    port = UpstreamPort(upstream_http, config(base_url))
    with pytest.raises(UpstreamUnavailable) as caught:
        async with port.post(CHAT, BODY, CIMultiDict()):
            pytest.fail("the upstream closed the connection")
    assert "closed the connection" in caught.value.message
    assert transport_failure(caught.value) == ("transport", "ServerDisconnectedError")
