"""Content-coded request bodies: decoded, size-limited after decoding, forwarded decoded.

A gzip or deflate body reaches the upstream decoded, without ``Content-Encoding`` and with the
decoded length, on the chat path and on the passthrough; ``identity`` is no coding. A body that
does not decode is a 400, one that decodes past ``server.max_body_bytes`` a 413 (without being
decoded whole), and a coding ctxproxy cannot decode a 415. Nothing refused reaches the upstream.
(A body cut short or followed by stray bytes: ``test_truncated_bodies.py``.)
"""

from __future__ import annotations

import gzip
import tracemalloc
import zlib
from collections.abc import AsyncIterator

import aiohttp
import orjson
import pytest

from tests.conftest import MakeProxy, Proxy, Upstream

MIB = 1024 * 1024
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hello " * 200}]}
EMBED = {"model": "text-embedding-3-small", "input": ["a", "b"]}
PATHS = ["/v1/chat/completions", "/v1/embeddings"]


def _deflate(data: bytes) -> bytes:
    """Raw deflate, no zlib header: what some clients send as "deflate"."""
    encoder = zlib.compressobj(wbits=-15)
    return encoder.compress(data) + encoder.flush()


CODINGS = {"gzip": gzip.compress, "deflate": zlib.compress, "Deflate": _deflate, "GZIP": gzip.compress}


async def _post(proxy: Proxy, path: str, data: object, coding: str) -> tuple[int, bytes]:
    headers = {"Content-Type": "application/json", "Content-Encoding": coding}
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url(path), data=data, headers=headers) as resp:
            return resp.status, await resp.read()


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("coding", sorted(CODINGS))
async def test_coded_body_forwarded_decoded(proxy: Proxy, upstream: Upstream, path: str, coding: str) -> None:
    raw = orjson.dumps(CHAT if path.endswith("completions") else EMBED)
    status, answer = await _post(proxy, path, CODINGS[coding](raw), coding)
    assert status == 200, answer
    [received] = upstream.fake.requests
    assert received.body == raw  # strategy none: the decoded bytes, exactly
    assert "Content-Encoding" not in received.headers
    assert received.headers["Content-Length"] == str(len(raw))


@pytest.mark.parametrize("path", PATHS)
async def test_chunked_gzip_body_forwarded_decoded(proxy: Proxy, upstream: Upstream, path: str) -> None:
    raw = orjson.dumps(CHAT)
    coded = gzip.compress(raw)

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(coded), 100):
            yield coded[start : start + 100]

    status, answer = await _post(proxy, path, chunks(), "gzip")
    assert status == 200, answer
    assert upstream.fake.requests[0].body == raw
    assert "Content-Encoding" not in upstream.fake.requests[0].headers


@pytest.mark.parametrize("path", PATHS)
async def test_identity_is_no_coding(proxy: Proxy, upstream: Upstream, path: str) -> None:
    raw = orjson.dumps(CHAT)
    status, _ = await _post(proxy, path, raw, "identity")
    assert status == 200
    assert upstream.fake.requests[0].body == raw
    assert "Content-Encoding" not in upstream.fake.requests[0].headers


CORRUPT = [
    ("gzip", orjson.dumps(CHAT)),  # plain JSON labelled gzip
    ("gzip", b"\x1f\x8b\x08\x00" + b"\x00" * 40),  # a gzip header, then garbage
    ("deflate", b"not deflate at all, not even close"),
]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(("coding", "data"), CORRUPT, ids=["plain-json", "gzip-header-garbage", "plain-text"])
async def test_body_that_does_not_decode_is_400(
    proxy: Proxy, upstream: Upstream, path: str, coding: str, data: bytes
) -> None:
    status, answer = await _post(proxy, path, data, coding)
    assert status == 400, answer
    error = orjson.loads(answer)["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == "invalid_content_encoding"
    assert error["param"] == "Content-Encoding"
    assert coding in error["message"]
    assert upstream.fake.requests == []


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("coding", ["compress", "gzip, gzip", "x-custom", "gzip;q=1"])
async def test_unsupported_coding_is_415(proxy: Proxy, upstream: Upstream, path: str, coding: str) -> None:
    status, answer = await _post(proxy, path, orjson.dumps(CHAT), coding)
    assert status == 415, answer
    error = orjson.loads(answer)["error"]
    assert error["code"] == "unsupported_content_encoding"
    assert error["param"] == "Content-Encoding"
    assert "gzip" in error["message"] and "deflate" in error["message"]  # says what would work
    assert upstream.fake.requests == []


@pytest.mark.parametrize("coding", ["br", "zstd"])
async def test_br_and_zstd_are_415_naming_what_is_decoded(proxy: Proxy, upstream: Upstream, coding: str) -> None:
    status, answer = await _post(proxy, "/v1/chat/completions", b"\x0b\x02\x80hello\x03", coding)
    assert status == 415, answer
    assert "gzip or deflate" in orjson.loads(answer)["error"]["message"]
    assert upstream.fake.requests == []


async def test_coding_header_on_a_bodiless_request_sends_no_body(proxy: Proxy, upstream: Upstream) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(proxy.url("/v1/models"), headers={"Content-Encoding": "gzip"}) as resp:
            assert resp.status == 200
    assert upstream.fake.requests[0].body == b""
    assert "Content-Encoding" not in upstream.fake.requests[0].headers
    assert "Content-Length" not in upstream.fake.requests[0].headers


@pytest.fixture(scope="module")
def bomb() -> bytes:
    """gzip of 64 MiB of zero bytes (about 1000:1), built without holding them."""
    encoder = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(MIB)
    return b"".join(encoder.compress(zeros) for _ in range(64)) + encoder.flush()


@pytest.mark.parametrize("path", PATHS)
async def test_decompression_bomb_is_413_without_decoding_it_whole(
    make_proxy: MakeProxy, upstream: Upstream, path: str, bomb: bytes
) -> None:
    proxy = await make_proxy(proxy_toml="[server]\nmax_body_bytes = 1048576\n")
    assert len(bomb) < MIB  # under the limit on the wire: only the decoded size is over it
    tracemalloc.start()
    try:
        status, answer = await _post(proxy, path, bomb, "gzip")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert status == 413, answer
    error = orjson.loads(answer)["error"]
    assert error["code"] == "request_too_large" and "decoded" in error["message"]
    assert peak < 32 * MIB, f"peak {peak / MIB:.0f} MiB: the bomb was decoded whole"
    assert upstream.fake.requests == []


async def test_coded_body_under_the_limit_once_decoded_is_accepted(make_proxy: MakeProxy, upstream: Upstream) -> None:
    """The limit is on the decoded body: a 900 KiB body coded to a few KiB, limit 1 MiB, passes."""
    tenant = 'default_context_window = 4000000\n[upstream]\nbase_url = "{upstream}"\n'  # it fits: forwarded as sent
    proxy = await make_proxy({"default": tenant}, proxy_toml="[server]\nmax_body_bytes = 1048576\n")
    raw = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "z" * (900 * 1024)}]})
    status, _ = await _post(proxy, "/v1/chat/completions", gzip.compress(raw), "gzip")
    assert status == 200
    assert upstream.fake.chat_requests()[0].body == raw
