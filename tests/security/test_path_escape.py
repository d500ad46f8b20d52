"""A relayed ``/v1/*`` path can never climb out of the upstream's ``/v1``.

Dot segments (``..``, ``.``) and encoded separators (``%2F``, ``%5C``, a backslash), however they
are spelled or encoded, are refused with an OpenAI-shaped 400 before anything is sent upstream,
with or without a tenant prefix. The probes go over a raw socket: HTTP clients normalise paths.
"""

from __future__ import annotations

import pytest

from tests.conftest import MakeProxy, Proxy, Upstream
from tests.raw_http import raw_request

TENANTS = {
    "default": '[upstream]\nbase_url = "{upstream}"\napi_key = "sk-upstream-default"\n',
    "x": '[upstream]\nbase_url = "{upstream}"\napi_key = "sk-upstream-x"\n',
}

DOT_SEGMENTS = [
    "/models/../../internal/admin",
    "/models/%2e%2e/%2e%2e/internal/admin",
    "/models/%2E%2E/%2E%2E/internal/admin",
    "/models/.%2e/%2E./internal/admin",
    "/models/%2e%2E/internal",
    "/../v1/models",
    "/./models",
    "/models/.",
    "/models/%2e",
    "/models/..",
    "/models/%252e%252e/%252e%252e/internal",  # decoded twice on the way, by a careless hop
    "/models/..;/internal",  # a path parameter on a dot segment (Tomcat, Spring read it as ..)
    "/chat/completions/../../internal",  # the chat route's own path, extended
]
SEPARATORS = [
    "/models/..%2f..%2finternal",
    "/models/..%2F..%2Finternal",
    "/files/dir%2Fname",
    "/models/..%5c..%5cinternal",
    "/models/..%5C..%5Cinternal",
    "/models/..\\..\\internal",
    "/models/%2e%2e%2f%2e%2e%5cinternal",
    "/models/%252f..",
]


async def _probe(proxy: Proxy, upstream: Upstream, target: str, method: str = "GET") -> dict[str, object]:
    response = await raw_request(proxy.url(), method, target.encode(), [(b"Authorization", b"Bearer sk-client")])
    assert response.status == 400, (target, response.status, response.body[:200])
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert error["code"] == "invalid_path"
    assert upstream.fake.requests == [], f"{target} reached the upstream"
    return error


@pytest.mark.parametrize("prefix", ["/v1", "/t/x/v1"])
@pytest.mark.parametrize("tail", DOT_SEGMENTS)
async def test_dot_segments_refused(make_proxy: MakeProxy, upstream: Upstream, prefix: str, tail: str) -> None:
    proxy = await make_proxy(TENANTS)
    error = await _probe(proxy, upstream, prefix + tail)
    assert "'.' and '..'" in str(error["message"])


@pytest.mark.parametrize("prefix", ["/v1", "/t/x/v1"])
@pytest.mark.parametrize("tail", SEPARATORS)
async def test_encoded_separators_refused(make_proxy: MakeProxy, upstream: Upstream, prefix: str, tail: str) -> None:
    proxy = await make_proxy(TENANTS)
    error = await _probe(proxy, upstream, prefix + tail)
    message = str(error["message"])
    assert "slash" in message or "'.' and '..'" in message


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE"])
async def test_every_method_refused(make_proxy: MakeProxy, upstream: Upstream, method: str) -> None:
    proxy = await make_proxy(TENANTS)
    await _probe(proxy, upstream, "/t/x/v1/files/%2e%2e/%2e%2e/internal", method)


async def test_ordinary_paths_still_relayed(make_proxy: MakeProxy, upstream: Upstream) -> None:
    """Dots inside a name, encoded spaces and colons are not escapes: they reach the upstream as sent."""
    proxy = await make_proxy(TENANTS)
    for target in [
        "/t/x/v1/files/file-a.b..c",
        "/t/x/v1/files/name%20x%3Ay",
        "/t/x/v1/files/...",
        "/v1/models?x=../..",
    ]:
        response = await raw_request(proxy.url(), "GET", target.encode())
        assert response.status == 200, (target, response.body[:200])
    assert [r.path for r in upstream.fake.requests] == [
        "/v1/files/file-a.b..c",
        "/v1/files/name x:y",
        "/v1/files/...",
        "/v1/models",
    ]
    assert upstream.fake.requests[-1].query_string == "x=../.."


async def test_tenant_named_v1_keeps_its_tail(make_proxy: MakeProxy, upstream: Upstream) -> None:
    """The relayed tail is what follows the route's own ``/v1``, not the first ``/v1/`` in the path."""
    proxy = await make_proxy({"v1": '[upstream]\nbase_url = "{upstream}"\n'})
    response = await raw_request(proxy.url(), "GET", b"/t/v1/v1/models")
    assert response.status == 200
    assert [r.path for r in upstream.fake.requests] == ["/v1/models"]
