"""``ctxproxy demo``: watch compaction happen, offline, with no API key.

Starts a built-in local upstream and a ctxproxy on loopback ports, then plays a client that
resends its whole history every turn — a generated conversation, or one read from a JSON file
(a list of ``{"role", "content"}`` messages; the file's assistant messages are used as the
history, the upstream's answers are ignored). Every turn prints how many tokens the full
history has and how many ctxproxy actually forwarded. ``--protocol`` picks the API the client and
the local upstream speak (``protocols``: OpenAI chat completions, Anthropic Messages, OpenAI Responses or Gemini).

With ``--url`` the same client plays against a running ``ctxproxy serve`` instead (``run_against``):
no local upstream, no proxy of its own; the running proxy's tenant and upstream answer, and its
inspector shows the conversation.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from ctxproxy.config import ConfigError, ConfigHolder
from ctxproxy.demo.options import DemoOptions
from ctxproxy.demo.protocols import PROTOCOLS, DemoProtocol
from ctxproxy.logs import configure_logging
from ctxproxy.pipeline.as_sent import AS_SENT_HEADER
from ctxproxy.server.app import create_app
from ctxproxy.server.protocol import ProxyAppRunner
from ctxproxy.strategies.registry import builtin_registry
from ctxproxy.strategies.traits import traits_of

_TOPICS = (
    ("Lisbon", "the flight lands at 9:40 on May 3", "budget is 1,800 euros"),
    ("the tram", "line 28 runs every 12 minutes", "must avoid the 17:00 rush"),
    ("Sintra", "the palace opens at 9:30", "we decided to go on a weekday"),
    ("dinner", "Maria is vegetarian", "booked Taberna for 20:00 on May 4"),
    ("the museum", "tickets cost 15 euros", "need to buy them online by May 1"),
    ("Porto", "the train takes 2 hours 50 minutes", "let's take the 8:09 Alfa Pendular"),
    ("the hotel", "check-in is from 15:00", "the room must have a balcony"),
    ("souvenirs", "the tile shop closes at 19:00", "remember to bring cash"),
)


def generated_conversation(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a concise travel planner."}]
    for i in range(turns):
        topic, fact, detail = _TOPICS[i % len(_TOPICS)]
        messages.append(
            {"role": "user", "content": f"About {topic}: {fact}. Also, {detail}. What do you suggest? (turn {i + 1})"}
        )
        messages.append(
            {
                "role": "assistant",
                "content": f"Noted for {topic}: {fact}, and {detail}. I suggest planning {topic} early in the day, "
                f"keeping a buffer of 30 minutes, and checking the schedule the evening before. " * 5,
            }
        )
    return messages


def _write_config(root: Path, upstream: str, strategy: str, window: int) -> None:
    (root / "tenants").mkdir(parents=True)
    (root / "proxy.toml").write_text(f'[server]\nlog_level = "warning"\n[store]\npath = "{root / "data"}"\n')
    (root / "tenants" / "default.toml").write_text(
        f"default_context_window = {window}\n"
        f'[upstream]\nbase_url = "{upstream}"\n'
        f'[compaction]\nstrategy = "{strategy}"\nsummarizer = "extractive"\n'
        f"summary_max_tokens = {max(64, window // 8)}\n"
        + _strategy_table(strategy, window)
        # Compaction alone: memory's search tool and injected memories would blur what it saves.
        + "[memory]\nenabled = false\n"
    )


def _strategy_table(strategy: str, window: int) -> str:
    # The note defaults assume 128k-token windows; scale the token budgets to the demo window.
    if strategy == "cut_point":
        return f"[compaction.cut_point]\nreserve_tokens = {window // 4}\nkeep_recent_tokens = {window // 3}\n"
    if strategy == "rolling_summary":
        summary = max(64, window // 8)
        return f"[compaction.rolling_summary]\nheadroom_min_tokens = {window // 16}\nsummary_max_tokens = {summary}\n"
    if strategy == "sliding_window":
        return "[compaction.sliding_window]\ncontext_size = 30\ntail_keep_size = 12\ncompression_window_size = 6\n"
    return ""


def _user_turns(messages: Sequence[dict[str, Any]]) -> list[int]:
    return [i for i, m in enumerate(messages) if m.get("role") == "user"]


@dataclass(frozen=True)
class Target:
    """Where the demo's client sends its turns, and how it labels what it sees."""

    url: str  # the proxy's base URL, without /v1 (``http://127.0.0.1:8080`` or ``…/t/acme``)
    model: str
    headers: Mapping[str, str]  # besides the protocol's own: the client's key, when it has one
    event: str  # what a compacted row says happened
    into: str  # and what the messages became


async def run_demo(
    conversation: list[dict[str, Any]], strategy: str, window: int, out: Any, protocol: str = "openai"
) -> list[dict[str, int]]:
    """The demo offline: a local upstream and a ctxproxy on loopback ports, then the client."""
    wire = PROTOCOLS[protocol]
    up_runner = web.AppRunner(wire.upstream(), access_log=None)
    await up_runner.setup()
    await web.TCPSite(up_runner, "127.0.0.1", 0).start()
    with tempfile.TemporaryDirectory(prefix="ctxproxy-demo-") as tmp:
        _write_config(Path(tmp), f"http://127.0.0.1:{up_runner.addresses[0][1]}/v1", strategy, window)
        holder = ConfigHolder.load(tmp, {})
        compaction = holder.current.tenants["default"].compaction
        into = "the Contents Page" if compaction.options[compaction.strategy].archives_pages else "summary"
        runner = ProxyAppRunner(create_app(holder))
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        target = Target(f"http://127.0.0.1:{runner.addresses[0][1]}", wire.model, {}, _event_label(strategy), into)
        print(f"strategy {strategy}, model window {window} tokens, extractive summariser, {protocol} API\n", file=out)
        try:
            return await play(conversation, target, wire, out)
        finally:
            await runner.cleanup()
            await up_runner.cleanup()


