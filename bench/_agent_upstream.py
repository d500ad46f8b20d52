"""A fake model upstream for the agent CLIs (Claude Code, Codex), served on loopback by the caller.

It speaks Anthropic's Messages API and OpenAI's Responses API, streaming included, with the answers
of ``bench/_agent_replies.py``, and records every request exactly as it came (method, path and
query, headers, body bytes), labelled with the client and scenario being run. Routes:

* ``HEAD`` / ``GET`` of ``/`` or ``/t/{tenant}``: 200, empty (the base-URL probe Claude Code sends);
* ``POST …/messages`` (a query such as ``?beta=true`` allowed): a Message, JSON or events;
* ``POST …/messages/count_tokens``: ``{"input_tokens": bytes / 4}``;
* ``POST …/responses``: a Response, JSON or events;
* anything else (a WebSocket upgrade, ``/responses/compact``, ``/models``): 404 with an error body of
  the path's protocol, recorded like the rest, so a capture shows what the CLI tried and how it
  coped with a refusal.

``write_fixture`` turns a recorded request into a fixture of ``tests/fixtures/agents/`` with no
credential in it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _agent_replies import (
    message_events,
    message_object,
    messages_said,
    response_events,
    response_object,
    responses_said,
    sse,
)
from aiohttp import web

# Headers a fixture never keeps: credentials, and what the replaying client sets itself.
SECRET_HEADERS = frozenset({"x-api-key", "authorization", "cookie", "proxy-authorization", "chatgpt-account-id"})
TRANSPORT_HEADERS = frozenset({"host", "content-length", "transfer-encoding"})
PLACEHOLDER_KEY = "sk-fixture-placeholder"
_PROBE = re.compile(r"^/(t/[^/]+/?)?$")


@dataclass
class Captured:
    """One request as the fake received it, with the client and scenario it was recorded under."""

    client: str
    scenario: str
    method: str
    path: str  # with the query string
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)

    def payload(self) -> dict[str, Any]:
        try:
            data = json.loads(self.body)
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}


@dataclass
class AgentUpstream:
    """The fake: serve :meth:`make_app`; set :attr:`label` to (client, scenario) before each run."""

    label: tuple[str, str] = ("", "")
    requests: list[Captured] = field(default_factory=list)

    def make_app(self) -> web.Application:
        app = web.Application(client_max_size=1 << 30)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        return app

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        captured = Captured(*self.label, request.method, request.path_qs, list(request.headers.items()), body)
        self.requests.append(captured)
        number = len(self.requests)
        path, payload = request.path.rstrip("/"), captured.payload()
        if request.method in ("HEAD", "GET") and _PROBE.match(request.path) and not request.headers.get("upgrade"):
            return web.Response(status=200)
        if request.method == "POST" and path.endswith("/messages/count_tokens"):
            return web.json_response({"input_tokens": len(body) // 4})
        if request.method == "POST" and path.endswith("/messages"):
            return await self._messages(request, payload, number)
        if request.method == "POST" and path.endswith("/responses"):
            return await self._responses(request, payload, number)
        if "/responses" in path or "/models" in path:
            error = {"message": f"fake upstream: no {request.method} {path}", "type": "invalid_request_error"}
            return web.json_response({"error": error}, status=404)
        error = {"type": "not_found_error", "message": f"fake upstream: no {request.method} {path}"}
        return web.json_response({"type": "error", "error": error}, status=404)

    async def _messages(self, request: web.Request, payload: dict[str, Any], number: int) -> web.StreamResponse:
        said, model = messages_said(payload, number), str(payload.get("model", ""))
        if payload.get("stream") is True:
            return await _stream(request, sse(message_events(said, model, number)))
        return web.json_response(message_object(said, model, number), headers={"request-id": f"req_fake{number}"})

    async def _responses(self, request: web.Request, payload: dict[str, Any], number: int) -> web.StreamResponse:
        said, model = responses_said(payload, number), str(payload.get("model", ""))
        if payload.get("stream") is True:
            return await _stream(request, sse(response_events(said, model, number)))
        return web.json_response(response_object(said, model, number), headers={"x-request-id": f"req_fake{number}"})


async def _stream(request: web.Request, data: bytes) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    for event in data.split(b"\n\n")[:-1]:
        await response.write(event + b"\n\n")
    await response.write_eof()
    return response


def fixture_of(captured: Captured, keys: tuple[str, ...]) -> dict[str, Any]:
    """``captured`` as a fixture: no credential header, each of ``keys`` replaced by a placeholder in
    the body text (``raw``, the body exactly as sent otherwise)."""
    raw = captured.body.decode()
    for key in keys:
        raw = raw.replace(key, PLACEHOLDER_KEY)
    dropped = SECRET_HEADERS | TRANSPORT_HEADERS
    headers = {k.lower(): v for k, v in captured.headers if k.lower() not in dropped}
    return {"client": captured.client, "scenario": captured.scenario, "method": captured.method,
            "path": captured.path, "headers": headers, "raw": raw}  # fmt: skip


def write_fixture(captured: Captured, directory: Path, index: int, keys: tuple[str, ...]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{captured.scenario}-{index:02d}.json"
    target.write_text(json.dumps(fixture_of(captured, keys), indent=1, ensure_ascii=False) + "\n")
    return target
