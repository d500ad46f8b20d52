"""Every /v1/* path other than chat completions is a streaming reverse proxy.

Method, path, query, headers (hop-by-hop excepted) and body reach the upstream intact; the answer
comes back with its status and headers, still content-encoded, streamed both ways.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import random
from collections.abc import AsyncIterator

import aiohttp
import openai
import orjson
import pytest
from aiohttp import web
from yarl import URL

from tests.conftest import MakeProxy, Proxy, Upstream
from tests.fakes.upstream import openai_error, start_fake_upstream

MIB = 1024 * 1024


def _blob(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


async def _chunks(data: bytes, size: int = MIB) -> AsyncIterator[bytes]:
    """An async generator body: aiohttp sends it chunked, without Content-Length."""
    view = memoryview(data)
    for start in range(0, len(data), size):
        yield bytes(view[start : start + size])


# ---------------------------------------------------------------------------- GET /v1/models


async def test_models_relayed_exactly(proxy: Proxy, upstream: Upstream) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(proxy.url("/v1/models"), headers={"Authorization": "Bearer sk-test"}) as resp:
            assert resp.status == 200
            assert resp.content_type == "application/json"
            proxied = await resp.read()
            proxied_headers = resp.headers
        async with http.get(upstream.server.make_url("/v1/models")) as direct:
            direct_body = await direct.read()
    assert proxied == direct_body  # byte for byte
    assert orjson.loads(proxied)["data"][0]["id"] == "gpt-4o-mini"
    # The upstream's own headers come back (the proxied request was the fake's first).
    assert proxied_headers["x-request-id"] == "req_1"
    assert proxied_headers["openai-version"] == "2020-10-01"
    assert "openai-processing-ms" in proxied_headers
    assert upstream.fake.requests[0].method == "GET"
    assert upstream.fake.requests[0].path == "/v1/models"
    assert upstream.fake.requests[0].headers["Authorization"] == "Bearer sk-test"


async def test_models_with_openai_sdk(proxy: Proxy, upstream: Upstream) -> None:
    async with openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0) as client:
        page = await client.models.list()
    assert [m.id for m in page.data] == ["gpt-4o-mini", "gpt-4o"]
    assert upstream.fake.requests[-1].path == "/v1/models"


# ---------------------------------------------------------------------------- methods, paths, queries


async def test_post_embeddings_with_query_string(proxy: Proxy, upstream: Upstream) -> None:
    body = orjson.dumps({"model": "text-embedding-3-small", "input": ["a", "b"]})
    async with aiohttp.ClientSession() as http:
        async with http.post(
            proxy.url("/v1/embeddings?api-version=2024-02-01&dimensions=256"),
            data=body,
            headers={"Content-Type": "application/json", "Authorization": "Bearer sk-test"},
        ) as resp:
            assert resp.status == 200
            echo = await resp.json()
    assert echo["method"] == "POST"
    assert echo["path"] == "/v1/embeddings"
    assert echo["query"] == "api-version=2024-02-01&dimensions=256"
    assert echo["body_sha256"] == hashlib.sha256(body).hexdigest()
    assert echo["body_len"] == len(body)
    assert echo["headers"]["content-type"] == "application/json"
    assert echo["headers"]["authorization"] == "Bearer sk-test"


async def _start_query_recorder(aiohttp_server) -> str:
    """A bare upstream answering with the query exactly as it arrived (raw) and as parsed."""

    async def handler(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "raw": request.raw_path.partition("?")[2],
                "raw_path": request.raw_path.partition("?")[0],
                "parsed": [list(kv) for kv in request.query.items()],
                "accept_encoding": request.headers.get("Accept-Encoding"),
            }
        )

    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    server = await aiohttp_server(app)
    return str(server.make_url("/v1"))


async def test_percent_encoded_query_reaches_upstream_unchanged(make_proxy: MakeProxy, aiohttp_server) -> None:
    recorder = await _start_query_recorder(aiohttp_server)
    proxy = await make_proxy({"default": f'[upstream]\nbase_url = "{recorder}"\n'})
    raw_query = "after=a%26b%3Dc&q=c%2B%2B&pct=100%25&space=x%20y&plain=1"
    expected = [["after", "a&b=c"], ["q", "c++"], ["pct", "100%"], ["space", "x y"], ["plain", "1"]]
    async with aiohttp.ClientSession() as http:
        async with http.get(URL(f"{recorder}/files?{raw_query}", encoded=True)) as resp:
            assert (await resp.json())["parsed"] == expected  # what a direct call means
        async with http.get(URL(proxy.url("/v1/files") + "?" + raw_query, encoded=True)) as resp:
            assert resp.status == 200
            proxied = await resp.json()
    assert proxied["parsed"] == expected


async def test_encoded_path_segment_reaches_upstream_unchanged(make_proxy: MakeProxy, aiohttp_server) -> None:
    recorder = await _start_query_recorder(aiohttp_server)
    proxy = await make_proxy({"default": f'[upstream]\nbase_url = "{recorder}"\n'})
    async with aiohttp.ClientSession() as http:
        async with http.get(URL(proxy.url("/v1/files/name%20x%2By%25"), encoded=True)) as resp:
            assert resp.status == 200
            assert (await resp.json())["raw_path"] == "/v1/files/name%20x%2By%25"


async def test_no_accept_encoding_added_for_a_client_that_sent_none(make_proxy: MakeProxy, aiohttp_server) -> None:
    recorder = await _start_query_recorder(aiohttp_server)
    proxy = await make_proxy({"default": f'[upstream]\nbase_url = "{recorder}"\n'})
    async with aiohttp.ClientSession(skip_auto_headers=("Accept-Encoding",)) as http:
        async with http.get(proxy.url("/v1/files")) as resp:
            assert (await resp.json())["accept_encoding"] is None


@pytest.mark.parametrize("method", ["PUT", "PATCH", "DELETE"])
async def test_other_methods_with_path_and_query(proxy: Proxy, upstream: Upstream, method: str) -> None:
    body = b"" if method == "DELETE" else orjson.dumps({"metadata": {"k": method}})
    headers = {} if method == "DELETE" else {"Content-Type": "application/json"}
    async with aiohttp.ClientSession() as http:
        async with http.request(
            method, proxy.url("/v1/files/file-abc?limit=2&order=asc"), data=body or None, headers=headers
        ) as resp:
            assert resp.status == 200
            echo = await resp.json()
            assert resp.headers["x-request-id"] == "req_1"
    assert echo["method"] == method
    assert echo["path"] == "/v1/files/file-abc"
    assert echo["query"] == "limit=2&order=asc"
    assert echo["body_len"] == len(body)
    assert echo["body_sha256"] == hashlib.sha256(body).hexdigest()
    assert [(r.method, r.path) for r in upstream.fake.requests] == [(method, "/v1/files/file-abc")]


# ---------------------------------------------------------------------------- bodies, both ways


async def test_large_upload_streamed_through(proxy: Proxy, upstream: Upstream) -> None:
    data = _blob(20 * MIB, seed=1)
    async with aiohttp.ClientSession() as http:
        async with http.post(
            proxy.url("/v1/uploads/upload-1/parts"),
            data=_chunks(data),
            headers={"Content-Type": "application/octet-stream"},
        ) as resp:
            assert resp.status == 200
            echo = await resp.json()
    assert echo["body_len"] == len(data)
    assert echo["body_sha256"] == hashlib.sha256(data).hexdigest()
    # No size was declared, so the proxy streamed it on chunked rather than inventing a length.
    assert "content-length" not in echo["headers"]
    assert echo["headers"]["transfer-encoding"] == "chunked"


async def test_content_length_passed_through_for_sized_body(proxy: Proxy, upstream: Upstream) -> None:
    data = _blob(3 * MIB + 17, seed=2)
    async with aiohttp.ClientSession() as http:
        async with http.post(
            proxy.url("/v1/files"), data=io.BytesIO(data), headers={"Content-Type": "application/octet-stream"}
        ) as resp:
            assert resp.status == 200
            echo = await resp.json()
    assert echo["headers"]["content-length"] == str(len(data))
    assert "transfer-encoding" not in echo["headers"]
    assert echo["body_len"] == len(data)
    assert echo["body_sha256"] == hashlib.sha256(data).hexdigest()


async def test_large_download_streamed_intact(proxy: Proxy, upstream: Upstream) -> None:
    data = _blob(10 * MIB, seed=3)
    upstream.fake.for_path("/v1/files/file-big/content").reply_raw(
        200, data, headers={"Content-Type": "application/octet-stream", "X-Upstream-Marker": "big"}
    )
    async with aiohttp.ClientSession() as http:
        async with http.get(proxy.url("/v1/files/file-big/content")) as resp:
            assert resp.status == 200
            assert resp.headers["X-Upstream-Marker"] == "big"
            assert resp.content_length == len(data)
            digest, size = hashlib.sha256(), 0
            async for chunk in resp.content.iter_chunked(MIB):
                digest.update(chunk)
                size += len(chunk)
    assert size == len(data)
    assert digest.hexdigest() == hashlib.sha256(data).hexdigest()


async def test_truncated_upstream_body_is_not_relayed_as_complete(proxy: Proxy, upstream: Upstream) -> None:
    # The upstream dies after two events of a chunked body: the client must see a broken body.
    upstream.fake.for_path("/v1/completions").reply_stream(["a ", "b ", "c ", "d"], cut_after=2)
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url("/v1/completions"), json={"model": "gpt-4o-mini", "prompt": "x"}) as resp:
            assert resp.status == 200
            with pytest.raises(aiohttp.ClientPayloadError):
                await resp.read()
        async with http.get(proxy.url("/v1/models")) as resp:  # and the proxy keeps serving
            assert resp.status == 200


# ---------------------------------------------------------------------------- headers


async def test_hop_by_hop_request_headers_dropped(proxy: Proxy, upstream: Upstream) -> None:
    headers = {
        "Connection": "keep-alive, X-Hop-Secret",
        "X-Hop-Secret": "must-not-cross",
        "Keep-Alive": "timeout=5",
        "TE": "trailers",
        "Proxy-Authorization": "Basic cHJveHk6c2VjcmV0",
        "OpenAI-Beta": "assistants=v2",
        "OpenAI-Organization": "org-123",
        "X-Custom-Header": "kept",
        "Authorization": "Bearer sk-client",
    }
    async with aiohttp.ClientSession() as http:
        async with http.get(proxy.url("/v1/assistants?limit=1"), headers=headers) as resp:
            assert resp.status == 200
            echo = await resp.json()
    received = echo["headers"]
    for dropped in ("x-hop-secret", "keep-alive", "te", "proxy-authorization"):
        assert dropped not in received, dropped
    assert "x-hop-secret" not in received.get("connection", "").lower()
    assert received["openai-beta"] == "assistants=v2"
    assert received["openai-organization"] == "org-123"
    assert received["x-custom-header"] == "kept"
    assert received["authorization"] == "Bearer sk-client"  # no tenant key: the client's passes
    assert echo["query"] == "limit=1"


async def test_tenant_api_key_replaces_client_authorization(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy(
        {
            "default": '[upstream]\nbase_url = "{upstream}"\napi_key = "sk-tenant"\n'
            'headers = {"OpenAI-Project" = "proj_t"}\n'
        }
    )
    async with aiohttp.ClientSession() as http:
        async with http.post(
            proxy.url("/v1/embeddings"),
            json={"model": "text-embedding-3-small", "input": "x"},
            headers={"Authorization": "Bearer sk-client"},
        ) as resp:
            assert resp.status == 200
            echo = await resp.json()
        async with http.get(proxy.url("/v1/models"), headers={"Authorization": "Bearer sk-client"}) as resp:
            assert resp.status == 200
    assert echo["headers"]["authorization"] == "Bearer sk-tenant"
    assert echo["headers"]["openai-project"] == "proj_t"
    assert [r.headers.getall("Authorization") for r in upstream.fake.requests] == [["Bearer sk-tenant"]] * 2


async def test_gzip_body_relayed_still_encoded(proxy: Proxy, upstream: Upstream) -> None:
    original = orjson.dumps({"object": "list", "data": [{"id": f"file-{i}"} for i in range(200)]})
    compressed = gzip.compress(original)
    upstream.fake.for_path("/v1/files").reply_raw(
        200, compressed, headers={"Content-Encoding": "gzip", "Content-Type": "application/json"}
    )
    async with aiohttp.ClientSession(auto_decompress=False) as http:
        async with http.get(proxy.url("/v1/files"), headers={"Accept-Encoding": "gzip"}) as resp:
            assert resp.status == 200
            assert resp.headers["Content-Encoding"] == "gzip"
            assert resp.content_length == len(compressed)
            raw = await resp.read()
    assert raw == compressed
    assert gzip.decompress(raw) == original
    assert upstream.fake.requests[0].headers["Accept-Encoding"] == "gzip"


# ---------------------------------------------------------------------------- upstream errors


async def test_upstream_404_relayed(proxy: Proxy, upstream: Upstream) -> None:
    error = openai_error("No such File object: file-nope", param="id", code=None)
    upstream.fake.for_path("/v1/files/file-nope").reply_error(404, error)
    async with aiohttp.ClientSession() as http:
        async with http.get(proxy.url("/v1/files/file-nope")) as resp:
            assert resp.status == 404
            assert resp.headers["x-request-id"] == "req_1"
            assert await resp.json() == error


async def test_upstream_500_relayed(proxy: Proxy, upstream: Upstream) -> None:
    error = openai_error("The server had an error while processing your request.", type="server_error")
    upstream.fake.for_path("/v1/embeddings").reply_error(500, error)
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url("/v1/embeddings"), json={"model": "m", "input": "x"}) as resp:
            assert resp.status == 500
            assert await resp.read() == orjson.dumps(error)


async def test_upstream_404_with_openai_sdk(proxy: Proxy, upstream: Upstream) -> None:
    upstream.fake.for_path("/v1/files/file-nope").reply_error(404, openai_error("No such File object: file-nope"))
    async with openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0) as client:
        with pytest.raises(openai.NotFoundError) as caught:
            await client.files.retrieve("file-nope")
    assert caught.value.status_code == 404
    assert "file-nope" in caught.value.message


# ---------------------------------------------------------------------------- tenants


async def test_tenant_prefix_routes_to_that_tenants_upstream(
    make_proxy: MakeProxy, upstream: Upstream, aiohttp_server
) -> None:
    other, other_server = await start_fake_upstream(aiohttp_server)
    other_url = str(other_server.make_url("/v1"))
    proxy = await make_proxy(
        {
            "alpha": '[upstream]\nbase_url = "{upstream}"\n',
            "beta": f'[upstream]\nbase_url = "{other_url}"\n',
        }
    )
    async with aiohttp.ClientSession() as http:
        async with http.get(proxy.url("/t/beta/v1/files/file-abc?limit=2&order=asc")) as resp:
            assert resp.status == 200
            beta_echo = await resp.json()
        async with http.post(proxy.url("/t/alpha/v1/embeddings"), json={"model": "m", "input": "x"}) as resp:
            assert resp.status == 200
            alpha_echo = await resp.json()
        async with http.get(proxy.url("/t/gamma/v1/models")) as resp:
            assert resp.status == 404
            assert (await resp.json())["error"]["code"] == "tenant_not_found"
    assert beta_echo["path"] == "/v1/files/file-abc"  # the /t/beta prefix is not forwarded
    assert beta_echo["query"] == "limit=2&order=asc"
    assert alpha_echo["path"] == "/v1/embeddings"
    assert [r.path for r in other.requests] == ["/v1/files/file-abc"]
    assert [r.path for r in upstream.fake.requests] == ["/v1/embeddings"]
