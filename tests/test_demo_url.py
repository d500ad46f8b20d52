"""``ctxproxy demo --url``: the demo's client against a running proxy (here the tests' proxy on a
loopback port, in front of the fake upstream) — real turns that the proxy records, so the admin
API (and the inspector) show the conversation afterwards."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Any

import aiohttp
import pytest

from tests.conftest import MakeProxy, Upstream

ADMIN_KEY = "adm-demo-url-3c9e"


async def demo(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "CTXPROXY_"))}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ctxproxy", "demo", *args,
        env={**clean, **(env or {})}, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def recorded_sessions(http: aiohttp.ClientSession, url: str, requests: int) -> list[dict[str, Any]]:
    """The admin API's session records once they count ``requests`` requests (the recorder
    writes them in batches, off the response path)."""
    deadline = time.monotonic() + 10
    while True:
        async with http.get(url) as resp:
            sessions: list[dict[str, Any]] = (await resp.json())["data"]
        if sum(s["requests"] for s in sessions) >= requests or time.monotonic() > deadline:
            return sessions
        await asyncio.sleep(0.05)


async def test_demo_url_plays_a_conversation_through_a_running_proxy(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy(proxy_toml=f'[admin]\napi_key = "{ADMIN_KEY}"\n')
    code, out, err = await demo("--url", proxy.url("/v1"), "--turns", "3", env={"OPENAI_API_KEY": "sk-demo-client"})
    assert code == 0, err
    root = proxy.url("").rstrip("/")
    assert out.startswith(f"ctxproxy at {root}, model gpt-4o-mini, openai API: its tenant's config decides the rest")
    assert [line.split()[0] for line in out.splitlines() if line[:4].strip().isdigit()] == ["1", "2", "3"]
    assert f"the inspector shows the session: {root}/admin/ui/" in out
    sent = upstream.fake.chat_requests()
    assert [len(r.json()["messages"]) for r in sent] == [2, 4, 6]  # the whole history, resent each turn
    assert {r.json()["model"] for r in sent} == {"gpt-4o-mini"}
    assert {r.headers["Authorization"] for r in sent} == {"Bearer sk-demo-client"}  # passed through
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as http:
        sessions = await recorded_sessions(http, proxy.url("/admin/tenants/default/sessions"), requests=3)
    assert [s["requests"] for s in sessions] == [3]  # one conversation, as the inspector lists it


async def test_demo_url_says_what_the_proxy_answered(make_proxy: MakeProxy, upstream: Upstream) -> None:
    tenant = 'api_keys = ["pk-required"]\n[upstream]\nbase_url = "{upstream}"\napi_key = "sk-upstream"\n'
    proxy = await make_proxy({"default": tenant})
    code, out, err = await demo("--url", proxy.url(""), "--turns", "2")
    assert code == 2
    assert err.startswith("ctxproxy demo: turn 1: the proxy answered 401: Tenant 'default' requires a proxy key")
    assert upstream.fake.requests == []


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--url", "http://127.0.0.1:9", "--strategy", "paged"], "--strategy and --window configure the demo's own"),
        (["--url", "http://127.0.0.1:9", "--window", "4096"], "with --url the running proxy's tenant config decides"),
        (["--model", "gpt-4o"], "--model goes with --url"),
        (["--url", "127.0.0.1:8080"], "expected the proxy's http(s) address, like http://127.0.0.1:8080"),
    ],
)
async def test_demo_refuses_options_that_do_not_go_together(args: list[str], words: str) -> None:
    code, out, err = await demo(*args)
    assert code == 2 and words in err and out == ""
