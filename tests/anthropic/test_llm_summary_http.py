"""The LLM summariser for a tenant whose upstream is Anthropic: its summary calls (and the page
lines of a ``paged`` archive) are Messages API calls carrying the client's key as it sent it, or
the tenant's, and what they answer is the checkpoint's summary — not the extractive fallback.

The fake Anthropic upstream answers every request that carries the summariser's (or the page
lines') system prompt with a scripted text (``answer_when``), however many requests come first.
"""

from __future__ import annotations

import json
import re
from typing import Any

import aiohttp
import pytest
import structlog

from ctxproxy.summarize.pagelines import SYSTEM_PROMPT as PAGE_LINES_PROMPT
from ctxproxy.summarize.prompts import system_prompt
from tests.anthropic.conftest import ADMIN_KEY, CLIENT_KEY, MODEL, Claude, MakeProxy, check_shape, conversation
from tests.fakes.anthropic_upstream import credential
from tests.fakes.serving import Recorded

MAX_TOKENS = 300
SUMMARY_MODEL = "claude-summary-1"
SCRIPTED = "### Goal\n- plan the Lisbon trip\n\n### Key facts\n- the car is rented at the airport"
TENANT_KEY = "sk-ant-tenant-3f9a"
ADMIN = f'[admin]\napi_key = "{ADMIN_KEY}"\n'
LLM = f"""summarizer = "llm"
summary_model = "{SUMMARY_MODEL}"
summary_max_tokens = {MAX_TOKENS}
"""
ROLLING = """
[compaction.rolling_summary]
threshold = 0.8
target_ratio = 0.5
headroom_min_tokens = 0
headroom_ratio = 0.05
"""
PAGED = """
[compaction.paged]
active_pages = 2
archive_batch = 1
"""
_PAGE = re.compile(r'<page number="(\d+)" lines="(\d+)">')


def tenant(claude: Claude, strategy: str, tables: str, key: str | None = None, window: int = 3_000) -> str:
    from tests.anthropic.conftest import tenant_toml

    toml = tenant_toml(claude, window=window, strategy=strategy, key=key)
    return toml.replace('summarizer = "extractive"\n', LLM) + tables


def summary_answer(payload: dict[str, Any]) -> str | None:
    return SCRIPTED if payload.get("system") == system_prompt(MAX_TOKENS) else None


def page_lines_answer(payload: dict[str, Any]) -> str | None:
    """JSON with as many lines per page as the page-lines prompt asks for."""
    if payload.get("system") != PAGE_LINES_PROMPT:
        return None
    asked = _PAGE.findall(payload["messages"][0]["content"])
    pages = [
        {"summary": f"LLM page {n}", "lines": [f"Line {i} of page {n}" for i in range(int(count))]}
        for n, count in asked
    ]
    return json.dumps({"pages": pages})


def texts(body: dict[str, Any]) -> list[str]:
    """Every text of a Messages body: its system and its messages' text blocks."""
    system = body.get("system")
    found = [system] if isinstance(system, str) else [b["text"] for b in system or [] if b.get("type") == "text"]
    for message in body["messages"]:
        content = message["content"]
        found += [content] if isinstance(content, str) else [b["text"] for b in content if b.get("type") == "text"]
    return found


def assert_messages_call(call: Recorded, system: str) -> dict[str, Any]:
    """``call`` is a Messages request of the summary model with ``system``, one user turn, at
    temperature 0 and not streamed; its body."""
    body: dict[str, Any] = call.json()
    assert call.path == "/v1/messages"
    assert set(body) == {"model", "system", "messages", "max_tokens", "temperature"}
    assert (body["model"], body["system"], body["temperature"]) == (SUMMARY_MODEL, system, 0)
    assert [m["role"] for m in body["messages"]] == ["user"]
    return body


async def admin_session(url: str, session: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{url}/admin/tenants/default/sessions/{session}", headers=headers) as resp,
    ):
        assert resp.status == 200, await resp.text()
        found: dict[str, Any] = await resp.json()
        return found


