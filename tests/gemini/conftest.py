"""Fixtures for the Gemini tests: a fake Gemini upstream and proxies in front of it, and the real
``google-genai`` SDK pointed at a proxy by its base URL alone."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer
from google import genai

from tests.conftest import RIG_TENANT, ProxyTestServer, start_rig_proxy
from tests.fakes.gemini_upstream import FakeGemini, start_fake_gemini

MODEL = "gemini-test-flash"
TENANT_KEY = "tenant-gemini-key"
CLIENT_KEY = "client-gemini-key"


@dataclass
class GeminiRig:
    """A fake Gemini upstream and the proxies started in front of it."""

    fake: FakeGemini
    server: TestServer
    root: Path
    proxies: list[ProxyTestServer]

    @property
    def upstream_url(self) -> str:
        return str(self.server.make_url("/v1beta"))

    async def proxy(self, *, window: int = 200_000, strategy: str = "none", extra: str = "",
                    upstream: str = f'api_key = "{TENANT_KEY}"', summarizer: str = "extractive",
                    tenants: dict[str, str] | None = None) -> ProxyTestServer:  # fmt: skip
        tenant = RIG_TENANT.format(upstream=self.upstream_url, upstream_extra=upstream, model=MODEL, window=window,
                               strategy=strategy, summarizer=summarizer) + extra  # fmt: skip
        return await start_rig_proxy(self.root, self.proxies, {"default": tenant, **(tenants or {})})

    @staticmethod
    def client(proxy: ProxyTestServer, path: str = "", **headers: str) -> Any:
        """The SDK's async client, its base URL the proxy's (``path``: a tenant's ``/t/<name>``)."""
        options = {"base_url": str(proxy.make_url(path)), "headers": headers}
        return genai.Client(api_key=CLIENT_KEY, http_options=options).aio


@pytest.fixture
async def rig(aiohttp_server: Callable[..., Awaitable[TestServer]], tmp_path: Path) -> AsyncIterator[GeminiRig]:
    fake, server = await start_fake_gemini(aiohttp_server)
    made = GeminiRig(fake, server, tmp_path, [])
    yield made
    for proxy in made.proxies:
        await proxy.close()
