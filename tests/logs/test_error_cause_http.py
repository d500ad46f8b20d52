"""Every 4xx/5xx request line says why: ``error_code`` and a short ``cause``, never the message
(which can quote what the client sent) and never a key."""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.conftest import MakeProxy, Upstream
from tests.fakes.upstream import openai_error
from tests.inspector.drive import BASIC
from tests.inspector.drive import start as start_inspector
from tests.logs.lines import capture, request_lines
from tests.recovery.test_overflow_retry import OVERFLOW, TENANT, history

MARKER = "quokka-MARKER-77d1"
PROXY_KEY = "pk-CAUSE-proxy-1b2c"
UPSTREAM_KEY = "sk-CAUSE-upstream-9e8f"
PREFLIGHT = {"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
ACME = f'api_keys = ["{PROXY_KEY}"]\n[upstream]\nbase_url = "{{upstream}}"\napi_key = "{UPSTREAM_KEY}"\n'


def explained(lines: list[Any]) -> list[tuple[int, str, str]]:
    """What each request line says of its answer: (status, error_code, cause)."""
    return [(line["status"], line["error_code"], line["cause"]) for line in lines]


def chat(content: str = "hello", **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": content}], **extra}


async def test_each_error_line_names_its_code_and_cause(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": '[upstream]\nbase_url = "{upstream}"\n', "acme": ACME})
    with capture() as logs:
        async with aiohttp.ClientSession() as http:
            calls = [
                ("/v1/chat/completions", {"data": b'{"model": "' + MARKER.encode()}, 400),
                ("/v1/chat/completions", {"json": {"model": MARKER, "messages": []}}, 400),
                ("/t/acme/v1/chat/completions", {"json": chat(MARKER), "headers": {"Authorization": "Bearer x"}}, 401),
                ("/t/nobody/v1/chat/completions", {"json": chat(MARKER)}, 404),
                ("/no/such/path", {"json": chat(MARKER)}, 404),
            ]
            for path, kwargs, status in calls:
                async with http.post(proxy.url(path), **kwargs) as resp:
                    assert resp.status == status
            upstream.fake.reply_error(429, openai_error(f"slow down {MARKER}", code="rate_limit_exceeded"))
            async with http.post(
                proxy.url("/t/acme/v1/chat/completions"),
                json=chat(MARKER),
                headers={"Authorization": f"Bearer {PROXY_KEY}"},
            ) as resp:
                assert resp.status == 429
        lines = await request_lines(logs, 6)
    assert explained(lines) == [
        (400, "invalid_json", "invalid request"),
        (400, "invalid_request", "invalid request"),
        (401, "invalid_proxy_key", "missing or wrong key"),
        (404, "tenant_not_found", "unknown tenant"),
        (404, "not_found", "Not Found"),
        (429, "upstream_status", "the upstream answered 429, relayed"),
    ]
    assert lines[1]["error_param"] == "messages"
    assert lines[5]["upstream_status"] == 429 and lines[5]["tenant"] == "acme"
    text = repr(logs)
    for secret in (MARKER, PROXY_KEY, UPSTREAM_KEY):
        assert secret not in text


async def test_upstream_failures_and_overflows_say_what_happened(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy(
        {
            "default": TENANT.format(window=100_000, strategy="none"),
            "gone": '[upstream]\nbase_url = "http://127.0.0.1:9/v1"\nconnect_timeout = 2\n',
        }
    )
    upstream.fake.reply_error(400, OVERFLOW)
    upstream.fake.reply_error(400, OVERFLOW)
    with capture() as logs:
        async with aiohttp.ClientSession() as http:
            async with http.post(
                proxy.url("/v1/chat/completions"), json={"model": "m", "messages": history(30)}
            ) as resp:
                assert resp.status == 400
            async with http.post(proxy.url("/t/gone/v1/chat/completions"), json=chat(MARKER)) as resp:
                assert resp.status == 502
        refused, unreachable = await request_lines(logs, 2)
    assert refused["error_code"] == "context_length_exceeded"
    assert refused["cause"] == "the upstream refused the prompt as too long, again after compacting and retrying"
    assert refused["overflow_outcome"] == "refused_again" and refused["retried"] is True
    assert unreachable["error_code"] == "upstream_connection_error"
    assert unreachable["cause"].startswith("could not connect to the upstream") and unreachable["tenant"] == "gone"
    assert MARKER not in repr(logs)


async def test_the_inspectors_refusals_say_why(make_proxy: MakeProxy) -> None:
    """Its pages are HTML answers, not raised errors: their lines still say why, never "relayed"
    (and so does a refused CORS preflight)."""
    off = await make_proxy()
    proxy = await start_inspector(make_proxy)
    basic, csrf = {"headers": BASIC}, {"data": {"csrf": MARKER}}
    # ((proxy, method, path, request), (the answer's status, its line's error_code and cause))
    calls = [
        ((off, "GET", "/admin/ui/login", {}), (404, "inspector_off", "no [admin] api_key configured")),
        (
            (proxy, "POST", "/admin/ui/login", {"data": {"key": MARKER}}),
            (401, "invalid_admin_key", "wrong admin key at the login form"),
        ),
        ((proxy, "POST", "/admin/ui/logout", csrf), (401, "not_signed_in", "no valid session cookie or admin key")),
        ((proxy, "POST", "/admin/ui/logout", {**csrf, **basic}), (403, "csrf_refused", "missing or wrong CSRF token")),
        ((proxy, "GET", "/admin/ui/tenants/nobody/sessions", basic), (404, "not_found", "not found")),
        ((proxy, "GET", "/admin/ui/tenants/default/sessions?page=x", basic), (400, "bad_request", "bad page")),
        (
            (proxy, "OPTIONS", "/v1/chat/completions", {"headers": PREFLIGHT}),
            (403, "cors_origin_not_allowed", "preflight from an origin not allowed"),
        ),
    ]
    with capture() as logs:
        async with aiohttp.ClientSession() as http:
            for (target, method, path, kwargs), (status, *_) in calls:
                async with http.request(method, target.url(path), allow_redirects=False, **kwargs) as resp:
                    assert resp.status == status, path
        lines = await request_lines(logs, len(calls))
    assert explained(lines) == [said for _, said in calls]
    assert MARKER not in repr(logs)
