"""A spliced body (``ctxproxy.upstream.body``) reaches the upstream as the bytes it stands for.

Through the port, short and long (written unjoined), and through the proxy: a long streamed
request whose client did not ask for usage is the client's bytes with the option inserted,
exactly as the joined body was.
"""

from __future__ import annotations

import aiohttp
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from multidict import CIMultiDict

from ctxproxy.config.models import UpstreamConfig
from ctxproxy.upstream.body import UNJOINED_FROM, Spliced, buffers
from ctxproxy.upstream.client import UpstreamHttp
from ctxproxy.upstream.port import UpstreamPort
from ctxproxy.upstream.usage import ask_for_usage
from tests.conftest import Proxy, Upstream
from tests.fakes.upstream import FakeUpstream

CHAT = "/chat/completions"


def _body(size: int) -> bytes:
    text = ("spliced " * (size // 8 + 1))[:size]
    return orjson.dumps({"model": "m", "messages": [{"role": "user", "content": text}]})


@pytest.mark.parametrize("size", [10, UNJOINED_FROM - 200, UNJOINED_FROM, 600_000])
@pytest.mark.parametrize("head", [b"{", b'{"stream_options":{"include_usage":true},'])
async def test_the_upstream_receives_head_and_tail_as_one_body(
    upstream_http: UpstreamHttp, fake: tuple[FakeUpstream, str], size: int, head: bytes
) -> None:
    upstream, base_url = fake
    raw = _body(size)
    body = Spliced(head, memoryview(raw)[1:])
    written = buffers(b"HEAD", body)
    assert len(written) == (1 if len(body) < UNJOINED_FROM else 2)  # a long one is never joined
    assert b"".join(written) == b"HEAD" + bytes(body)
    port = UpstreamPort(upstream_http, UpstreamConfig.model_validate({"base_url": base_url}))
    async with port.post(CHAT, body, CIMultiDict({"Content-Type": "application/json"})) as response:
        assert response.status == 200
    [sent] = upstream.chat_requests()
    assert sent.body == bytes(body) == head + raw[1:]
    assert sent.headers["Content-Length"] == str(len(body))
    assert sent.headers["Content-Type"] == "application/json"


@given(st.text(max_size=40), st.sampled_from([b"", b" ", b"\n\t "]))
def test_a_spliced_body_is_the_joined_one(text: str, space: bytes) -> None:
    body = {"model": "m", "text": text}
    raw = space + orjson.dumps(body)
    asked = ask_for_usage(raw, body)
    start = raw.index(b"{") + 1
    assert bytes(asked) == raw[:start] + b'"stream_options":{"include_usage":true},' + raw[start:]
    assert len(asked) == len(bytes(asked))


async def test_a_long_stream_asks_for_usage_with_the_clients_bytes_around_it(proxy: Proxy, upstream: Upstream) -> None:
    raw = b'{"stream" : true, ' + _body(300_000)[1:]
    async with aiohttp.ClientSession() as client:
        async with client.post(
            proxy.url("/v1/chat/completions"), data=raw, headers={"Content-Type": "application/json"}
        ) as response:
            assert response.status == 200
            events = await response.read()
    [sent] = upstream.fake.chat_requests()
    assert sent.body == b'{"stream_options":{"include_usage":true},' + raw[1:]
    assert events.endswith(b"data: [DONE]\n\n") and b'"prompt_tokens"' not in events  # the usage chunk taken out
