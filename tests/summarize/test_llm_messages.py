"""The LLM summariser and the page lines asked in Anthropic's Messages API (against the fake
Anthropic upstream): the request's shape and headers, and how the answer's text is read."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestServer
from structlog.testing import capture_logs

from ctxproxy.strategies.paged.lines import PageLines
from ctxproxy.summarize import SummaryTask
from ctxproxy.summarize.pagelines import SYSTEM_PROMPT, llm_page_lines
from ctxproxy.summarize.prompts import system_prompt
from ctxproxy.tokens import TokenCounter
from ctxproxy.upstream.client import UpstreamHttp
from ctxproxy.wire.anthropic.completion import ANTHROPIC_VERSION, MESSAGES_COMPLETION
from tests.fakes.anthropic_upstream import FakeAnthropic, anthropic_error, start_fake_anthropic
from tests.fakes.serving import Recorded
from tests.summarize.factories import assistant, completion_client, make_llm, user

ANSWER = "### Goal\n- Plan a trip to Lisbon.\n\n### Key facts\n- Ana: the hotel is near the Tejo."
CHAT = [user("Plan a trip to Lisbon for me.", name="Ana"), assistant("Sure, the hotel is near the Tejo.")]
CLIENT_KEY = "sk-ant-client-5c1d"
TENANT_KEY = "sk-ant-tenant-77e0"


@pytest.fixture
async def claude(aiohttp_server: Callable[..., Awaitable[TestServer]]) -> tuple[FakeAnthropic, str]:
    """The fake Anthropic upstream and its base URL (``http://127.0.0.1:PORT/v1``)."""
    fake, server = await start_fake_anthropic(aiohttp_server)
    return fake, str(server.make_url("/v1"))


def summariser(upstream_http: UpstreamHttp, base_url: str, counter: TokenCounter, **kwargs: Any) -> Any:
    kwargs.setdefault("api_key", None)
    kwargs.setdefault("client_headers", {"x-api-key": CLIENT_KEY})
    return make_llm(upstream_http, base_url, counter, completion=MESSAGES_COMPLETION, **kwargs)


async def summarise_once(
    claude: tuple[FakeAnthropic, str], upstream_http: UpstreamHttp, counter: TokenCounter, key: str, **kwargs: Any
) -> Recorded:
    """Summarise ``CHAT`` (``max_tokens`` 321) through an upstream that takes only ``key``; the
    one request it received."""
    fake, base_url = claude
    fake.api_key = key
    fake.reply_json(ANSWER)
    result = await summariser(upstream_http, base_url, counter, **kwargs).summarize(
        SummaryTask("fresh", CHAT, max_tokens=321)
    )
    assert (result.summarizer, result.text) == ("llm", ANSWER)
    [request] = fake.message_requests()
    return request


async def test_a_messages_request_with_the_clients_key_and_a_default_version(
    claude: tuple[FakeAnthropic, str], upstream_http: UpstreamHttp, counter: TokenCounter
) -> None:
    request = await summarise_once(claude, upstream_http, counter, CLIENT_KEY)
    body = request.json()
    assert set(body) == {"model", "system", "messages", "max_tokens", "temperature"}
    assert (body["model"], body["max_tokens"], body["temperature"]) == ("summary-mini", 321, 0)
    assert body["system"] == system_prompt(321)
    [turn] = body["messages"]
    assert turn["role"] == "user" and turn["content"].startswith("Summarise the conversation below.")
    assert "[user: Ana] Plan a trip to Lisbon for me." in turn["content"]
    assert request.headers["x-api-key"] == CLIENT_KEY and "Authorization" not in request.headers
    assert request.headers["anthropic-version"] == ANTHROPIC_VERSION  # the client sent none


async def test_the_tenants_key_replaces_the_clients_bearer_token_and_its_version_goes_along(
    claude: tuple[FakeAnthropic, str], upstream_http: UpstreamHttp, counter: TokenCounter
) -> None:
    client = {"Authorization": f"Bearer {CLIENT_KEY}", "anthropic-version": "2023-01-01"}
    request = await summarise_once(
        claude, upstream_http, counter, TENANT_KEY, api_key=TENANT_KEY, client_headers=client
    )
    assert request.headers["x-api-key"] == TENANT_KEY and "Authorization" not in request.headers
    assert request.headers["anthropic-version"] == "2023-01-01"
    assert CLIENT_KEY not in str(dict(request.headers))


async def test_the_answer_is_its_text_blocks_joined(
    claude: tuple[FakeAnthropic, str], upstream_http: UpstreamHttp, counter: TokenCounter
) -> None:
    fake, base_url = claude
    first, second = ANSWER.split("\n\n### Key facts")
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "summary-mini",
        "content": [
            {"type": "thinking", "thinking": "### Goal\n- think", "signature": "sig"},
            {"type": "text", "text": first},
            {"type": "text", "text": "\n\n### Key facts" + second},
        ],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 10},
    }
    fake.reply_raw(200, orjson.dumps(message), headers={"Content-Type": "application/json"})
    result = await summariser(upstream_http, base_url, counter).summarize(SummaryTask("fresh", CHAT))
    assert (result.summarizer, result.text) == ("llm", ANSWER)


