"""Every strategy compacts a long agent conversation — developer messages, shell calls and their
outputs, reasoning items with ``encrypted_content`` — into a body the Responses API takes: the
developer messages first and as sent, no output without its call, every reasoning item right
before the item it produced, and every item that is forwarded exactly as the client sent it."""

from __future__ import annotations

import json
from typing import Any

import openai
import orjson
import pytest

from ctxproxy.services import TASKS
from tests.fakes.responses_checks import check_request
from tests.protocols.test_strategies import STRATEGIES
from tests.responses.conftest import MODEL, ResponsesRig
from tests.wire.openai_responses.items import codex_turns, developer, user

WINDOW = 1200
TOOLS = [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}]
HEAD = [developer("You are a coding agent. Keep answers short.", 0), developer("<skills_instructions/>", 1)]
INPUT = [*HEAD, user("<environment_context><cwd>/work</cwd></environment_context>"), *codex_turns(12),
         user("Which log had the most errors?")]  # fmt: skip


def canonical(item: Any) -> bytes:
    return orjson.dumps(item, option=orjson.OPT_SORT_KEYS)


async def send(client: openai.AsyncOpenAI, stream: bool) -> Any:
    body = {"model": MODEL, "input": INPUT, "tools": TOOLS, "store": False, "include": ["reasoning.encrypted_content"]}
    if not stream:
        return await client.responses.with_raw_response.create(**body)
    async with client.responses.with_streaming_response.create(**body, stream=True) as resp:
        [event async for event in await resp.parse()]
        return resp


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
async def test_each_strategy_compacts_an_agent_conversation_into_a_valid_body(rig: ResponsesRig, strategy: str) -> None:
    proxy = await rig.proxy(window=WINDOW, strategy=strategy, extra=STRATEGIES[strategy])
    client = rig.client(proxy)
    first = await send(client, stream=False)
    assert first.headers.get("X-Ctx-Compacted") == "1", dict(first.headers)
    sent = orjson.loads(rig.fake.response_requests()[-1].body)
    items = sent["input"]
    assert check_request(sent) is None
    assert items[:2] == HEAD and items[-1] == INPUT[-1]
    assert len(items) < len(INPUT)
    theirs = {canonical(item) for item in INPUT}
    ours = [item for item in items if canonical(item) not in theirs]
    assert len(ours) <= 3, ours  # a summary (and at most a recalled page's or memories' message)
    assert all(item.get("type") == "message" and set(item) == {"type", "role", "content"} for item in ours)
    assert {k: v for k, v in sent.items() if k not in ("input", "tools")} == {
        "model": MODEL, "store": False, "include": ["reasoning.encrypted_content"]}  # fmt: skip
    assert sent["tools"][:1] == TOOLS  # the client's, then ctxproxy's when there is something to recall
    assert all(tool["name"].startswith("ctxproxy_") for tool in sent["tools"][1:])
    await proxy.app[TASKS].drain(5)

    streamed = await send(client, stream=True)  # the same prompt again, streamed: the compaction is reused
    assert streamed.headers.get("X-Ctx-Compacted") is None
    assert orjson.loads(rig.fake.response_requests()[-1].body)["input"] == items


async def test_the_summary_says_what_the_calls_did(rig: ResponsesRig) -> None:
    proxy = await rig.proxy(window=WINDOW, strategy="cut_point", extra=STRATEGIES["cut_point"])
    await send(rig.client(proxy), stream=False)
    sent = orjson.loads(rig.fake.response_requests()[-1].body)["input"]
    summary = next(item["content"] for item in sent if "Context Summary" in json.dumps(item))
    assert "exec_command" in summary or "ERROR" in summary
