"""Everything protocol-specific the conversation-level tests need, in one place.

A ``Protocol`` starts proxies against its own fake upstream, sends a neutral conversation
(``system`` text and ``{role, content}`` turns) with that protocol's real SDK pointed at the proxy
by base URL only, and reads back the answer text, the ``X-Ctx-*`` headers and what the fake
upstream received, as neutral ``{role, text}`` messages. It also scripts the model calling one of
ctxproxy's tools (``script_call``) and reads the tools a request offered and the answers ctxproxy
gave (``offered_tools``, ``tool_answers``). ``OpenAIChat`` speaks chat completions
to ``tests/fakes/upstream.py``; ``AnthropicMessages`` speaks the Messages API to
``tests/fakes/anthropic_upstream.py``; ``OpenAIResponses`` (``responses_client``) the Responses API
to ``tests/fakes/responses_upstream.py``; ``GeminiAPI`` (``gemini_client``) Gemini's API with the
``google-genai`` SDK to ``tests/fakes/gemini_upstream.py``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import openai
from aiohttp.test_utils import TestServer

from ctxproxy.services import TASKS
from tests.anthropic.conftest import check_shape
from tests.compaction.test_http_strategies import tool_pairs_intact
from tests.conftest import RIG_TENANT, ProxyTestServer, start_rig_proxy
from tests.fakes.anthropic_upstream import AnthropicWindow, start_fake_anthropic
from tests.fakes.anthropic_wire import reported
from tests.fakes.upstream import FakeWindow, openai_error, start_fake_upstream

ADMIN_KEY = "adm"
MEMORY_HEADER = "## Relevant Memories"
Turns = list[dict[str, Any]]
PACE = 0.05  # seconds between the events of a stream that must reach the proxy in separate reads
# What a stream refused as too long says (the same numbers for both protocols' wording).
REFUSED_PROMPT, REFUSED_LIMIT = 5000, 3000
SeenText = Callable[[str], None]  # called with the text streamed so far, after each piece
# A neutral conversation's tool calls: an assistant turn's ``calls`` ({id, name, input}) and the
# ``{"role": "tool", "id", "content"}`` turns that answer them — with ``then``, the text a user
# typed while the tool ran, sent with the result; this is the one tool they call.
TOOL = {
    "name": "lookup",
    "description": "Look something up in the bakery's records.",
    "schema": {"type": "object", "properties": {"q": {"type": "string"}}},
}


@dataclass(frozen=True)
class Reply:
    """One answer as the client saw it: its text and the response headers."""

    text: str
    headers: Mapping[str, str]

    @property
    def compacted(self) -> bool:
        return self.headers.get("X-Ctx-Compacted") == "1"

    def count(self, name: str) -> int:
        return int(self.headers.get(f"X-Ctx-{name}") or 0)


@dataclass(frozen=True)
class Streamed:
    """A stream as the client's SDK read it: its text, its headers, and the message of the error
    the SDK raised after that text (None when it raised none)."""

    text: str
    headers: Mapping[str, str]
    error: str | None


@dataclass(frozen=True)
class Forwarded:
    """One request the fake upstream received: its system text and its messages as {role, text}."""

    system: str | None
    messages: Turns
    body: dict[str, Any]

    @property
    def conversation(self) -> list[dict[str, Any]]:
        """The body's conversation as the protocol carries it: ``messages``, or the Responses API's
        ``input`` items."""
        return list(self.body["messages"] if "messages" in self.body else self.body["input"])

    @property
    def parts(self) -> list[dict[str, Any]]:
        """Every text part of the forwarded messages, in order, as ``{role, content}`` (a string
        content is one part): what the model reads, whether a protocol that needs alternating
        roles merged ctxproxy's messages into the client's turns or not."""
        out = []
        for message in (m for m in self.body["messages"] if m["role"] != "system"):
            content = message["content"]
            texts = [content] if isinstance(content, str) else [p["text"] for p in content if p.get("type") == "text"]
            out += [{"role": message["role"], "content": text} for text in texts]
        return out

    @property
    def newest(self) -> dict[str, Any]:
        """The client's newest turn: the last text part that is not ctxproxy's ``## Relevant
        Memories`` block, which follows it when it opens with tool results (a message of its
        own, or merged into its turn)."""
        parts = self.parts
        while parts and parts[-1]["content"].startswith(MEMORY_HEADER):
            parts.pop()
        return parts[-1]


def text_of(content: Any) -> str:
    """A message content's text: a string as is, the text parts of a list joined."""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


