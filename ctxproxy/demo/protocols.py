"""The wire protocols ``ctxproxy demo`` can speak (``--protocol``): for each, the path the demo's
client posts to (on the proxy, and on the local upstream behind it), the request body it sends
for the conversation so far, the local upstream's answer, and — against a running proxy
(``--url``) — the model to ask for and the key its SDK would send. The one place the demo knows
a protocol by name.

The local upstream answers with a usage of 0 input tokens, as a server that does not count does:
ctxproxy learns nothing from it, so every turn is counted the way a first request is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from ctxproxy.upstream.headers import BEARER, KeyHeader
from ctxproxy.wire.anthropic.completion import ANTHROPIC_VERSION, VERSION_HEADER
from ctxproxy.wire.anthropic.forward import API_KEY
from ctxproxy.wire.gemini.forward import API_KEY as GEMINI_KEY

__all__ = ["PROTOCOLS", "DemoProtocol"]

Message = dict[str, Any]
MAX_TOKENS = 256  # the Messages API requires max_tokens: a short answer's room


@dataclass(frozen=True)
class DemoProtocol:
    path: str  # under the base URL, /v1 included; ``{model}`` where the path names the model
    body: Callable[[Sequence[Message], str], dict[str, Any]]  # the client's request: conversation, model
    answer: Callable[[Mapping[str, Any]], dict[str, Any]]  # the upstream's JSON answer to a request
    model: str  # the local upstream's model
    real_model: str  # a real upstream's, for --url without --model
    key: KeyHeader  # where the client sends its own key (--url)
    key_variable: str  # the environment variable its SDK reads that key from
    headers: Mapping[str, str] = field(default_factory=dict)  # what the client sends besides the body
    upstream_path: str | None = None  # where the proxy posts it upstream, when not ``path``

    def path_for(self, model: str) -> str:
        return self.path.format(model=model)

    def client_key(self, env: Mapping[str, str]) -> dict[str, str]:
        """The client's key header, from the environment as its SDK would read it; none when unset."""
        key = env.get(self.key_variable)
        return {self.key.name: self.key.value(key)} if key else {}

    def upstream(self) -> web.Application:
        async def answer(request: web.Request) -> web.Response:
            return web.json_response(self.answer(await request.json()))

        app = web.Application()
        app.router.add_post((self.upstream_path or self.path).format(model=self.model), answer)
        return app


def _said(body: Mapping[str, Any]) -> str:
    return f"(demo upstream saw {len(body.get('messages') or [])} messages)"


def _chat_body(messages: Sequence[Message], model: str) -> dict[str, Any]:
    return {"model": model, "messages": list(messages)}


def _chat_answer(body: Mapping[str, Any]) -> dict[str, Any]:
    message = {"role": "assistant", "content": _said(body)}
    return {
        "id": "chatcmpl-demo",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "demo"),
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def _messages_body(messages: Sequence[Message], model: str) -> dict[str, Any]:
    """System messages become ``system``; the rest go as they are (the proxy checks them)."""
    system = [m.get("content") for m in messages if m.get("role") == "system"]
    body: dict[str, Any] = {"model": model, "max_tokens": MAX_TOKENS}
    if system:
        body["system"] = "\n\n".join(str(part) for part in system)
    body["messages"] = [m for m in messages if m.get("role") != "system"]
    return body


def _messages_answer(body: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": "msg_demo",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "demo"),
        "content": [{"type": "text", "text": _said(body)}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }


def _said_items(body: Mapping[str, Any]) -> str:
    items = body.get("input")
    return f"(demo upstream saw {len(items) if isinstance(items, list) else 1} input items)"


def _responses_body(messages: Sequence[Message], model: str) -> dict[str, Any]:
    """System messages become ``instructions``; the rest are input messages, the whole history
    sent each turn with ``store: false`` (how a Responses client gets its conversation compacted)."""
    system = [m.get("content") for m in messages if m.get("role") == "system"]
    body: dict[str, Any] = {"model": model, "store": False}
    if system:
        body["instructions"] = "\n\n".join(str(part) for part in system)
    body["input"] = [{"type": "message", **m} for m in messages if m.get("role") != "system"]
    return body


def _responses_answer(body: Mapping[str, Any]) -> dict[str, Any]:
    part = {"type": "output_text", "text": _said_items(body), "annotations": []}
    return {
        "id": "resp_demo",
        "object": "response",
        "created_at": 0,
        "status": "completed",
        "model": body.get("model", "demo"),
        "output": [
            {"type": "message", "id": "msg_demo", "status": "completed", "role": "assistant", "content": [part]}
        ],
        "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0},
    }


def _gemini_body(messages: Sequence[Message], model: str) -> dict[str, Any]:
    """System messages become ``systemInstruction``; the rest are ``user`` / ``model`` contents."""
    system = [str(m.get("content")) for m in messages if m.get("role") == "system"]
    body: dict[str, Any] = {}
    if system:
        body["systemInstruction"] = {"parts": [{"text": "\n\n".join(system)}]}
    body["contents"] = [
        {"role": "model" if m.get("role") == "assistant" else "user", "parts": [{"text": str(m.get("content"))}]}
        for m in messages
        if m.get("role") != "system"
    ]
    return body


def _gemini_answer(body: Mapping[str, Any]) -> dict[str, Any]:
    said = f"(demo upstream saw {len(body.get('contents') or [])} contents)"
    candidate = {"content": {"role": "model", "parts": [{"text": said}]}, "finishReason": "STOP", "index": 0}
    usage = {"promptTokenCount": 0, "candidatesTokenCount": 0, "totalTokenCount": 0}
    return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": "demo-gemini"}


PROTOCOLS: Mapping[str, DemoProtocol] = {
    "openai": DemoProtocol(
        "/v1/chat/completions", _chat_body, _chat_answer, "demo-model", "gpt-4o-mini", BEARER, "OPENAI_API_KEY"
    ),
    "anthropic": DemoProtocol(
        "/v1/messages",
        _messages_body,
        _messages_answer,
        "demo-claude",
        "claude-haiku-4-5",
        API_KEY,
        "ANTHROPIC_API_KEY",
        {VERSION_HEADER: ANTHROPIC_VERSION},
    ),
    "responses": DemoProtocol(
        "/v1/responses", _responses_body, _responses_answer, "demo-model", "gpt-4o-mini", BEARER, "OPENAI_API_KEY"
    ),
    # The proxy's Gemini upstream base URL ends in its API version, like the others' in /v1.
    "gemini": DemoProtocol(
        "/v1beta/models/{model}:generateContent",
        _gemini_body,
        _gemini_answer,
        "demo-gemini",
        "gemini-2.5-flash",
        GEMINI_KEY,
        "GEMINI_API_KEY",
        upstream_path="/v1/models/{model}:generateContent",
    ),
}
