"""The agent session replayed through one in-process ctxproxy, one tenant per tool-output
setting, both protocols; what the upstream received, measured (``_prompt_cost``)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _agent
import aiohttp
import orjson
from _compaction_servers import TAG, Upstream
from _config import proxy_toml
from _prompt_cost import CacheMeter, ChatShape, MessagesShape, Shape, Units
from aiohttp import web

from ctxproxy.config import ConfigHolder
from ctxproxy.server.app import create_app
from ctxproxy.wire.anthropic.convert import to_messages

MODEL = "bench-model"
HEADER = "X-Ctx-Tool-Outputs"


@dataclass
class SessionResult:
    protocol: str
    setting: str
    meter: CacheMeter = field(default_factory=CacheMeter)
    broken: int = 0
    last_header: str | None = None


def setting_name(keep: int, min_tokens: int) -> str:
    return f"keep {keep}, min {min_tokens}"


def tenant_name(setting: str) -> str:
    return "off" if setting == "off" else "k" + "m".join(part.split()[1] for part in setting.split(", "))


def tenant(upstream: int, setting: str) -> str:
    enabled, keep, least = "false", 8, 1000
    if setting != "off":
        enabled, (keep, least) = "true", (int(part.split()[1]) for part in setting.split(", "))
    return textwrap.dedent(
        f"""\
        default_context_window = 1000000
        [upstream]
        base_url = "http://127.0.0.1:{upstream}/v1"
        [compaction]
        strategy = "none"
        [compaction.tool_outputs]
        enabled = {enabled}
        keep_turns = {keep}
        min_tokens = {least}
        """
    )


def broken_pairs(messages: Sequence[dict[str, Any]]) -> int:
    """Tool results without their call right before, and calls left unanswered (canonical messages)."""
    broken, open_calls = 0, set()
    for message in messages:
        if message.get("role") == "tool":
            if message.get("tool_call_id") not in open_calls:
                broken += 1
            open_calls.discard(message.get("tool_call_id"))
            continue
        if message.get("role") == "user" and not open_calls:
            continue
        broken += len(open_calls)
        open_calls = {c["id"] for c in message.get("tool_calls") or []}
    return broken + len(open_calls)


def _requests(session: _agent.Session) -> list[_agent.Session]:
    """The session as the client sends it: at every user message and after every batch of results."""
    steps = session.steps
    return [_agent.Session(steps[: i + 1], session.commands) for i, s in enumerate(steps) if s.role != "assistant"]


def _body(protocol: str, session: _agent.Session) -> bytes:
    if protocol == "chat":
        return orjson.dumps({"model": MODEL, "messages": _agent.chat_messages(session), "tools": _agent.chat_tools()})
    body = {
        "model": MODEL,
        "max_tokens": 1000,
        "system": _agent.messages_system(),
        "messages": _agent.messages_messages(session),
        "tools": _agent.messages_tools(),
    }
    return orjson.dumps(body)


async def _one(
    http: aiohttp.ClientSession, base: str, shape: Shape, upstream: Upstream, session: _agent.Session, setting: str
) -> SessionResult:
    result = SessionResult(shape.name, setting)
    for n, sent in enumerate(_requests(session)):
        tag = f"{shape.name}:{setting}:{n}"
        url = f"{base}/t/{tenant_name(setting)}{shape.path}"
        async with http.post(url, data=_body(shape.name, sent), headers={**shape.headers, TAG: tag}) as resp:
            if resp.status != 200:
                raise RuntimeError(f"{tag}: {resp.status} {(await resp.text())[:300]}")
            result.last_header = resp.headers.get(HEADER)
        body = orjson.loads(upstream.bodies.pop(tag))
        result.meter.add(shape.units(body)[0])
        messages = body["messages"] if shape.name == "chat" else to_messages(body)
        result.broken += broken_pairs(messages)
    return result


async def replay_session(
    session: _agent.Session, keeps: Sequence[int], least: Sequence[int], tmp: Path
) -> list[SessionResult]:
    """Replay ``session`` with tool outputs off, and on with each ``keep_turns`` × ``min_tokens``."""
    upstream = Upstream()
    await upstream.start()
    settings = ["off", *(setting_name(k, m) for k in keeps for m in least)]
    config = tmp / "config"
    (config / "tenants").mkdir(parents=True)
    (config / "proxy.toml").write_text(proxy_toml(tmp / "store", "warning"))
    for setting in settings:
        (config / "tenants" / f"{tenant_name(setting)}.toml").write_text(tenant(upstream.port, setting))
    runner = web.AppRunner(create_app(ConfigHolder.load(config, {})), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    base = f"http://127.0.0.1:{runner.addresses[0][1]}"
    units = Units(MODEL)
    try:
        async with aiohttp.ClientSession() as http:
            return [
                await _one(http, base, shape, upstream, session, setting)
                for shape in (ChatShape(units), MessagesShape(units))
                for setting in settings
            ]
    finally:
        await runner.cleanup()
        await upstream.stop()
