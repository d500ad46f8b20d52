"""What the real Claude Code and Codex CLIs sent (``tests/agent_fixtures.py``), replayed through
ctxproxy byte for byte, with every strategy, against the fake upstreams on loopback.

Claude Code's requests go to ``/v1/messages`` with the query and headers it sent: each is answered
2xx (JSON or a stream, as it asked), and what reaches the upstream is the client's request: its
messages (a ``role: "system"`` one inside ``messages`` included, at its place), every other
top-level field byte for byte (``thinking``, ``context_management``, ``output_config`` …), its
``anthropic-beta``. Grown past a small window, a Claude Code session is compacted by every strategy
without losing what must stay: the newest message whole, the mid-conversation system message (in
place, or right after the first message once compacted over), ``tool_use`` / ``tool_result``
pairs, the client's order and system prompt. The ``HEAD /`` Claude Code probes its
base URL with is answered. Codex's requests go to ``/v1/responses``: while nothing is compacted
the upstream gets the very bytes, the client the very stream (its compaction, served by ctxproxy,
and its sessions compacted: ``tests/responses/test_codex_fixtures.py``); its WebSocket attempt
is relayed, and an upstream that does not take it answers in plain HTTP, so Codex falls back to
HTTPS.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.agent_fixtures import AgentRequest, agent_request, agent_requests
from tests.conftest import MakeProxy, Upstream
from tests.protocols.agent_checks import (
    blocks,
    kept_in_order,
    long_session,
    tool_pairs_intact,
    top_level_spans,
    with_field,
)
from tests.protocols.clients import AnthropicMessages, start_protocol

STRATEGIES = ["none", "sliding_window", "rolling_summary", "rounds", "cut_point", "paged"]
CLAUDE_CODE = [r for r in agent_requests("claude_code") if r.method == "POST"]
# The remote compaction is answered by ctxproxy itself (tests/responses/test_codex_fixtures.py).
CODEX = [r for r in agent_requests("codex") if r.method == "POST" and r.scenario != "remote_compaction"]
WINDOW = 100_000  # Claude Code's system prompt and 25 tools alone are 20k–26k tokens of it
# Top-level fields ctxproxy owns in a Messages body it compacts; every other one is the client's.
OWNED = {"messages", "system", "tools"}


@pytest.fixture
async def messages_api(aiohttp_server: Any, tmp_path: Path) -> AsyncIterator[AnthropicMessages]:
    speaker: AnthropicMessages = await start_protocol("anthropic", aiohttp_server, tmp_path)
    yield speaker
    await speaker.close()


async def replay(root: str, request: AgentRequest, raw: bytes, **headers: str) -> tuple[int, Any, bytes]:
    """Send ``raw`` to ``root`` as ``request`` was sent (method, path and query, headers, and
    ``headers``); the status, headers and body of the answer."""
    sent = request.replay_headers(**headers)
    async with aiohttp.ClientSession() as http:
        async with http.request(request.method, root.rstrip("/") + request.path, data=raw, headers=sent) as resp:
            return resp.status, resp.headers, await resp.read()


async def through_proxy(speaker: AnthropicMessages, request: AgentRequest, raw: bytes) -> tuple[bytes, Any]:
    """Replay a Claude Code request through the started proxy; the upstream's copy and the answer's
    headers."""
    streaming = json.loads(raw).get("stream") is True
    if streaming:
        speaker.fake.reply_stream(["Done."])
    else:
        speaker.fake.reply_json("Done.")
    assert speaker.proxy is not None
    status, headers, answer = await replay(
        str(speaker.proxy.make_url("")), request, raw, **{"x-api-key": "sk-ant-client"}
    )
    assert status == 200, answer[:500]
    if streaming:
        assert headers["Content-Type"].startswith("text/event-stream") and b"event: message_stop" in answer
    else:
        assert json.loads(answer)["type"] == "message"
    forwarded = speaker.fake.message_requests()[0]
    assert forwarded.query_string == request.path.partition("?")[2]
    for name in ("anthropic-beta", "anthropic-version", "user-agent"):
        assert forwarded.headers.get(name) == request.headers.get(name), name
    return forwarded.body, headers


def assert_client_fields_kept(raw: bytes, forwarded: bytes) -> None:
    """Every top-level field ctxproxy does not own reaches the upstream byte for byte; none is
    added or lost."""
    sent, got = top_level_spans(raw.decode()), top_level_spans(forwarded.decode())
    assert set(got) == set(sent)
    for name in set(sent) - OWNED:
        assert got[name] == sent[name], name


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("request_", CLAUDE_CODE, ids=lambda r: r.scenario)
async def test_claude_code_request_reaches_the_upstream_as_sent(
    messages_api: AnthropicMessages, request_: AgentRequest, strategy: str
) -> None:
    await messages_api.start(strategy=strategy)
    forwarded, headers = await through_proxy(messages_api, request_, request_.raw)
    assert headers["X-Ctx-Strategy"] == strategy and "X-Ctx-Forwarded-As-Sent" not in headers  # modelled
    assert_client_fields_kept(request_.raw, forwarded)
    got, sent = json.loads(forwarded), request_.body
    assert got["messages"] == sent["messages"]  # the system message inside them at its place
    assert got["system"] == sent["system"] and got["tools"] == sent["tools"]
    if strategy == "none":
        assert forwarded == request_.raw


async def test_claude_code_base_url_probe_is_answered(messages_api: AnthropicMessages) -> None:
    """Claude Code sends ``HEAD`` to its base URL before each run (issue 21.3): 200, no body."""
    await messages_api.start()
    assert messages_api.proxy is not None
    probe = agent_request("claude_code", "probe")
    assert probe.method == "HEAD" and probe.path == "/"
    status, _, body = await replay(str(messages_api.proxy.make_url("")), probe, b"")
    assert status == 200 and body == b""
    assert messages_api.fake.requests == []  # answered by ctxproxy itself


def system_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m["role"] == "system"]


def without_system(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m["role"] != "system"]


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize(("base", "stream"), [("continue", True), ("older_continue", False)])
async def test_a_long_claude_code_session_is_compacted_by_every_strategy(
    messages_api: AnthropicMessages, base: str, stream: bool, strategy: str
) -> None:
    """Claude Code's ``--continue`` request with 90 rounds of Bash calls (40 log lines each) before
    its last answer and newest message: ~120k tokens for a 100k window. The default model's one
    streams as captured; the older model's is sent as JSON (``stream`` set to false)."""
    request_ = agent_request("claude_code", base)
    grown = long_session(request_.body, rounds=90, size=40)
    raw = with_field(with_field(request_.raw.decode(), "messages", grown["messages"]), "stream", stream).encode()
    await messages_api.start(strategy=strategy, extra=f'\n[models."claude*"]\ncontext_window = {WINDOW}\n')
    forwarded, headers = await through_proxy(messages_api, request_, raw)
    before, after = int(headers["X-Ctx-Tokens-Before"]), int(headers["X-Ctx-Tokens-After"])
    assert headers["X-Ctx-Compacted"] == "1" and before > WINDOW > after, (before, after)
    assert_client_fields_kept(raw, forwarded)
    got, sent = json.loads(forwarded), grown
    assert got["tools"][: len(sent["tools"])] == sent["tools"]  # ctxproxy's own tools may follow
    assert got["system"][: len(sent["system"])] == sent["system"]
    tool_pairs_intact(got["messages"])
    assert kept_in_order(without_system(sent["messages"]), without_system(got["messages"])) >= 4  # a round at least
    newest = blocks(sent["messages"][-1])
    assert got["messages"][-1]["role"] == "user" and blocks(got["messages"][-1])[-len(newest) :] == newest
    # The default model's mid-conversation system message comes back exactly as sent, inside
    # messages: at its place while its part of the conversation is kept, else right after the
    # first message (never first, never moved into the top-level system).
    for message in system_messages(sent["messages"]):
        assert got["messages"].count(message) == 1
        assert all(block.get("text") != message["content"] for block in got["system"])
        if got["messages"].index(message) != 1:  # not after the first message: at its own place
            kept_in_order(sent["messages"], got["messages"])


