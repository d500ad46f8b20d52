"""The Responses API in the protocol scenario suite (``clients.PROTOCOLS``): the real ``openai`` SDK's
``responses.create`` against ``tests/fakes/responses_upstream.py``.

A neutral conversation goes as the Responses API carries one: ``instructions`` for the system
text, ``store: false`` and the whole history in ``input``; a user turn as a message of
``input_text``, an assistant turn as an output ``message`` item (with ``id`` and ``status``, as
Codex sends them back) followed by one ``function_call`` item per call, a tool turn as a
``function_call_output``. What the fake received reads back as neutral messages: ``instructions``
and leading system / developer messages as the system text, function calls folded into the
assistant turn before them. ``Forwarded.body`` has the input items under ``messages`` too, the key
the neutral tests compare bodies by.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import openai

from tests.fakes.responses_checks import check_request
from tests.fakes.responses_upstream import TOO_LONG, start_fake_responses
from tests.protocols.clients import PACE, TOOL, Forwarded, Protocol, Reply, SeenText, Streamed, Turns, text_of

__all__ = ["OpenAIResponses", "start_fake_responses"]


@dataclass(frozen=True)
class ResponsesForwarded(Forwarded):
    @property
    def parts(self) -> list[dict[str, Any]]:
        """Every text part of the forwarded input's messages but the system and developer ones."""
        out = []
        for item in self.body["input"]:
            if item.get("type", "message") != "message" or item.get("role") in ("system", "developer"):
                continue
            content = item["content"]
            texts = [content] if isinstance(content, str) else [p["text"] for p in content if "text" in p]
            out += [{"role": item["role"], "content": text} for text in texts]
        return out

    @property
    def newest(self) -> dict[str, Any]:
        item = self.body["input"][-1]
        content = item["content"]
        parts = [content] if isinstance(content, str) else [p.get("text", "") for p in content]
        return {"role": item["role"], "content": parts[-1]}