@dataclass
class Protocol:
    """The shared half: proxies in front of the fake, their tenants, what they forwarded."""

    name: str
    fake: Any
    upstream: TestServer
    root: Path
    model: str
    servers: list[ProxyTestServer] = field(default_factory=list)
    clients: list[Any] = field(default_factory=list)
    proxy: TestServer | None = None

    @property
    def upstream_url(self) -> str:
        return str(self.upstream.make_url("/v1"))

    async def start(self, window: int = 200_000, strategy: str = "none", extra: str = "") -> None:
        """Start a proxy whose ``default`` tenant has this window for the model, this strategy, and
        ``extra`` TOML after ``[compaction]``."""
        tenant = RIG_TENANT.format(upstream=self.upstream_url, upstream_extra="", model=self.model, window=window,
                                   strategy=strategy, summarizer="extractive")  # fmt: skip
        admin = f'[admin]\napi_key = "{ADMIN_KEY}"\n'
        self.proxy = await start_rig_proxy(self.root, self.servers, {"default": tenant + extra}, admin)

    async def settle(self) -> None:
        """Let the engine's follow-up work end before the next request, as a human-paced client does."""
        assert self.proxy is not None
        await self.proxy.app[TASKS].drain(5)

    @staticmethod
    def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """How the fake is told that the model calls ``name`` with ``arguments`` (its reply_* keywords)."""
        raise NotImplementedError

    def script_call(self, name: str, arguments: dict[str, Any], then: str, *, stream: bool = False) -> None:
        """The model's next answer calls ``name`` with ``arguments``; the one after says ``then``."""
        if stream:
            self.fake.reply_stream(**self.call(name, arguments))
            self.fake.reply_stream([then])
        else:
            self.fake.reply_json(**self.call(name, arguments))
            self.fake.reply_json(then)

    @staticmethod
    def conversation_of(body: dict[str, Any]) -> list[dict[str, Any]]:
        """A request body's conversation as the protocol carries it (``messages``)."""
        return list(body["messages"])

    @staticmethod
    def view(conversation: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The conversation as ``{role, content}`` messages the neutral checks read: the protocol's
        own messages, for the protocols whose conversation is made of them."""
        return conversation

    async def pages(self, session: str) -> dict[int, dict[str, Any]]:
        """The archived pages of a session, by number, as the admin API shows them (recall counts)."""
        assert self.proxy is not None
        url = self.proxy.make_url(f"/admin/tenants/default/sessions/{session}")
        async with aiohttp.ClientSession() as http:
            async with http.get(url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as resp:
                assert resp.status == 200, await resp.text()
                return {page["page"]: page for page in (await resp.json())["pages"]}

    async def close(self) -> None:
        for client in self.clients:
            await client.close()
        for server in self.servers:
            await server.close()


class OpenAIChat(Protocol):
    def client(self, headers: Mapping[str, str]) -> openai.AsyncOpenAI:
        assert self.proxy is not None
        url = str(self.proxy.make_url("/v1"))
        made = openai.AsyncOpenAI(base_url=url, api_key="sk-client", max_retries=0, default_headers=dict(headers))
        self.clients.append(made)
        return made

    def body(self, system: str | None, turns: Turns) -> dict[str, Any]:
        messages = [{"role": "system", "content": system}] if system else []
        for turn in turns:  # what the user typed while a tool ran: a message of its own, after the result
            messages += [self.wire(turn), *([{"role": "user", "content": turn["then"]}] if turn.get("then") else [])]
        body = {"model": self.model, "messages": messages}
        if any(turn.get("calls") for turn in turns):
            function = {"name": TOOL["name"], "description": TOOL["description"], "parameters": TOOL["schema"]}
            body["tools"] = [{"type": "function", "function": function}]
        return body

    def wired(self, turn: dict[str, Any]) -> list[dict[str, Any]]:
        """One neutral turn as this protocol's messages (a result with ``then``: two)."""
        return self.body(None, [turn])["messages"]

    @staticmethod
    def wire(turn: dict[str, Any]) -> dict[str, Any]:
        if turn["role"] == "tool":
            return {"role": "tool", "tool_call_id": turn["id"], "content": turn["content"]}
        if not turn.get("calls"):
            return turn
        calls = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": json.dumps(c["input"])}}
            for c in turn["calls"]
        ]
        return {"role": "assistant", "content": turn["content"] or None, "tool_calls": calls}

    async def send(self, system: str | None, turns: Turns, *, stream: bool = False, **headers: str) -> Reply:
        chat = self.client(headers).chat.completions
        if not stream:
            raw = await chat.with_raw_response.create(**self.body(system, turns))
            answer = raw.parse().choices[0].message.content or ""
            return Reply(answer, raw.headers)
        async with chat.with_streaming_response.create(**self.body(system, turns), stream=True) as resp:
            pieces = [c.choices[0].delta.content or "" async for c in await resp.parse() if c.choices]
            return Reply("".join(pieces), resp.headers)

    def forwarded(self, index: int = -1) -> Forwarded:
        body = self.fake.chat_requests()[index].json()
        messages = body["messages"]
        lead = 0
        while lead < len(messages) and messages[lead]["role"] == "system":
            lead += 1
        system = "\n".join(text_of(m["content"]) for m in messages[:lead]) or None
        neutral = [{"role": m["role"], "content": text_of(m.get("content"))} for m in messages[lead:]]
        return Forwarded(system, neutral, body)

    def requests(self) -> int:
        return len(self.fake.chat_requests())

    def check_valid(self, forwarded: Forwarded) -> None:
        """Chat completions: system messages only lead, tool calls never lose their results."""
        assert all(m["role"] != "system" for m in forwarded.messages), forwarded.messages[:2]
        assert tool_pairs_intact(forwarded.body["messages"])

    def refuse_over(self, limit: int, *, in_stream: bool = False) -> None:
        """A prompt over ``limit`` is refused with ``context_length_exceeded``; ``in_stream``: the
        next request only, as the error event of a 200 stream."""

        def refusal(window: int, prompt: int) -> dict[str, Any]:
            wording = f"This model's maximum context length is {window} tokens. However, your messages resulted in {prompt} tokens."
            return openai_error(wording, param="messages", code="context_length_exceeded")

        if in_stream:
            self.fake.reply_sse_error(refusal(limit, limit + 1)["error"])
        else:
            self.fake.window = FakeWindow(limit, refusal)

    @staticmethod
    def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"tool_calls": [{"function": {"name": name, "arguments": json.dumps(arguments)}}]}

    def reply_reporting(self, prompt: int, cached: int | None) -> None:
        """The next answer (JSON, the echo) reports ``prompt`` prompt tokens (0: a server that does
        not count) and, unless None, ``cached`` of them read from the provider's cache."""
        usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": 1, "total_tokens": prompt + 1}
        if cached is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        self.fake.reply_json(usage=usage)

    @staticmethod
    def offered_tools(forwarded: Forwarded) -> list[str]:
        return [tool["function"]["name"] for tool in forwarded.body.get("tools") or []]

    @staticmethod
    def tool_answers(forwarded: Forwarded) -> list[str]:
        return [m["content"] for m in forwarded.body["messages"] if m["role"] == "tool"]

    @staticmethod
    def refusal() -> str:
        return (
            f"This model's maximum context length is {REFUSED_LIMIT} tokens. "
            f"However, your messages resulted in {REFUSED_PROMPT} tokens."
        )

    def refuse_after_opening(self) -> None:
        """The next request: a 200 stream whose keep-alive comment and role-only first delta come
        before an overflow error event, each apart."""
        self.fake.reply_sse_error(openai_error(self.refusal()), keepalive=True, delay=PACE)

    def refuse_after_content(self, pieces: list[str], gate: asyncio.Event) -> None:
        """The next request: a 200 stream with ``pieces`` of text, then an overflow error event
        once ``gate`` is set."""
        self.fake.reply_sse_error(openai_error(self.refusal()), after_pieces=pieces, gate=gate)

    def stream_held(self, pieces: list[str], gate: asyncio.Event) -> None:
        """The next request: a stream of ``pieces`` whose second piece waits until ``gate`` is set."""
        self.fake.reply_stream(pieces, hold=(2, gate))  # the role delta, the first piece, then this

    async def read_stream(self, system: str | None, turns: Turns, seen: SeenText) -> Streamed:
        chat = self.client({}).chat.completions
        text, error = "", None
        async with chat.with_streaming_response.create(**self.body(system, turns), stream=True) as resp:
            try:
                async for chunk in await resp.parse():
                    if chunk.choices and chunk.choices[0].delta.content:
                        text += chunk.choices[0].delta.content
                        seen(text)
            except openai.APIError as exc:
                error = exc.message
            return Streamed(text, resp.headers, error)


