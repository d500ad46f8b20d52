"""A tiny app whose chat handler is ``forward_with_tools``, in front of the real fake upstream.

The handler offers both proxy tools, answers them with a recording executor and turns an
``Overflow`` into a 599 marker response, so tests can see it was returned and nothing else sent.
A ``ProxyError`` the loop raises is rendered as the real app renders it on its path (``path_error_response``).
The tool loop needs no ctxproxy app, so these fixtures do not build one: ``upstream`` here is the
same fake as the suite-wide fixture, without importing the app (these tests run on their own with
``--confcutdir tests/tools``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from ctxproxy.config.models import TenantConfig, ToolsConfig, UpstreamConfig
from ctxproxy.errors import ProxyError
from ctxproxy.server.render import path_error_response
from ctxproxy.session import message_digest
from ctxproxy.strategies.base import Window
from ctxproxy.tokens import TokenCounter
from ctxproxy.tools.budget import Budget, Counting
from ctxproxy.tools.definitions import RECALL_PAGE, SEARCH_MEMORY, offer_tools
from ctxproxy.tools.loop import forward_with_tools
from ctxproxy.upstream.client import UpstreamHttp, open_session
from ctxproxy.upstream.overflow import Overflow
from tests.fakes.upstream import FakeUpstream, start_fake_upstream

OVERFLOW_MARKER = 599
RECALL_ANSWER = "Page 3 (archived): the launch code is 4711."


@dataclass
class Upstream:
    fake: FakeUpstream
    server: TestServer

    @property
    def base_url(self) -> str:
        return str(self.server.make_url("/v1"))


@pytest.fixture
async def upstream(aiohttp_server: Callable[..., Awaitable[TestServer]]) -> Upstream:
    fake, server = await start_fake_upstream(aiohttp_server)
    return Upstream(fake, server)


@dataclass
class Executed:
    name: str
    arguments: Mapping[str, Any] | None
    raw: str
    limit: int = 0  # the tokens the loop allowed for the answer


@dataclass
class LoopProxy:
    server: TestServer
    executed: list[Executed] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return str(self.server.make_url("/v1"))

    def url(self, path: str = "/v1/chat/completions") -> str:
        return str(self.server.make_url(path))


MakeLoopProxy = Callable[..., Awaitable[LoopProxy]]


@pytest.fixture
def make_loop_proxy(aiohttp_server: Callable[..., Awaitable[TestServer]], upstream: Upstream) -> MakeLoopProxy:
    async def factory(
        max_rounds: int = 3,
        available: Sequence[str] = (RECALL_PAGE, SEARCH_MEMORY),
        answer: Callable[[Executed], Awaitable[str]] | None = None,
        window: int = 128_000,
        result_max_tokens: int = 4000,
        read_timeout: float = 10,
    ) -> LoopProxy:
        """``window``: the model's context window the loop keeps each round inside."""
        tenant = TenantConfig(
            name="t",
            upstream=UpstreamConfig(base_url=upstream.base_url, read_timeout=read_timeout),
            tools=ToolsConfig(max_rounds=max_rounds, result_max_tokens=result_max_tokens),
        )
        http_key = web.AppKey("http", UpstreamHttp)
        executed: list[Executed] = []
        counter = TokenCounter()
        counting = Counting(
            count_message=lambda m: counter.count_message(m, message_digest(m)),
            clip=lambda text, limit: counter.clip_text(text, limit),
        )

        async def execute(name: str, arguments: Mapping[str, Any] | None, raw: str, limit: int) -> str:
            call = Executed(name, arguments, raw, limit)
            executed.append(call)
            return await answer(call) if answer is not None else RECALL_ANSWER

        async def chat(request: web.Request) -> web.StreamResponse:
            body = await request.json()
            tools = offer_tools(body, available)
            assert tools is not None, "these tests always offer the proxy tools"
            messages = body["messages"]
            digests = [message_digest(m) for m in messages]
            prompt = counter.count_messages(messages, digests) + counter.count_tools(
                [*body.get("tools", []), *tools.definitions]
            )
            try:
                result = await forward_with_tools(
                    request,
                    request.app[http_key],
                    tenant,
                    body,
                    body.get("stream") is True,
                    {"X-Ctx-Test": "loop"},
                    tools,
                    execute,
                    Budget.for_window(Window(window, body.get("max_tokens") or 0), prompt),
                    counting,
                )
            except ProxyError as exc:
                return path_error_response(exc, request.raw_path)
            if isinstance(result, Overflow):
                return web.json_response({"overflow": True}, status=OVERFLOW_MARKER)
            return result

        async def session(app: web.Application) -> AsyncIterator[None]:
            app[http_key] = http = await open_session()
            try:
                yield
            finally:
                await http.close()

        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        app.cleanup_ctx.append(session)
        proxy = LoopProxy(await aiohttp_server(app))
        proxy.executed = executed
        return proxy

    return factory


@pytest.fixture
async def loop_proxy(make_loop_proxy: MakeLoopProxy) -> LoopProxy:
    return await make_loop_proxy()