class OpenAIResponses(Protocol):
    def client(self, headers: Mapping[str, str]) -> openai.AsyncOpenAI:
        assert self.proxy is not None
        url = str(self.proxy.make_url("/v1"))
        made = openai.AsyncOpenAI(base_url=url, api_key="sk-client", max_retries=0, default_headers=dict(headers))
        self.clients.append(made)
        return made

    @staticmethod
    def conversation_of(body: dict[str, Any]) -> list[dict[str, Any]]:
        return list(body["input"])

    @staticmethod
    def view(conversation: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Input items as ``{role, content}`` messages: a message as its role and content, a call
        (or any other item the model made) as an assistant message holding it, an output as a
        tool message holding it."""
        out = []
        for item in conversation:
            kind = item.get("type", "message")
            if kind == "message":
                out.append({"role": item["role"], "content": item["content"]})
            else:
                out.append({"role": "tool" if kind.endswith("_output") else "assistant", "content": [item]})
        return out

    def wired(self, turn: dict[str, Any]) -> list[dict[str, Any]]:
        """One neutral turn as input items (a result with ``then``: the output, then the user's words)."""
        return self.body(None, [turn])["input"]

    def body(self, system: str | None, turns: Turns) -> dict[str, Any]:
        items = [item for n, turn in enumerate(turns) for item in self.wire(turn, n)]
        body: dict[str, Any] = {"model": self.model, "input": items, "store": False}
        if system:
            body["instructions"] = system
        if any(turn.get("calls") for turn in turns):
            body["tools"] = [{"type": "function", "name": TOOL["name"], "description": TOOL["description"],
                              "parameters": TOOL["schema"]}]  # fmt: skip
        return body

    @staticmethod
    def wire(turn: dict[str, Any], n: int) -> list[dict[str, Any]]:
        if turn["role"] == "tool":  # what the user typed while the tool ran: a message of its own, after it
            output = {"type": "function_call_output", "call_id": turn["id"], "output": turn["content"]}
            if not turn.get("then"):
                return [output]
            return [
                output,
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": turn["then"]}]},
            ]
        if turn["role"] != "assistant":
            return [
                {"type": "message", "role": turn["role"], "content": [{"type": "input_text", "text": turn["content"]}]}
            ]
        said = {"type": "output_text", "text": turn["content"], "annotations": []}
        items = [{"type": "message", "id": f"msg_{n}", "status": "completed", "role": "assistant", "content": [said]}]
        items = items if turn["content"] else []
        for call in turn.get("calls") or []:
            items.append({"type": "function_call", "id": f"fc_{call['id']}", "call_id": call["id"],
                          "name": call["name"], "arguments": json.dumps(call["input"]), "status": "completed"})  # fmt: skip
        return items

    async def send(self, system: str | None, turns: Turns, *, stream: bool = False, **headers: str) -> Reply:
        responses = self.client(headers).responses
        if not stream:
            raw = await responses.with_raw_response.create(**self.body(system, turns))
            return Reply(raw.parse().output_text, raw.headers)
        async with responses.with_streaming_response.create(**self.body(system, turns), stream=True) as resp:
            events = [event async for event in await resp.parse()]
            return Reply("".join(e.delta for e in events if e.type == "response.output_text.delta"), resp.headers)

    def forwarded(self, index: int = -1) -> Forwarded:
        body = self.fake.response_requests()[index].json()
        items = body["input"] if isinstance(body["input"], list) else [{"role": "user", "content": body["input"]}]
        lead = 0
        while lead < len(items) and items[lead].get("role") in ("system", "developer"):
            lead += 1
        head = [body["instructions"]] if body.get("instructions") else []
        system = "\n".join(head + [text_of(item["content"]) for item in items[:lead]]) or None
        return ResponsesForwarded(system, _neutral(items[lead:]), body)

    def requests(self) -> int:
        return len(self.fake.response_requests())

    def check_valid(self, forwarded: Forwarded) -> None:
        """The Responses API's rules as the fake checks them (outputs answer calls, reasoning with
        its item, no key of ctxproxy's own on the wire)."""
        assert check_request(forwarded.body, issued=frozenset(self.fake.issued)) is None

    def refuse_over(self, limit: int, *, in_stream: bool = False) -> None:
        self.fake.window = limit
        self.fake.refuse_in_stream = "error" if in_stream else None

    def reply_reporting(self, prompt: int, cached: int | None) -> None:
        """The next answer (JSON, the echo) reports ``prompt`` input tokens (0: a server that does
        not count) and, unless None, ``cached`` of them read from the provider's cache."""
        usage: dict[str, Any] = {"input_tokens": prompt, "output_tokens": 1, "total_tokens": prompt + 1}
        if cached is not None:
            usage["input_tokens_details"] = {"cached_tokens": cached}
        self.fake.reply("echo", usage=usage)

    def script_call(self, name: str, arguments: dict[str, Any], then: str, *, stream: bool = False) -> None:
        self.fake.reply(calls=[{"name": name, "arguments": json.dumps(arguments)}])
        self.fake.reply(then)

    @staticmethod
    def offered_tools(forwarded: Forwarded) -> list[str]:
        return [tool["name"] for tool in forwarded.body.get("tools") or [] if tool.get("type") == "function"]

    @staticmethod
    def tool_answers(forwarded: Forwarded) -> list[str]:
        return [item["output"] for item in forwarded.body["input"] if item.get("type") == "function_call_output"]

    @staticmethod
    def refusal() -> str:
        return TOO_LONG

    def refuse_after_opening(self) -> None:
        """The next request: a 200 stream whose ``response.created`` and ``response.in_progress``
        come before an overflow ``error`` event, each apart."""
        self.fake.reply_refusal_in_stream(delay=PACE)

    def refuse_after_content(self, pieces: list[str], gate: Any) -> None:
        self.fake.reply_refusal_in_stream(after_pieces=pieces, gate=gate)

    def stream_held(self, pieces: list[str], gate: Any) -> None:
        # created, in_progress, output_item.added, content_part.added, the first delta, then this one
        self.fake.reply("".join(pieces), pieces=pieces, hold=(5, gate))

    async def read_stream(self, system: str | None, turns: Turns, seen: SeenText) -> Streamed:
        responses = self.client({}).responses
        text, error = "", None
        async with responses.with_streaming_response.create(**self.body(system, turns), stream=True) as resp:
            async for event in await resp.parse():
                if event.type == "response.output_text.delta":
                    text += event.delta
                    seen(text)
                elif event.type == "error":
                    error = event.message
            return Streamed(text, resp.headers, error)


def _neutral(items: list[dict[str, Any]]) -> Turns:
    """Items as neutral ``{role, content}`` messages: calls folded into the assistant turn before
    them (one of their own when there is none), outputs as tool turns, reasoning left out."""
    out: Turns = []
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            out.append({"role": item["role"], "content": text_of(item["content"])})
        elif kind == "function_call_output":
            out.append({"role": "tool", "content": text_of(item["output"])})
        elif kind == "function_call" and not (out and out[-1]["role"] == "assistant"):
            out.append({"role": "assistant", "content": ""})
    return out