@pytest.mark.parametrize(
    ("reason", "script"),
    [
        (
            "no_content",
            lambda f: f.reply_raw(200, b'{"type": "message"}', headers={"Content-Type": "application/json"}),
        ),
        ("empty_content", lambda f: f.reply_json(" ")),
        ("empty_content", lambda f: f.reply_json(tool_uses=[{"name": "lookup", "input": {}}])),
        ("status", lambda f: f.reply_error(529, anthropic_error("Overloaded", "overloaded_error"))),
        ("bad_json", lambda f: f.reply_raw(200, b"<html>", headers={"Content-Type": "text/html"})),
        (
            "truncated",
            lambda f: f.reply_raw(
                200,
                orjson.dumps(
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "text", "text": "### Goal\n- plan the"}],
                        "stop_reason": "max_tokens",
                        "usage": {"input_tokens": 10, "output_tokens": 1200},
                    }
                ),
                headers={"Content-Type": "application/json"},
            ),
        ),
    ],
)
async def test_an_answer_without_text_falls_back(
    reason: str,
    script: Any,
    claude: tuple[FakeAnthropic, str],
    upstream_http: UpstreamHttp,
    counter: TokenCounter,
) -> None:
    fake, base_url = claude
    script(fake)
    with capture_logs() as logs:
        result = await summariser(upstream_http, base_url, counter).summarize(SummaryTask("fresh", CHAT))
    assert result.summarizer == "extractive" and "Lisbon" in result.text
    assert [e["reason"] for e in logs if e["event"] == "summary.llm_fallback"] == [reason]
    assert CLIENT_KEY not in repr(logs)


async def test_page_lines_are_asked_in_the_messages_api(
    claude: tuple[FakeAnthropic, str], upstream_http: UpstreamHttp
) -> None:
    fake, base_url = claude
    fake.api_key = CLIENT_KEY
    page = [user("My locker code is 4417."), assistant("Noted.")]
    fake.reply_json(
        orjson.dumps({"pages": [{"summary": "The locker code", "lines": ["User: code", "Assistant: ok"]}]}).decode()
    )
    client = completion_client(
        upstream_http, base_url, api_key=None, client_headers={"x-api-key": CLIENT_KEY}, completion=MESSAGES_COMPLETION
    )
    assert await llm_page_lines(client, "summary-mini", [page]) == [
        PageLines("The locker code", ("User: code", "Assistant: ok"))
    ]
    [request] = fake.message_requests()
    body = request.json()
    assert body["system"] == SYSTEM_PROMPT and body["temperature"] == 0
    assert [m["role"] for m in body["messages"]] == ["user"] and "4417" in body["messages"][0]["content"]
    assert request.headers["x-api-key"] == CLIENT_KEY and request.headers["anthropic-version"] == ANTHROPIC_VERSION