@pytest.mark.parametrize("strategy", ["none", "rolling_summary"])
@pytest.mark.parametrize("request_", CODEX, ids=lambda r: r.scenario)
async def test_codex_request_is_relayed_byte_for_byte(
    make_proxy: MakeProxy, upstream: Upstream, request_: AgentRequest, strategy: str
) -> None:
    tenant = (
        f'[upstream]\nbase_url = "{{upstream}}"\n[compaction]\nstrategy = "{strategy}"\nsummarizer = "extractive"\n'
    )
    proxy = await make_proxy({"default": tenant})
    events = [
        {"type": "response.created", "sequence_number": 0, "response": {"id": "resp_1", "status": "in_progress"}},
        {"type": "response.completed", "sequence_number": 1, "response": {"id": "resp_1", "status": "completed"}},
    ]
    stream = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
    upstream.fake.for_path("/v1/responses").reply_raw(200, stream, headers={"Content-Type": "text/event-stream"})
    status, headers, answer = await replay(proxy.url(""), request_, request_.raw, authorization="Bearer sk-codex")
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream") and answer == stream
    (relayed,) = [r for r in upstream.fake.requests if r.path == "/v1/responses"]
    assert relayed.body == request_.raw
    for name in ("x-codex-turn-metadata", "x-codex-window-id", "x-codex-beta-features", "session-id", "originator"):
        assert relayed.headers.get(name) == request_.headers.get(name), name


async def test_codex_websocket_attempt_gets_a_plain_http_answer(make_proxy: MakeProxy, upstream: Upstream) -> None:
    """Codex's built-in OpenAI provider first asks to upgrade ``GET /v1/responses`` to a WebSocket;
    ctxproxy relays the upgrade (``wire.openai_responses.websocket``), and an upstream that does not
    take it answers Codex itself, so Codex falls back to ``POST /v1/responses`` (what
    bench/agent_clis.py's ``codex-openai`` shows)."""
    proxy = await make_proxy()
    request_ = agent_request("codex", "websocket")
    assert request_.headers["upgrade"] == "websocket" and "responses_websockets" in request_.headers["openai-beta"]
    status, _, _ = await replay(proxy.url(""), request_, b"", authorization="Bearer sk-codex", connection="Upgrade",
                                upgrade="websocket")  # fmt: skip
    assert status != 101
    (relayed,) = upstream.fake.requests
    assert relayed.method == "GET" and relayed.headers["upgrade"].lower() == "websocket"
    assert relayed.headers["openai-beta"] == request_.headers["openai-beta"]