async def run_against(
    conversation: list[dict[str, Any]], url: str, model: str | None, out: Any, protocol: str, env: Mapping[str, str]
) -> list[dict[str, int]]:
    """The demo against a running ``ctxproxy serve`` at ``url``: its tenant's config decides the
    strategy, the window and the upstream, so every turn is a real model call. The client's key
    is the one its SDK would read from the environment (``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY`` /
    ``GEMINI_API_KEY``),
    for a proxy that passes the client's key through."""
    wire = PROTOCOLS[protocol]
    model = model or wire.real_model
    target = Target(url.rstrip("/"), model, wire.client_key(env), "compacted", "summary")
    print(f"ctxproxy at {target.url}, model {model}, {protocol} API: its tenant's config decides the rest\n", file=out)
    rows = await play(conversation, target, wire, out)
    print(f"the inspector shows the session: {target.url.split('/t/')[0]}/admin/ui/ ([admin] api_key)", file=out)
    return rows


async def play(
    conversation: list[dict[str, Any]], target: Target, wire: DemoProtocol, out: Any
) -> list[dict[str, int]]:
    """The client: resend the conversation so far each turn, print what the proxy forwarded."""
    rows: list[dict[str, int]] = []
    print(f"{'turn':>4} {'messages':>8} {'full':>7} {'sent':>7} {'saved':>6}  event", file=out)
    async with aiohttp.ClientSession() as http:
        for turn, last in enumerate(_user_turns(conversation), start=1):
            row = await _play_turn(http, target, wire, conversation[: last + 1], turn)
            rows.append(row)
            _print_row(row, target.event, target.into, out)
    full, sent = sum(r["full"] for r in rows), sum(r["sent"] for r in rows)
    print(f"\ntotal prompt tokens: full history {full}, forwarded {sent} ({100 * sent / max(full, 1):.0f}%)", file=out)
    return rows


async def _play_turn(
    http: aiohttp.ClientSession, target: Target, wire: DemoProtocol, history: list[dict[str, Any]], turn: int
) -> dict[str, int]:
    """Send the conversation so far; the proxy's counts from its answer's headers."""
    headers = {**wire.headers, **target.headers}
    async with http.post(
        target.url + wire.path_for(target.model), json=wire.body(history, target.model), headers=headers
    ) as resp:
        if resp.status != 200:
            raise ValueError(f"turn {turn}: the proxy answered {resp.status}: {_error_message(await resp.read())}")
        as_sent = resp.headers.get(AS_SENT_HEADER)
        if as_sent is not None:
            raise ValueError(
                f"turn {turn}: ctxproxy cannot compact this conversation (it does not model `{as_sent}`), so it "
                "forwarded it as sent; the demo replays conversations of user, assistant and system messages"
            )
        return {
            "turn": turn,
            "messages": len(history),
            "full": int(resp.headers["X-Ctx-Tokens-Before"]),
            "sent": int(resp.headers["X-Ctx-Tokens-After"]),
            "summarized": int(resp.headers.get("X-Ctx-Summarized", 0)),
            "compacted": int(resp.headers.get("X-Ctx-Compacted", 0)),
        }


def _error_message(body: bytes) -> str:
    """The message of an error in any protocol's shape (``{"error": {"message": …}}``)."""
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        error = None
    message = error.get("message") if isinstance(error, dict) else None
    return str(message) if message else body[:200].decode(errors="replace")


def _event_label(strategy: str) -> str:
    """A strategy that compacts only to fit never summarises by itself: what compacts its prompt
    is the pre-flight emergency cut, made because the prompt no longer fit the window."""
    if traits_of(builtin_registry()[strategy]).compacts_only_to_fit:
        return "pre-flight emergency cut (the prompt did not fit)"
    return "compacted"


def _print_row(row: dict[str, int], label: str, into: str, out: Any) -> None:
    event = f"{label}: first {row['summarized']} messages → {into}" if row["compacted"] else ""
    saved = 100 * (1 - row["sent"] / row["full"])
    line = f"{row['turn']:>4} {row['messages']:>8} {row['full']:>7} {row['sent']:>7} {saved:>5.0f}%  {event}"
    print(line, file=out)


def load_conversation(path: str) -> list[dict[str, Any]]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, list) or not all(isinstance(m, dict) and "role" in m for m in data):
        raise ValueError(f"{path}: expected a JSON list of {{role, content}} messages")
    return data


def main(options: DemoOptions, out: Any) -> int:
    configure_logging("console", "warning")
    try:
        conversation = (
            load_conversation(options.conversation) if options.conversation else generated_conversation(options.turns)
        )
        if options.url is None:
            asyncio.run(run_demo(conversation, options.strategy, options.window, out, options.protocol))
        else:
            asyncio.run(run_against(conversation, options.url, options.model, out, options.protocol, os.environ))
    except (ValueError, OSError, ConfigError, aiohttp.ClientError) as exc:
        print(f"ctxproxy demo: {exc}", file=sys.stderr)
        return 2
    return 0