async def test_the_summary_of_a_messages_conversation_is_the_llms(make_proxy: MakeProxy, claude: Claude) -> None:
    client, url = await make_proxy(tenants={"default": tenant(claude, "rolling_summary", ROLLING)}, proxy_toml=ADMIN)
    claude.fake.api_key = CLIENT_KEY  # any other key is a 401: the summary call must carry the client's
    claude.fake.answer_when(summary_answer)
    with structlog.testing.capture_logs() as logs:
        for turns in range(1, 30):
            raw = await client.messages.with_raw_response.create(
                model=MODEL,
                max_tokens=100,
                messages=conversation(turns),  # type: ignore[arg-type]
            )
            if raw.headers.get("X-Ctx-Compacted") == "1":
                break
        else:
            pytest.fail("the conversation was never compacted")
    answer = await raw.parse()
    assert answer.content[0].type == "text" and answer.content[0].text == "echo: What did we decide about the car?"

    *_, summary_call, forwarded = claude.fake.message_requests()
    asked = assert_messages_call(summary_call, system_prompt(MAX_TOKENS))
    assert asked["max_tokens"] == MAX_TOKENS and "<conversation>" in asked["messages"][0]["content"]
    assert credential(summary_call.headers) == CLIENT_KEY
    assert summary_call.headers["anthropic-version"] == forwarded.headers["anthropic-version"]  # the SDK's
    assert sum(summary_answer(r.json()) is not None for r in claude.fake.message_requests()) == 1

    sent = forwarded.json()
    check_shape(sent)
    assert any("## Context Summary\n\n" + SCRIPTED in text for text in texts(sent))
    [event] = [e for e in logs if e["event"] == "compaction"]
    assert event["summarizer"] == "llm"
    assert not [e for e in logs if e["event"] == "summary.llm_fallback"]
    [checkpoint] = (await admin_session(url, raw.headers["X-Ctx-Session"]))["checkpoints"]
    assert checkpoint["summarizer"] == "llm" and SCRIPTED in checkpoint["summary"]


@pytest.mark.parametrize("tenant_key", [None, TENANT_KEY], ids=["client_key", "tenant_key"])
async def test_the_summary_call_carries_the_clients_x_api_key_or_the_tenants(
    make_proxy: MakeProxy, claude: Claude, tenant_key: str | None
) -> None:
    _, url = await make_proxy(tenants={"default": tenant(claude, "rolling_summary", ROLLING, key=tenant_key)})
    claude.fake.api_key = tenant_key or CLIENT_KEY
    claude.fake.answer_when(summary_answer)
    # A client as Claude Code is: its key in x-api-key; its API version goes along.
    headers = {"x-api-key": CLIENT_KEY, "anthropic-version": "2023-01-01"}
    body = {"model": MODEL, "max_tokens": 100, "messages": conversation(24)}
    async with aiohttp.ClientSession() as http, http.post(url + "/v1/messages", json=body, headers=headers) as resp:
        assert resp.status == 200, await resp.text()
        assert resp.headers["X-Ctx-Compacted"] == "1"
    summary_call, forwarded = claude.fake.message_requests()
    assert_messages_call(summary_call, system_prompt(MAX_TOKENS))
    assert summary_call.headers["x-api-key"] == (tenant_key or CLIENT_KEY)
    assert "Authorization" not in summary_call.headers
    assert summary_call.headers["anthropic-version"] == "2023-01-01"
    if tenant_key is not None:
        assert CLIENT_KEY not in str(dict(summary_call.headers))
    assert any("## Context Summary\n\n" + SCRIPTED in text for text in texts(forwarded.json()))


async def test_the_page_lines_of_a_messages_conversation_are_the_llms(make_proxy: MakeProxy, claude: Claude) -> None:
    client, url = await make_proxy(
        tenants={"default": tenant(claude, "paged", PAGED, window=200_000)}, proxy_toml=ADMIN
    )
    claude.fake.api_key = CLIENT_KEY
    claude.fake.answer_when(page_lines_answer)
    with structlog.testing.capture_logs() as logs:
        raw = await client.messages.with_raw_response.create(
            model=MODEL,
            max_tokens=100,
            messages=conversation(5),  # type: ignore[arg-type]
        )
    assert raw.headers["X-Ctx-Compacted"] == "1"
    page_call, forwarded = claude.fake.message_requests()
    asked = assert_messages_call(page_call, PAGE_LINES_PROMPT)
    assert "Turn 0." in asked["messages"][0]["content"]
    assert credential(page_call.headers) == CLIENT_KEY

    contents = next(text for text in texts(forwarded.json()) if "## Contents Page" in text)
    assert "[Page #1] LLM page 1" in contents and "Line 0 of page 1" in contents
    assert not [e for e in logs if e["event"] == "pagelines.llm_fallback"]
    pages = (await admin_session(url, raw.headers["X-Ctx-Session"]))["pages"]
    assert pages and all(page["summary"] == f"LLM page {page['page']}" for page in pages)
