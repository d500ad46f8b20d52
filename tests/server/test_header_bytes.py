"""Request header values that are not UTF-8 are a 400 naming the header, never a 500.

aiohttp hands such bytes to the app as lone surrogates, which every later ``encode()`` (a key's
fingerprint, a user's hash, the upstream request) refuses. Headers ctxproxy reads and headers it
only forwards are checked alike: aiohttp's writer would silently drop those bytes upstream.
The probes go over a raw socket, since HTTP clients refuse to send such bytes.
"""

from __future__ import annotations

import pytest

from tests.conftest import MakeProxy, Upstream
from tests.raw_http import raw_request

TENANT = '[upstream]\nbase_url = "{upstream}"\n[memory]\nenabled = true\n'
ADMIN = '[admin]\napi_key = "adm-key"\n'
BODY = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
HEADERS = [
    "Authorization",
    "X-Ctx-User",
    "X-Ctx-Scope",
    "X-Session-Id",
    "X-Request-Id",
    "Content-Type",
    "OpenAI-Organization",
]
NOT_UTF8 = [b"\xff", b"Bearer sk-\x80abc", b"caf\xe9", b"\xc3\x28", bytes(range(0x80, 0x100))]
ROUTES = [("POST", b"/v1/chat/completions"), ("POST", b"/t/default/v1/chat/completions"), ("GET", b"/v1/models")]


@pytest.mark.parametrize(("method", "target"), ROUTES)
@pytest.mark.parametrize("header", HEADERS)
async def test_undecodable_header_is_400_naming_it(
    make_proxy: MakeProxy, upstream: Upstream, header: str, method: str, target: bytes
) -> None:
    proxy = await make_proxy({"default": TENANT})
    for value in NOT_UTF8:
        response = await raw_request(
            proxy.url(), method, target, [(header.encode(), value)], BODY if method == "POST" else b""
        )
        assert response.status == 400, (header, value, response.body[:300])
        error = response.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}
        assert error["param"].lower() == header.lower()  # aiohttp spells known names its own way
        assert error["code"] == "invalid_header"
        assert error["param"] in error["message"] and "UTF-8" in error["message"]
        assert value.decode("latin-1") not in error["message"]  # the value may be a secret: never echoed
    assert upstream.fake.requests == []
    # The process keeps serving.
    ok = await raw_request(proxy.url(), "POST", b"/v1/chat/completions", [(b"X-Ctx-User", "José".encode())], BODY)
    assert ok.status == 200


async def test_admin_api_refuses_an_undecodable_key(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": TENANT}, proxy_toml=ADMIN)
    response = await raw_request(
        proxy.url(), "GET", b"/admin/tenants/default/sessions", [(b"Authorization", b"Bearer adm-\xff")]
    )
    assert response.status == 400, response.body[:300]
    assert response.json()["error"]["param"] == "Authorization"


async def test_utf8_values_still_accepted(make_proxy: MakeProxy, upstream: Upstream) -> None:
    """Valid UTF-8 beyond ASCII is text: a user or scope name may be one."""
    proxy = await make_proxy({"default": TENANT})
    headers = [(b"X-Ctx-User", "Zoë Ødegård".encode()), (b"X-Ctx-Scope", "プロジェクト".encode())]
    response = await raw_request(proxy.url(), "POST", b"/v1/chat/completions", headers, BODY)
    assert response.status == 200, response.body[:300]
    assert len(upstream.fake.chat_requests()) == 1
