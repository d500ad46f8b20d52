"""The processes bench/compaction.py runs: one ``ctxproxy serve`` per strategy (its config written
here: one tenant per window) and, inside the benchmark's own process, the upstream that records
every forwarded body, for chat completions and for Messages."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _procs
import aiohttp
import orjson
from _config import proxy_toml
from aiohttp import web

ROOT = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
TAG = "X-Bench-Req"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_config(
    directory: Path,
    strategy: str,
    upstream_port: int,
    windows: Mapping[str, int],
    log_level: str = "warning",
    memory: str = "default",
) -> Path:
    """One tenant per window (``windows``: tenant name → window), every option the strategy's
    default. ``memory``: "default" leaves ``[memory]`` to the strategy's defaults; "off" turns it off."""
    (directory / "tenants").mkdir(parents=True)
    (directory / "proxy.toml").write_text(proxy_toml(directory / "store", log_level))
    for tenant, window in windows.items():
        (directory / "tenants" / f"{tenant}.toml").write_text(
            f"default_context_window = {window}\n\n"
            f'[upstream]\nbase_url = "http://127.0.0.1:{upstream_port}/v1"\n\n'
            f'[compaction]\nstrategy = "{strategy}"\nsummarizer = "extractive"\nmode = "inline"\n'
            + ("\n[memory]\nenabled = false\n" if memory == "off" else "")
        )
    return directory


@dataclass
class Proxy:
    strategy: str
    url: str
    proc: subprocess.Popen[bytes]
    errlog: Path

    def cpu_seconds(self) -> float:
        """User + system CPU of every thread, nanosecond resolution from schedstat (clock ticks
        from /proc/PID/stat where schedstat is missing)."""
        total = 0
        try:
            for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
                try:
                    total += int((task / "schedstat").read_text().split()[0])
                except (OSError, ValueError, IndexError):
                    continue
            if total:
                return total / 1e9
        except OSError:
            pass
        stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def main_thread_seconds(self) -> float:
        """CPU of the process's main thread (the event loop's), 0 where schedstat is missing."""
        try:
            return int(Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/schedstat").read_text().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            return 0.0


def start_proxy(strategy: str, config: Path, errlog: Path) -> Proxy:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "CTXPROXY_"))}
    with errlog.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ctxproxy", "serve", "--config", str(config), "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=err,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    return Proxy(strategy, f"http://127.0.0.1:{port}", proc, errlog)


async def wait_ready(http: aiohttp.ClientSession, proxy: Proxy, timeout: float = 60.0) -> None:
    await _procs.wait_ready(http, [_as_server(proxy)], timeout)


def stop(proxy: Proxy) -> None:
    _procs.stop([_as_server(proxy)])


def _as_server(proxy: Proxy) -> _procs.Server:
    """The proxy as ``_procs`` starts, waits for and stops its servers, named by its strategy."""
    return _procs.Server(proxy.strategy, proxy.url, proxy.proc, proxy.errlog)


def compaction_events(log: Path) -> list[dict[str, Any]]:
    """The ``compaction`` events (one per checkpoint made) in a proxy's JSON log."""
    events = []
    for line in log.read_bytes().splitlines():
        if b'"compaction"' not in line:
            continue
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(event, dict) and event.get("event") == "compaction":
            events.append(event)
    return events


def _chat_answer(model: str) -> bytes:
    return orjson.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "(ignored)"}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 0, "completion_tokens": 1, "total_tokens": 1},  # 0: "not counted"
        }
    )


def _messages_answer(model: str) -> bytes:
    return orjson.dumps(
        {
            "id": "msg_bench",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": "(ignored)"}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 1},  # 0: "not counted"
        }
    )


class Upstream:
    """The model: records each forwarded body that carries a bench tag, answers a fixed completion
    (chat completions) or message (Messages) that reports no prompt count, so nothing is learned."""

    def __init__(self) -> None:
        self.bodies: dict[str, bytes] = {}
        # per tag, what answers instead of the fixed one: (protocol, body) -> answer, None: the fixed one
        self.scripts: dict[str, Callable[[str, bytes], bytes | None]] = {}
        self.runner: web.AppRunner | None = None
        self.port = 0

    def _recorder(self, protocol: str, answer: bytes) -> Any:
        async def handle(request: web.Request) -> web.Response:
            body = await request.read()
            tag = request.headers.get(TAG)
            script = self.scripts.get(tag) if tag is not None else None
            if tag is not None:
                self.bodies[tag] = body
            scripted = script(protocol, body) if script is not None else None
            return web.Response(body=scripted or answer, content_type="application/json")

        return handle

    async def start(self) -> None:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._recorder("chat", _chat_answer("bench-model")))
        app.router.add_post("/v1/messages", self._recorder("messages", _messages_answer("bench-model")))
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = self.runner.addresses[0][1]

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
