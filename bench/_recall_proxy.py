"""The prompt-side half of bench/recall.py: every question through a real ctxproxy.

For each conversation, a ctxproxy app (tenant: ``paged``, extractive summaries, memory on) is
served on loopback in front of an in-process upstream that records what it receives and answers
a fixed completion. Each question is sent as the newest user message after the whole history;
the first request archives all but the newest pages, the others reuse that checkpoint. For each
question we read what was forwarded — raw pages, the Contents Page, injected memories — and
check whether each evidence turn's text is in it, without any tool call; and we compare
``X-Ctx-Tokens-After`` with ``X-Ctx-Tokens-Before`` (the full history).
"""

from __future__ import annotations

import tempfile
import textwrap
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from bench._config import proxy_toml
from ctxproxy.config import ConfigHolder
from ctxproxy.logs import configure_logging
from ctxproxy.server.app import create_app

COMPLETION = orjson.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
)
TENANT = """
[upstream]
base_url = "{upstream}"
api_key = "bench"
[compaction]
strategy = "paged"
summarizer = "extractive"
[memory]
enabled = true
inject_top_k = {top_k}
inject_max_tokens = {max_tokens}
[tools]
enabled = true
[models."*"]
context_window = {window}
"""


@dataclass(frozen=True)
class Question:
    text: str
    evidence: tuple[str, ...]  # the evidence turns' texts


@dataclass(frozen=True)
class Dialogue:
    messages: Sequence[dict[str, Any]]  # system message first, history only
    questions: Sequence[Question]


@dataclass
class PromptMetrics:
    questions: int = 0
    evidence_share: float = 0.0  # mean over questions of the share of evidence turns in the prompt
    all_evidence: int = 0  # questions whose every evidence turn is in the prompt
    tokens_fraction: float = 0.0  # mean forwarded tokens / full-history tokens
    ms_per_request: float = 0.0


def _flat(text: str) -> str:
    return " ".join(text.split()).lower()


class _Upstream:
    def __init__(self) -> None:
        self.last: bytes = b""

    async def chat(self, request: web.Request) -> web.Response:
        self.last = await request.read()
        return web.Response(body=COMPLETION, content_type="application/json")


async def _serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


@dataclass(frozen=True)
class Injection:
    """The tenant's ``[memory]`` injection settings for the run (the defaults: the config's)."""

    top_k: int = 5
    max_tokens: int = 800


async def prompt_metrics(
    dialogues: Sequence[Dialogue], window: int, injection: Injection = Injection()
) -> PromptMetrics:
    configure_logging("console", "warning")  # a line per request would drown the table
    metrics = PromptMetrics()
    shares: list[float] = []
    fractions: list[float] = []
    elapsed = 0.0
    upstream = _Upstream()
    up_app = web.Application(client_max_size=1 << 30)
    up_app.router.add_post("/v1/chat/completions", upstream.chat)
    up_runner, up_url = await _serve(up_app)
    try:
        async with aiohttp.ClientSession() as http:
            for n, dialogue in enumerate(dialogues):
                with tempfile.TemporaryDirectory() as tmp:
                    root = Path(tmp)
                    (root / "tenants").mkdir()
                    (root / "proxy.toml").write_text(proxy_toml(root / "data", "warning"))
                    tenant = TENANT.replace("{upstream}", up_url + "/v1").replace("{window}", str(window))
                    tenant = tenant.replace("{top_k}", str(injection.top_k))
                    tenant = tenant.replace("{max_tokens}", str(injection.max_tokens))
                    (root / "tenants" / "default.toml").write_text(textwrap.dedent(tenant))
                    runner, url = await _serve(create_app(ConfigHolder.load(root, {})))
                    try:
                        for question in dialogue.questions:
                            body = {
                                "model": "gpt-4o-mini",
                                "messages": [*dialogue.messages, {"role": "user", "content": question.text}],
                                "user": f"locomo-{n}",
                            }
                            started = time.perf_counter()
                            async with http.post(url + "/v1/chat/completions", data=orjson.dumps(body)) as resp:
                                await resp.read()
                                before = int(resp.headers["X-Ctx-Tokens-Before"])
                                after = int(resp.headers["X-Ctx-Tokens-After"])
                            elapsed += time.perf_counter() - started
                            sent = orjson.loads(upstream.last)["messages"]
                            prompt = _flat("\n".join(str(m.get("content") or "") for m in sent))
                            found = [_flat(text) in prompt for text in question.evidence]
                            shares.append(sum(found) / len(found))
                            metrics.all_evidence += all(found)
                            fractions.append(after / before)
                    finally:
                        await runner.cleanup()
    finally:
        await up_runner.cleanup()
    metrics.questions = len(shares)
    if shares:
        metrics.evidence_share = sum(shares) / len(shares)
        metrics.tokens_fraction = sum(fractions) / len(fractions)
        metrics.ms_per_request = elapsed * 1000 / len(shares)
    return metrics
