"""Fixtures for the Responses API tests: a fake Responses upstream and a proxy in front of it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest
from aiohttp.test_utils import TestServer

from tests.conftest import RIG_TENANT, ProxyTestServer, start_rig_proxy
from tests.fakes.responses_upstream import FakeResponses, start_fake_responses

MODEL = "gpt-test-responses"


@dataclass
class ResponsesRig:
    """A fake Responses upstream and the proxies started in front of it."""

    fake: FakeResponses
    server: TestServer
    root: Path
    proxies: list[ProxyTestServer]
    clients: list[Any]

    @property
    def upstream_url(self) -> str:
        return str(self.server.make_url("/v1"))

    async def proxy(self, *, window: int = 200_000, strategy: str = "none", extra: str = "", upstream: str = "",
                    proxy_toml: str = "", summarizer: str = "extractive") -> ProxyTestServer:  # fmt: skip
        """A proxy whose ``default`` tenant has ``upstream`` lines in ``[upstream]`` and ``extra`` after
        ``[compaction]``."""
        tenant = RIG_TENANT.format(upstream=self.upstream_url, upstream_extra=upstream, model=MODEL, window=window,
                               strategy=strategy, summarizer=summarizer) + extra  # fmt: skip
        return await start_rig_proxy(self.root, self.proxies, {"default": tenant}, proxy_toml)

    def client(self, proxy: ProxyTestServer, **headers: str) -> openai.AsyncOpenAI:
        made = openai.AsyncOpenAI(base_url=str(proxy.make_url("/v1")), api_key="sk-client", max_retries=0,
                                  default_headers=headers)  # fmt: skip
        self.clients.append(made)
        return made

    def sync_client(self, proxy: ProxyTestServer) -> openai.OpenAI:
        made = openai.OpenAI(base_url=str(proxy.make_url("/v1")), api_key="sk-client", max_retries=0)
        self.clients.append(made)
        return made


@pytest.fixture
async def rig(aiohttp_server: Callable[..., Awaitable[TestServer]], tmp_path: Path) -> AsyncIterator[ResponsesRig]:
    fake, server = await start_fake_responses(aiohttp_server)
    made = ResponsesRig(fake, server, tmp_path, [], [])
    yield made
    for client in made.clients:
        closed = client.close()
        if closed is not None:
            await closed
    for proxy in made.proxies:
        await proxy.close()
