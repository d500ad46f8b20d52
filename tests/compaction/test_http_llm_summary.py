"""The LLM summariser end to end: its call to the tenant's upstream, what it sends, what comes back.

The fake upstream answers chat requests FIFO from its script, and the summariser's own calls land
in ``chat_requests()`` too (told apart by their system prompt). A scripted summary is queued before
the user request that triggers the compaction: the summary call is the first to reach the fake,
the forwarded user request the second.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiohttp
import openai
import pytest
import structlog
from multidict import CIMultiDict

from ctxproxy.summarize.prompts import system_prompt
from ctxproxy.tokens import TokenCounter
from tests.conftest import MakeProxy, Proxy, Upstream
from tests.fakes.upstream import Recorded, openai_error

MODEL = "ctx-test-model"  # in no built-in table: the tenant's default_context_window applies
SUMMARY_MODEL = "gpt-4o-mini-sum"
MAX_TOKENS = 300
SYSTEM = {"role": "system", "content": "You are a friendly trip planner."}
SCRIPTED = "### Goal\n- plan the trip\n\n### Key facts\n- flight at 9:40"
TENANT = """
default_context_window = 2000
[upstream]
base_url = "{upstream}"
API_KEY
[compaction]
strategy = "rolling_summary"
summarizer = "llm"
summary_model = "SUMMARY_MODEL"
summary_max_tokens = MAX_TOKENS
summary_timeout = TIMEOUT
[compaction.rolling_summary]
threshold = 0.8
target_ratio = 0.5
headroom_min_tokens = 0
headroom_ratio = 0.05
summary_max_tokens = MAX_TOKENS
"""
UPSTREAM_KEY = "sk-tenant-upstream-1f2e"
CLIENT_KEY = "sk-client-own-9a8b"


def tenant(api_key: str | None = None, timeout: float = 30) -> str:
    key = f'api_key = "{api_key}"\nheaders = {{ "OpenAI-Project" = "proj_sum" }}' if api_key else ""
    return (
        TENANT.replace("API_KEY", key)
        .replace("SUMMARY_MODEL", SUMMARY_MODEL)
        .replace("MAX_TOKENS", str(MAX_TOKENS))
        .replace("TIMEOUT", str(timeout))
    )


def history(turns: int, first: int = 1) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for n in range(first, first + turns):
        text = (
            f"Day {n} in Lisbon: we must visit district {n} before {n % 10 + 9}:00, and we decided to take tram {n}. "
            f"The museum on day {n} costs {n + 10} euros per person."
        )
        messages += [{"role": "user", "content": text}, {"role": "assistant", "content": f"Noted for day {n}."}]
    return messages


def conversation(turns: int) -> list[dict[str, Any]]:
    return [SYSTEM, *history(turns), {"role": "user", "content": "What should we pack?"}]


def is_summary_call(request: Recorded) -> bool:
    messages = request.json()["messages"]
    return messages[0] == {"role": "system", "content": system_prompt(MAX_TOKENS)}


async def post(
    http: aiohttp.ClientSession, proxy: Proxy, messages: list[dict[str, Any]], authorization: str | None = None
) -> Mapping[str, str]:
    headers = {"Authorization": authorization} if authorization else {}
    body = {"model": MODEL, "messages": messages}
    async with http.post(proxy.url("/v1/chat/completions"), json=body, headers=headers) as resp:
        assert resp.status == 200, await resp.text()
        await resp.read()
        return CIMultiDict(resp.headers)


# ------------------------------------------------------------------------------------------------


async def test_the_llm_summary_is_requested_first_and_forwarded_as_the_summary(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    proxy = await make_proxy({"default": tenant()})
    messages = conversation(36)
    upstream.fake.reply_json(SCRIPTED)
    with structlog.testing.capture_logs() as logs:
        async with aiohttp.ClientSession() as http:
            headers = await post(http, proxy, messages)
    assert headers["X-Ctx-Compacted"] == "1"
    end = int(headers["X-Ctx-Summarized"])
    summary_call, forwarded = upstream.fake.chat_requests()
    assert is_summary_call(summary_call) and not is_summary_call(forwarded)

    asked = summary_call.json()
    assert asked["model"] == SUMMARY_MODEL
    assert asked["temperature"] == 0
    assert asked["max_tokens"] == MAX_TOKENS
    assert asked.get("stream") in (None, False)
    assert [m["role"] for m in asked["messages"]] == ["system", "user"]
    prompt = asked["messages"][1]["content"]
    assert "<conversation>" in prompt
    # Exactly the summarised range, and never the conversation's system prompt.
    assert messages[1]["content"] in prompt and messages[end - 1]["content"] in prompt
    assert messages[end]["content"] not in prompt
    assert SYSTEM["content"] not in prompt

    sent = forwarded.json()
    assert sent["model"] == MODEL
    assert sent["messages"][0] == SYSTEM
    assert sent["messages"][1] == {
        "role": "assistant",
        "name": "context_summary",
        "content": "## Context Summary\n\n" + SCRIPTED,
    }
    assert sent["messages"][2:] == messages[end:]
    [event] = [e for e in logs if e["event"] == "compaction"]
    assert event["summarizer"] == "llm"
    assert not [e for e in logs if e["event"] == "summary.llm_fallback"]


async def test_the_next_compaction_updates_the_previous_llm_summary(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": tenant()})
    messages = conversation(36)
    upstream.fake.reply_json(SCRIPTED)
    async with aiohttp.ClientSession() as http:
        first = await post(http, proxy, messages)
        # The next turn reuses the checkpoint: no summary call.
        messages[-1:] = [messages[-1], {"role": "assistant", "content": "Light clothes."}]
        messages.append({"role": "user", "content": "And shoes?"})
        reused = await post(http, proxy, messages)
        assert len(upstream.fake.chat_requests()) == 3
        assert reused["X-Ctx-Summarized"] == first["X-Ctx-Summarized"] and "X-Ctx-Compacted" not in reused
        # A client that comes back with many more turns at once: the summary is updated.
        messages[-1:] = [*history(20, first=40), {"role": "user", "content": "Anything else?"}]
        upstream.fake.reply_json(SCRIPTED + "\n- hotel in Alfama")
        second = await post(http, proxy, messages)
    assert second["X-Ctx-Compacted"] == "1"
    assert int(second["X-Ctx-Summarized"]) > int(first["X-Ctx-Summarized"])
    requests = upstream.fake.chat_requests()
    assert [is_summary_call(r) for r in requests] == [True, False, False, True, False]
    prompt = requests[3].json()["messages"][1]["content"]
    assert "<previous-summary>" in prompt and "- plan the trip" in prompt and "- flight at 9:40" in prompt
    assert "<new-messages>" in prompt and "Day 40 in Lisbon" in prompt
    forwarded = requests[4].json()["messages"]
    assert forwarded[1]["content"] == "## Context Summary\n\n" + SCRIPTED + "\n- hotel in Alfama"
    assert sum("## Context Summary" in m["content"] for m in forwarded) == 1


@pytest.mark.parametrize("failure", ["status_500", "empty_body", "timeout"])
async def test_a_failing_summary_call_falls_back_to_an_extractive_summary(
    failure: str, make_proxy: MakeProxy, upstream: Upstream
) -> None:
    proxy = await make_proxy({"default": tenant(timeout=0.3)})
    if failure == "status_500":
        upstream.fake.reply_error(500, openai_error("The server had an error", type="server_error"))
    elif failure == "empty_body":
        upstream.fake.reply_json("Sure! Here is the summary:\n## Goal\n## Key facts\nLet me know if you need more.")
    else:
        upstream.fake.reply_delay(2.0)
    messages = conversation(36)
    with structlog.testing.capture_logs() as logs:
        async with aiohttp.ClientSession() as http:
            headers = await post(http, proxy, messages)
    assert headers["X-Ctx-Compacted"] == "1"
    end = int(headers["X-Ctx-Summarized"])
    summary_call, forwarded = upstream.fake.chat_requests()
    assert is_summary_call(summary_call)
    summary = forwarded.json()["messages"][1]
    assert summary["name"] == "context_summary"
    assert summary["content"].startswith("## Context Summary\n\n### Goal\n")
    assert "Day 1 in Lisbon" in summary["content"]  # made from the conversation itself
    assert "plan the trip" not in summary["content"] and "Sure!" not in summary["content"]
    assert forwarded.json()["messages"][2:] == messages[end:]
    [fallback] = [e for e in logs if e["event"] == "summary.llm_fallback"]
    assert fallback["reason"] == {"status_500": "status", "empty_body": "empty_body", "timeout": "timeout"}[failure]
    [event] = [e for e in logs if e["event"] == "compaction"]
    assert event["summarizer"] == "extractive"


async def test_the_summariser_uses_the_tenants_upstream_key_when_set(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": tenant(api_key=UPSTREAM_KEY)})
    upstream.fake.reply_json(SCRIPTED)
    client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key=CLIENT_KEY, max_retries=0)
    raw = await client.chat.completions.with_raw_response.create(model=MODEL, messages=conversation(36))
    await client.close()
    assert raw.headers["x-ctx-compacted"] == "1"
    summary_call, forwarded = upstream.fake.chat_requests()
    assert is_summary_call(summary_call)
    assert summary_call.headers["Authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert summary_call.headers["OpenAI-Project"] == "proj_sum"
    assert forwarded.headers["Authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert CLIENT_KEY not in str(dict(summary_call.headers))


async def test_the_summariser_uses_the_clients_authorization_without_a_tenant_key(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    proxy = await make_proxy({"default": tenant()})
    upstream.fake.reply_json(SCRIPTED)
    client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key=CLIENT_KEY, max_retries=0)
    raw = await client.chat.completions.with_raw_response.create(model=MODEL, messages=conversation(36))
    await client.close()
    assert raw.headers["x-ctx-compacted"] == "1"
    summary_call, forwarded = upstream.fake.chat_requests()
    assert is_summary_call(summary_call)
    assert summary_call.headers["Authorization"] == f"Bearer {CLIENT_KEY}"
    assert forwarded.headers["Authorization"] == f"Bearer {CLIENT_KEY}"
    assert raw.parse().choices[0].message.content == "echo: What should we pack?"


@pytest.mark.parametrize(
    "answer",
    [
        "## Context Summary\n\n" + SCRIPTED,  # the model repeats the header the proxy adds
        "```markdown\n" + SCRIPTED + "\n```",  # the model fences its answer
    ],
    ids=["with_header", "fenced"],
)
async def test_the_models_answer_is_normalised_into_one_summary(
    answer: str, make_proxy: MakeProxy, upstream: Upstream
) -> None:
    proxy = await make_proxy({"default": tenant()})
    upstream.fake.reply_json(answer)
    async with aiohttp.ClientSession() as http:
        headers = await post(http, proxy, conversation(36))
    assert headers["X-Ctx-Compacted"] == "1"
    _, forwarded = upstream.fake.chat_requests()
    assert forwarded.json()["messages"][1]["content"] == "## Context Summary\n\n" + SCRIPTED


async def test_a_summary_longer_than_summary_max_tokens_is_cut_to_fit(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    proxy = await make_proxy({"default": tenant()})
    bullets = "\n".join(f"- fact number {n}: the ferry to island {n} leaves at {n % 12 + 6}:05" for n in range(200))
    upstream.fake.reply_json("### Goal\n- plan the trip\n\n### Key facts\n" + bullets)
    async with aiohttp.ClientSession() as http:
        headers = await post(http, proxy, conversation(36))
    assert headers["X-Ctx-Compacted"] == "1"
    _, forwarded = upstream.fake.chat_requests()
    content = forwarded.json()["messages"][1]["content"]
    body = content.removeprefix("## Context Summary\n\n")
    assert body.startswith(
        "### Goal\n- plan the trip\n\n### Key facts\n- fact number 0:"
    )  # whole bullets kept in order
    assert TokenCounter().count_text(body, MODEL) <= MAX_TOKENS
    assert int(headers["X-Ctx-Tokens-After"]) < int(headers["X-Ctx-Tokens-Before"])
