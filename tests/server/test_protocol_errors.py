"""Requests aiohttp refuses before any handler runs still get a JSON error in the protocol's shape.

Bad framing, a bad method, a 100 KB URL, TLS bytes on the plain port: the parser answers these
itself; the answer is ``{"error": {...}}`` with ``Content-Type: application/json``, never the
parser's plain-text message (which quotes the offending bytes back) — and Anthropic's
``{"type": "error", ...}`` when the refused request line names a Messages path.
"""

from __future__ import annotations

import aiohttp
import pytest

from tests.conftest import Proxy, Upstream
from tests.raw_http import exchange, malformed_requests, parse_response

SECRET = "sk-PROTOCOL-secret-3b9d71"
CASES = malformed_requests(SECRET)


def assert_openai_error(body: object, code: str | None = None) -> dict[str, object]:
    assert isinstance(body, dict) and set(body) == {"error"}
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert isinstance(error["message"], str) and error["message"]
    assert error["type"] == "invalid_request_error"
    if code is not None:
        assert error["code"] == code
    return error


@pytest.mark.parametrize("name", list(CASES))
async def test_parser_errors_are_openai_json(proxy: Proxy, upstream: Upstream, name: str) -> None:
    raw = await exchange(proxy.server.host, proxy.server.port, CASES[name])  # returns once the server closes
    response = parse_response(raw)
    assert response.status == 400, raw[:300]
    assert response.headers["content-type"].startswith("application/json"), raw[:300]
    assert_openai_error(response.json())
    assert SECRET.encode() not in raw  # the offending bytes are not echoed back
    assert upstream.fake.requests == []


@pytest.mark.parametrize("path", ["/v1/messages", "/t/default/v1/messages/count_tokens"])
@pytest.mark.parametrize("name", ["bad_chunk_size", "content_length_and_chunked", "control_char_in_header_name"])
async def test_parser_errors_on_a_messages_path_are_anthropic_json(
    proxy: Proxy, upstream: Upstream, path: str, name: str
) -> None:
    request = CASES[name].replace(b"/v1/chat/completions", path.encode(), 1)
    raw = await exchange(proxy.server.host, proxy.server.port, request)
    response = parse_response(raw)
    assert response.status == 400, raw[:300]
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error", body
    assert "not valid HTTP/1.1" in body["error"]["message"] or "malformed" in body["error"]["message"]
    assert SECRET.encode() not in raw
    assert upstream.fake.requests == []
    # The next connection's refused chat request is OpenAI's again.
    chat = parse_response(await exchange(proxy.server.host, proxy.server.port, CASES[name]))
    assert_openai_error(chat.json())


async def test_tls_on_the_plain_port_says_so(proxy: Proxy) -> None:
    response = parse_response(await exchange(proxy.server.host, proxy.server.port, CASES["tls_client_hello"]))
    error = assert_openai_error(response.json(), "invalid_method")
    assert "TLS" in str(error["message"])


async def test_too_long_names_the_limit(proxy: Proxy) -> None:
    for name in ("long_url", "oversize_header"):
        response = parse_response(await exchange(proxy.server.host, proxy.server.port, CASES[name]))
        error = assert_openai_error(response.json(), "line_too_long")
        assert "8190" in str(error["message"])


async def test_the_server_keeps_serving_after_parser_errors(proxy: Proxy) -> None:
    for request in CASES.values():
        await exchange(proxy.server.host, proxy.server.port, request)
    async with aiohttp.ClientSession() as http, http.get(proxy.url("/healthz")) as resp:
        assert resp.status == 200


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH"])
async def test_other_methods_on_the_chat_path_are_405_json(proxy: Proxy, upstream: Upstream, method: str) -> None:
    async with aiohttp.ClientSession() as http:
        for path in ("/v1/chat/completions", "/t/default/v1/chat/completions"):
            async with http.request(method, proxy.url(path)) as resp:
                assert resp.status == 405
                assert resp.content_type == "application/json"
                assert resp.headers["Allow"] == "POST"
                error = assert_openai_error(await resp.json(), "method_not_allowed")
                assert "POST" in str(error["message"])
    assert upstream.fake.requests == []


async def test_unknown_path_is_404_json(proxy: Proxy) -> None:
    async with aiohttp.ClientSession() as http, http.get(proxy.url("/nope")) as resp:
        assert resp.status == 404
        assert resp.content_type == "application/json"
        assert_openai_error(await resp.json(), "not_found")


@pytest.mark.parametrize(
    "path", ["/v1beta/models/gemini-2.5-flash:generateContent", "/t/default/v1/models/g:countTokens"]
)
@pytest.mark.parametrize("name", ["bad_chunk_size", "control_char_in_header_name"])
async def test_parser_errors_on_a_gemini_path_are_google_json(
    proxy: Proxy, upstream: Upstream, path: str, name: str
) -> None:
    request = CASES[name].replace(b"/v1/chat/completions", path.encode(), 1)
    raw = await exchange(proxy.server.host, proxy.server.port, request)
    response = parse_response(raw)
    assert response.status == 400, raw[:300]
    error = response.json()["error"]
    assert set(error) == {"code", "message", "status"} and (error["code"], error["status"]) == (400, "INVALID_ARGUMENT")
    assert SECRET.encode() not in raw
    assert upstream.fake.requests == []
