"""What the real Codex CLI sent (``tests/fixtures/agents/codex``), replayed through ctxproxy against
the fake Responses upstream: byte for byte while nothing is compacted, with every strategy;
compacted into a valid body once a session grows past a small window; and its remote compaction
(``compaction_trigger``) answered by ctxproxy, the item it gets back expanded before the model
sees it."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import aiohttp
import orjson
import pytest

from tests.agent_fixtures import AgentRequest, agent_request, agent_requests
from tests.fakes.responses_checks import check_request
from tests.protocols.test_strategies import STRATEGIES
from tests.responses.conftest import MODEL, ResponsesRig
from tests.wire.openai_responses.items import reasoning

CODEX = [r for r in agent_requests("codex") if r.method == "POST" and r.scenario != "remote_compaction"]


def issued_by_capture() -> int:
    """The number of the compaction item the capture's fake upstream gave Codex (its content is
    ``base64("fake compaction N")``, as this fake's are), which after_remote_compaction carries."""
    item = agent_request("codex", "after_remote_compaction").body["input"][-1]
    return int(base64.b64decode(item["encrypted_content"]).split()[-1])


async def replay(proxy: Any, request: AgentRequest, raw: bytes) -> tuple[int, Any, bytes]:
    headers = request.replay_headers(authorization="Bearer sk-codex")
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.make_url(request.path), data=raw, headers=headers) as resp:
            return resp.status, resp.headers, await resp.read()


def events(answer: bytes) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in answer.decode().splitlines() if line.startswith("data: ")]


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))  # with each strategy's own defaults
@pytest.mark.parametrize("request_", CODEX, ids=lambda r: r.scenario)
async def test_a_codex_request_that_fits_goes_upstream_byte_for_byte(
    rig: ResponsesRig, request_: AgentRequest, strategy: str
) -> None:
    rig.fake.issued.add(issued_by_capture())
    proxy = await rig.proxy(strategy=strategy)  # each strategy's own defaults
    status, headers, answer = await replay(proxy, request_, request_.raw)
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    assert events(answer)[-1]["type"] == "response.completed"
    (sent,) = rig.fake.response_requests()
    assert sent.body == request_.raw
    for name in ("x-codex-turn-metadata", "x-codex-window-id", "x-codex-beta-features", "session-id", "originator"):
        assert sent.headers.get(name) == request_.headers.get(name), name


def grown(request: AgentRequest, turns: int) -> dict[str, Any]:
    """The ``tool_result`` request with ``turns`` more rounds of shell work before its newest items:
    each a user ask, reasoning, an ``exec_command`` call, its long output, reasoning and an answer."""
    body = request.body
    items = body["input"]
    added: list[dict[str, Any]] = []
    for n in range(turns):
        call_id = f"call_grown{n:03d}"
        lines = "\n".join(f"/var/log/app{n}.log:{k}: ERROR disk full on volume {k}" for k in range(30))
        added += [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": f"Check log {n}."}]},
            reasoning(2 * n),
            {
                "type": "function_call",
                "id": f"fc_g{n}",
                "status": "completed",
                "call_id": call_id,
                "name": "exec_command",
                "arguments": json.dumps({"cmd": f"grep -c ERROR app{n}.log"}),
            },  # fmt: skip
            {"type": "function_call_output", "call_id": call_id, "output": lines},
            reasoning(2 * n + 1),
            {
                "type": "message",
                "role": "assistant",
                "id": f"msg_g{n}",
                "status": "completed",
                "content": [{"type": "output_text", "text": f"Log {n} has 30 errors.", "annotations": []}],
            },  # fmt: skip
        ]
    return {**body, "input": [*items[:3], *added, *items[3:]]}


@pytest.mark.parametrize("strategy", [s for s in sorted(STRATEGIES) if s != "none"])
async def test_a_long_codex_session_is_compacted_into_a_body_the_api_takes(rig: ResponsesRig, strategy: str) -> None:
    request_ = agent_request("codex", "tool_result")
    body = {**grown(request_, 30), "model": MODEL}  # the model whose window the tenant sets
    proxy = await rig.proxy(window=20_000, strategy=strategy, extra=STRATEGIES[strategy])
    status, headers, _ = await replay(proxy, request_, orjson.dumps(body))
    assert status == 200 and headers["X-Ctx-Compacted"] == "1"
    sent = orjson.loads(rig.fake.response_requests()[-1].body)
    assert check_request(sent) is None
    items = sent["input"]
    assert items[:2] == body["input"][:2]  # Codex's developer messages, first and as sent
    assert items[-2:] == body["input"][-2:]  # its newest call and output
    assert len(items) < len(body["input"])
    assert {k: v for k, v in sent.items() if k not in ("input", "tools")} == {
        k: v for k, v in body.items() if k not in ("input", "tools")}  # fmt: skip
    assert sent["tools"][: len(body["tools"])] == body["tools"]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
async def test_codex_remote_compaction_is_served_and_its_item_expanded(rig: ResponsesRig, stream: bool) -> None:
    trigger = agent_request("codex", "remote_compaction")
    proxy = await rig.proxy()
    raw = trigger.raw if stream else orjson.dumps({**trigger.body, "stream": False})
    status, headers, answer = await replay(proxy, trigger, raw)
    assert status == 200 and headers["X-Ctx-Remote-Compaction"] == "served"
    response = events(answer)[-1]["response"] if stream else orjson.loads(answer)
    (item,) = response["output"]
    assert item["type"] == "compaction" and item["encrypted_content"].startswith("ctxproxy:")
    assert rig.fake.requests == []

    after = agent_request("codex", "after_remote_compaction")
    body = copy.deepcopy(after.body)
    body["input"][-1] = item  # the item Codex got from ctxproxy, where the capture's upstream put its own
    status, _, _ = await replay(proxy, after, orjson.dumps(body))
    assert status == 200
    (sent,) = rig.fake.response_requests()
    items = orjson.loads(sent.body)["input"]
    assert items[:-1] == body["input"][:-1]
    summary = items[-1]["content"][0]["text"]
    command = json.loads(next(i for i in trigger.body["input"] if i.get("type") == "function_call")["arguments"])["cmd"]
    assert items[-1]["role"] == "user" and command in summary
