"""A coded body that stops before its compressed stream ends (cut, or a gzip member without its
CRC and length trailer), or that goes on after it, is a 400 ``invalid_content_encoding`` on every
path — the chat and Messages routes and the relayed ones alike — and nothing reaches the upstream.
On a Messages path the error is Anthropic's shape. Complete bodies still pass: several gzip
members in a row, a deflate body arriving a byte at a time."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import AsyncIterator, Callable

import aiohttp
import orjson
import pytest

from tests.conftest import Proxy, Upstream

RAW = orjson.dumps({"model": "m", "input": ["a"], "messages": [{"role": "user", "content": "hello " * 300}]})


def raw_deflate(data: bytes) -> bytes:
    encoder = zlib.compressobj(wbits=-15)
    return encoder.compress(data) + encoder.flush()


BROKEN: dict[str, tuple[str, bytes]] = {
    "gzip-cut-in-half": ("gzip", gzip.compress(RAW)[: len(gzip.compress(RAW)) // 2]),
    "gzip-without-trailer": ("gzip", gzip.compress(RAW)[:-8]),
    "gzip-half-a-trailer": ("gzip", gzip.compress(RAW)[:-3]),
    "gzip-then-garbage": ("gzip", gzip.compress(RAW) + b"not another member"),
    "deflate-cut": ("deflate", zlib.compress(RAW)[:-10]),
    "deflate-without-checksum": ("deflate", zlib.compress(RAW)[:-4]),
    "raw-deflate-cut": ("deflate", raw_deflate(RAW)[:-5]),
    "deflate-then-garbage": ("deflate", zlib.compress(RAW) + b"trailing"),
}
OPENAI_PATHS = ["/v1/chat/completions", "/v1/embeddings", "/v1/files"]
ANTHROPIC_PATHS = ["/v1/messages", "/v1/messages/count_tokens"]


async def post(
    proxy: Proxy, path: str, body: bytes | Callable[[], AsyncIterator[bytes]], coding: str
) -> tuple[int, bytes]:
    headers = {"Content-Type": "application/json", "Content-Encoding": coding, "anthropic-version": "2023-06-01"}
    data = body if isinstance(body, bytes) else body()
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url(path), data=data, headers=headers) as resp:
            return resp.status, await resp.read()


@pytest.mark.parametrize("path", OPENAI_PATHS + ANTHROPIC_PATHS)
@pytest.mark.parametrize("case", sorted(BROKEN))
async def test_a_body_that_does_not_end_where_its_stream_does_is_400(
    proxy: Proxy, upstream: Upstream, path: str, case: str
) -> None:
    coding, body = BROKEN[case]
    status, answer = await post(proxy, path, body, coding)
    assert status == 400, answer
    payload = orjson.loads(answer)
    if path in ANTHROPIC_PATHS:
        assert payload["type"] == "error" and payload["error"]["type"] == "invalid_request_error"
        message = payload["error"]["message"]
    else:
        assert payload["error"]["code"] == "invalid_content_encoding"
        assert payload["error"]["param"] == "Content-Encoding"
        message = payload["error"]["message"]
    assert f"does not decode as Content-Encoding {coding!r}" in message
    assert upstream.fake.requests == []


async def test_gzip_members_in_a_row_are_one_body(proxy: Proxy, upstream: Upstream) -> None:
    status, answer = await post(proxy, "/v1/embeddings", gzip.compress(RAW[:40]) + gzip.compress(RAW[40:]), "gzip")
    assert status == 200, answer
    assert upstream.fake.requests[0].body == RAW


@pytest.mark.parametrize("encode", [zlib.compress, raw_deflate], ids=["zlib", "raw"])
async def test_a_deflate_body_a_byte_at_a_time_is_decoded(
    proxy: Proxy, upstream: Upstream, encode: Callable[[bytes], bytes]
) -> None:
    coded = encode(RAW)

    async def bytewise() -> AsyncIterator[bytes]:
        for i in range(len(coded)):
            yield coded[i : i + 1]

    status, answer = await post(proxy, "/v1/embeddings", bytewise, "deflate")
    assert status == 200, answer
    assert upstream.fake.requests[0].body == RAW
