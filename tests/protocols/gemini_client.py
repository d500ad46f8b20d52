"""Gemini's API in the protocol scenario suite (``clients.PROTOCOLS``): the real ``google-genai``
SDK's ``generate_content`` / ``generate_content_stream`` against ``tests/fakes/gemini_upstream.py``.

A neutral conversation goes as Gemini carries one: the system text as ``systemInstruction``, a user
turn as a ``user`` content of text, an assistant turn as a ``model`` content (its text, then one
``functionCall`` part per call), a tool turn as a ``user`` content of one ``functionResponse`` (and
the text typed while the tool ran after it, in the same content). What the fake received reads back
as neutral messages: a content of function responses as a tool turn, any other as its text. The
view the neutral byte-stability checks compare (``view``) is each content as ``{role, content:
parts}``, a model content as an assistant message.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from google import genai
from google.genai import errors, types

from tests.fakes.gemini_checks import check_request
from tests.fakes.gemini_upstream import overflow_message, start_fake_gemini
from tests.protocols.clients import (
    REFUSED_LIMIT,
    REFUSED_PROMPT,
    TOOL,
    Forwarded,
    Protocol,
    Reply,
    SeenText,
    Streamed,
    Turns,
)

__all__ = ["GeminiAPI", "start_fake_gemini"]


def _text(parts: list[dict[str, Any]]) -> str:
    return "".join(p["text"] for p in parts if isinstance(p.get("text"), str) and not p.get("thought"))


def _response(part: dict[str, Any]) -> dict[str, Any] | None:
    return part.get("functionResponse", part.get("function_response"))


@dataclass(frozen=True)
class GeminiForwarded(Forwarded):
    @property
    def conversation(self) -> list[dict[str, Any]]:
        return list(self.body["contents"])

    @property
    def parts(self) -> list[dict[str, Any]]:
        """Every text part of the forwarded contents, as ``{role, content}`` (``model``: assistant)."""
        out = []
        for content in self.body["contents"]:
            role = "assistant" if content.get("role") == "model" else "user"
            out += [{"role": role, "content": p["text"]} for p in content["parts"] if isinstance(p.get("text"), str)]
        return out


class GeminiAPI(Protocol):
    @property
    def upstream_url(self) -> str:
        return str(self.upstream.make_url("/v1beta"))

    def client(self, headers: Mapping[str, str]) -> Any:
        assert self.proxy is not None
        options = {"base_url": str(self.proxy.make_url("")), "headers": dict(headers)}
        return genai.Client(api_key="client-gemini-key", http_options=options).aio

    async def close(self) -> None:
        await super().close()

    @staticmethod
    def conversation_of(body: dict[str, Any]) -> list[dict[str, Any]]:
        return list(body["contents"])

    @staticmethod
    def view(conversation: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            {"role": "assistant" if c.get("role") == "model" else "user", "content": c["parts"]} for c in conversation
        ]

    def wired(self, turn: dict[str, Any]) -> list[dict[str, Any]]:
        return [self.wire(turn)]

    def body(self, system: str | None, turns: Turns) -> dict[str, Any]:
        body: dict[str, Any] = {"contents": [self.wire(turn) for turn in turns]}
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}], "role": "user"}
        if any(turn.get("calls") for turn in turns):
            declaration = {"name": TOOL["name"], "description": TOOL["description"], "parameters": TOOL["schema"]}
            body["tools"] = [{"functionDeclarations": [declaration]}]
        return body

    @staticmethod
    def wire(turn: dict[str, Any]) -> dict[str, Any]:
        if turn["role"] == "tool":
            response = {"functionResponse": {"name": TOOL["name"], "response": {"output": turn["content"]}}}
            typed = [{"text": turn["then"]}] if turn.get("then") else []
            return {"parts": [response, *typed], "role": "user"}
        if turn["role"] != "assistant":
            return {"parts": [{"text": turn["content"]}], "role": "user"}
        said = [{"text": turn["content"]}] if turn["content"] else []
        calls = [{"functionCall": {"args": c["input"], "name": c["name"]}} for c in turn.get("calls") or []]
        return {"parts": [*said, *calls], "role": "model"}

    def _config(self, body: dict[str, Any]) -> types.GenerateContentConfig:
        system = body.get("systemInstruction")
        return types.GenerateContentConfig(
            system_instruction=system["parts"][0]["text"] if system else None,
            tools=[
                types.Tool(
                    function_declarations=[
                        types.FunctionDeclaration(
                            name=TOOL["name"], description=TOOL["description"], parameters_json_schema=TOOL["schema"]
                        )
                    ]
                )
            ]  # fmt: skip
            if body.get("tools")
            else None,
        )

    async def send(self, system: str | None, turns: Turns, *, stream: bool = False, **headers: str) -> Reply:
        models = self.client(headers).models
        body = self.body(system, turns)
        if not stream:
            answer = await models.generate_content(
                model=self.model, contents=body["contents"], config=self._config(body)
            )
            return Reply(answer.text or "", answer.sdk_http_response.headers)
        chunks = [c async for c in await models.generate_content_stream(
            model=self.model, contents=body["contents"], config=self._config(body))]  # fmt: skip
        return Reply("".join(c.text or "" for c in chunks), chunks[0].sdk_http_response.headers)

    def forwarded(self, index: int = -1) -> Forwarded:
        recorded = self.fake.generate_requests()[index]
        body = recorded.json()
        if recorded.path.endswith(":streamGenerateContent"):
            body = {**body, "stream": True}  # what the neutral tests read of a stream (the path says it)
        system = body.get("systemInstruction")
        neutral = []
        for content in body["contents"]:
            responses = [r for r in map(_response, content["parts"]) if r is not None]
            if responses:
                neutral.append(
                    {"role": "tool", "content": "".join(str(r["response"].get("output")) for r in responses)}
                )
            else:
                role = "assistant" if content.get("role") == "model" else "user"
                neutral.append({"role": role, "content": _text(content["parts"])})
        return GeminiForwarded(_text(system["parts"]) if system else None, neutral, body)

    def requests(self) -> int:
        return len(self.fake.generate_requests())

    def check_valid(self, forwarded: Forwarded) -> None:
        assert check_request({k: v for k, v in forwarded.body.items() if k != "stream"}) is None

    def refuse_over(self, limit: int, *, in_stream: bool = False) -> None:
        self.fake.window = limit
        self.fake.refuse_in_stream = in_stream

    def reply_reporting(self, prompt: int, cached: int | None) -> None:
        usage: dict[str, Any] = {"promptTokenCount": prompt, "candidatesTokenCount": 1, "totalTokenCount": prompt + 1}
        if cached is not None:
            usage["cachedContentTokenCount"] = cached
        self.fake.reply(usage=usage)

    def script_call(self, name: str, arguments: dict[str, Any], then: str, *, stream: bool = False) -> None:
        self.fake.reply(calls=[{"name": name, "args": arguments}])
        self.fake.reply(then)

    @staticmethod
    def offered_tools(forwarded: Forwarded) -> list[str]:
        tools = forwarded.body.get("tools") or []
        return [
            d["name"] for tool in tools for d in tool.get("functionDeclarations", tool.get("function_declarations", []))
        ]

    @staticmethod
    def tool_answers(forwarded: Forwarded) -> list[str]:
        contents = forwarded.body["contents"]
        found = [r for c in contents for r in map(_response, c["parts"]) if r is not None]
        return [str(r["response"].get("output", json.dumps(r["response"]))) for r in found]

    @staticmethod
    def refusal() -> str:
        return overflow_message(REFUSED_PROMPT, REFUSED_LIMIT)

    def refuse_after_opening(self) -> None:
        """Gemini opens a stream with content: its refusal is the stream's first event."""
        self.fake.reply_refusal_in_stream(self.refusal())

    def refuse_after_content(self, pieces: list[str], gate: asyncio.Event) -> None:
        self.fake.reply_refusal_in_stream(self.refusal(), after_pieces=pieces, gate=gate)

    def stream_held(self, pieces: list[str], gate: asyncio.Event) -> None:
        self.fake.reply("".join(pieces), pieces=pieces, hold=(1, gate))  # the first piece, then this one

    async def read_stream(self, system: str | None, turns: Turns, seen: SeenText) -> Streamed:
        models = self.client({}).models
        body = self.body(system, turns)
        text, error, headers = "", None, {}
        stream = await models.generate_content_stream(
            model=self.model, contents=body["contents"], config=self._config(body)
        )
        try:
            async for chunk in stream:
                headers = headers or chunk.sdk_http_response.headers
                if chunk.text:
                    text += chunk.text
                    seen(text)
        except errors.APIError as exc:
            error = exc.message
        return Streamed(text, headers, error)