class AnthropicMessages(Protocol):
    def client(self, headers: Mapping[str, str]) -> anthropic.AsyncAnthropic:
        assert self.proxy is not None
        url = str(self.proxy.make_url(""))
        made = anthropic.AsyncAnthropic(
            base_url=url, api_key="sk-ant-client", max_retries=0, default_headers=dict(headers)
        )
        self.clients.append(made)
        return made

    def body(self, system: str | None, turns: Turns) -> dict[str, Any]:
        body = {"model": self.model, "max_tokens": 200, "messages": [self.wire(turn) for turn in turns]}
        if system:
            body["system"] = system
        if any(turn.get("calls") for turn in turns):
            body["tools"] = [{"name": TOOL["name"], "description": TOOL["description"], "input_schema": TOOL["schema"]}]
        return body

    def wired(self, turn: dict[str, Any]) -> list[dict[str, Any]]:
        """One neutral turn as this protocol's messages (always one)."""
        return [self.wire(turn)]

    @staticmethod
    def wire(turn: dict[str, Any]) -> dict[str, Any]:
        if turn["role"] == "tool":
            result = {"type": "tool_result", "tool_use_id": turn["id"], "content": turn["content"]}
            typed = [{"type": "text", "text": turn["then"]}] if turn.get("then") else []
            return {"role": "user", "content": [result, *typed]}
        if not turn.get("calls"):
            return turn
        said = [{"type": "text", "text": turn["content"]}] if turn["content"] else []
        uses = [{"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["input"]} for c in turn["calls"]]
        return {"role": "assistant", "content": said + uses}

    async def send(self, system: str | None, turns: Turns, *, stream: bool = False, **headers: str) -> Reply:
        messages = self.client(headers).messages
        if not stream:
            raw = await messages.with_raw_response.create(**self.body(system, turns))
            answer = "".join(b.text for b in (await raw.parse()).content if b.type == "text")
            return Reply(answer, raw.headers)
        async with messages.with_streaming_response.create(**self.body(system, turns), stream=True) as resp:
            events = [e async for e in await resp.parse()]
            pieces = [e.delta.text for e in events if e.type == "content_block_delta" and e.delta.type == "text_delta"]
            return Reply("".join(pieces), resp.headers)

    def forwarded(self, index: int = -1) -> Forwarded:
        body = self.fake.message_requests()[index].json()
        neutral = [{"role": m["role"], "content": text_of(m["content"])} for m in body["messages"]]
        return Forwarded(text_of(body.get("system")) or None, neutral, body)

    def requests(self) -> int:
        return len(self.fake.message_requests())

    def check_valid(self, forwarded: Forwarded) -> None:
        """The Messages API's rules (the fake refuses a body that breaks them, too)."""
        check_shape(forwarded.body)

    def refuse_over(self, limit: int, *, in_stream: bool = False) -> None:
        """A prompt over ``limit`` is refused with ``prompt is too long``; ``in_stream``: as the
        error event of a 200 stream."""
        self.fake.window = AnthropicWindow(limit, in_stream=in_stream)

    @staticmethod
    def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"tool_uses": [{"name": name, "input": arguments}]}

    def reply_reporting(self, prompt: int, cached: int | None) -> None:
        """The next answer (JSON, the echo) reports a prompt of ``prompt`` tokens (0: a server that
        does not count) and, unless None, ``cached`` of them read from the cache."""
        usage = {"input_tokens": prompt - (cached or 0), "output_tokens": 1}
        if cached is not None:
            usage |= {"cache_read_input_tokens": cached, "cache_creation_input_tokens": 0}
        self.fake.reply_json(usage=usage)

    @staticmethod
    def offered_tools(forwarded: Forwarded) -> list[str]:
        return [tool["name"] for tool in forwarded.body.get("tools") or []]

    @staticmethod
    def tool_answers(forwarded: Forwarded) -> list[str]:
        contents = [m["content"] for m in forwarded.body["messages"] if isinstance(m["content"], list)]
        return [b["content"] for blocks in contents for b in blocks if b.get("type") == "tool_result"]

    @staticmethod
    def refusal() -> str:
        return f"prompt is too long: {REFUSED_PROMPT} tokens > {REFUSED_LIMIT} maximum"

    def refuse_after_opening(self) -> None:
        """The next request: a 200 stream whose ``message_start`` and ``ping`` come before an
        overflow ``error`` event, each apart."""
        self.fake.reply_sse_error("invalid_request_error", self.refusal(), ping=True, delay=PACE)

    def refuse_after_content(self, pieces: list[str], gate: asyncio.Event) -> None:
        self.fake.reply_sse_error("invalid_request_error", self.refusal(), after_pieces=pieces, gate=gate)

    def stream_held(self, pieces: list[str], gate: asyncio.Event) -> None:
        # message_start, content_block_start, ping, the first piece's delta, then this one
        self.fake.reply_stream(pieces, hold=(4, gate))

    async def read_stream(self, system: str | None, turns: Turns, seen: SeenText) -> Streamed:
        messages = self.client({}).messages
        text, error = "", None
        async with messages.with_streaming_response.create(**self.body(system, turns), stream=True) as resp:
            try:
                async for event in await resp.parse():
                    if event.type == "content_block_delta" and event.delta.type == "text_delta":
                        text += event.delta.text
                        seen(text)
            except anthropic.APIStatusError as exc:
                error = reported(exc)[1]
            return Streamed(text, resp.headers, error)


Speaker = tuple[type[Protocol], Any, str]  # the class that speaks a protocol, its fake upstream's starter, its model


def _responses() -> Speaker:
    """The Responses API's speaker, which builds on the classes above (so it is imported when asked for)."""
    from tests.protocols.responses_client import OpenAIResponses, start_fake_responses

    return OpenAIResponses, start_fake_responses, "gpt-test-responses"


def _gemini() -> Speaker:
    """Gemini's speaker, which builds on the classes above (so it is imported when asked for)."""
    from tests.protocols.gemini_client import GeminiAPI, start_fake_gemini

    return GeminiAPI, start_fake_gemini, "gemini-test-flash"


# The per-protocol table: what speaks each protocol, given when asked.
PROTOCOLS: dict[str, Callable[[], Speaker]] = {
    "openai": lambda: (OpenAIChat, start_fake_upstream, "ctx-test-model"),
    "anthropic": lambda: (AnthropicMessages, start_fake_anthropic, "claude-test-1"),
    "responses": _responses,
    "gemini": _gemini,
}


async def start_protocol(name: str, aiohttp_server: Any, root: Path) -> Any:
    kind, start_fake, model = PROTOCOLS[name]()
    fake, server = await start_fake(aiohttp_server)
    return kind(name, fake, server, root, model)
