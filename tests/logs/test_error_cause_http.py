"""Every 4xx/5xx request line says why: ``error_code`` and a short ``cause``, never the message
(which can quote what the client sent) and never a key."""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.conftest import MakeProxy, Upstream
from tests.fakes.upstream import openai_error
from tests.logs.lines import capture, request_lines
from tests.recovery.test_overflow_retry import OVERFLOW, TENANT, history

MARKER = "quokka-MARKER-77d1"
PROXY_KEY = "pk-CAUSE-proxy-1b2c"
UPSTREAM_KEY = "sk-CAUSE-upstream-9e8f"
ACME = f'api_keys = ["{PROXY_KEY}"]\n[upstream]\nbase_url = "{{upstream}}"\napi_key = "{UPSTREAM_KEY}"\n'


def chat(content: str = "hello", **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": content}], **extra}


async def test_each_error_line_names_its_code_and_cause(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": '[upstream]\nbase_url = "{upstream}"\n', "acme": ACME})
    with capture() as logs:
        async with aiohttp.ClientSession() as http:
            calls = [
                ("/v1/chat/completions", {"data": b'{"model": "' + MARKER.encode()}, 400),
                ("/v1/chat/completions", {"json": chat(MARKER, stream=MARKER)}, 400),
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
    causes = [(line["status"], line["error_code"], line["cause"]) for line in lines]
    assert causes == [
        (400, "invalid_json", "invalid request"),
        (400, "invalid_request", "invalid request"),
        (401, "invalid_proxy_key", "missing or wrong key"),
        (404, "tenant_not_found", "unknown tenant"),
        (404, "not_found", "Not Found"),
        (429, "upstream_status", "the upstream answered 429, relayed"),
    ]
    assert lines[1]["error_param"] == "stream"
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
