"""Shared fixtures: a fake upstream on loopback and a real ctxproxy app in front of it.

``proxy`` is the ctxproxy aiohttp app served on a loopback port by ``ProxyAppRunner``, as
``ctxproxy serve`` runs it (the same connection handling, timeouts and handler cancellation); its
config directory is written by the test (``make_proxy``) and its store is a real diskcache
directory under ``tmp_path``.
"""

from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from aiohttp.web_runner import BaseRunner

from ctxproxy.config import ConfigHolder
from ctxproxy.server.app import create_app
from ctxproxy.server.protocol import ProxyAppRunner
from ctxproxy.services import TASKS
from ctxproxy.upstream.client import UpstreamHttp, open_session
from tests.fakes.upstream import FakeUpstream, start_fake_upstream


@dataclass
class Upstream:
    fake: FakeUpstream
    server: TestServer

    @property
    def base_url(self) -> str:
        return str(self.server.make_url("/v1"))


@dataclass
class Proxy:
    server: TestServer
    holder: ConfigHolder
    config_dir: Path

    def url(self, path: str = "") -> str:
        return str(self.server.make_url(path))

    @property
    def base_url(self) -> str:
        return self.url("/v1")

    async def settle(self) -> None:
        """Let the work a request left in the background (compactions, memories) end."""
        await self.server.app[TASKS].drain(5)


def write_config(root: Path, tenants: Mapping[str, str], proxy_toml: str = "") -> Path:
    (root / "tenants").mkdir(parents=True, exist_ok=True)
    (root / "proxy.toml").write_text(textwrap.dedent(proxy_toml))
    for name, text in tenants.items():
        (root / "tenants" / f"{name}.toml").write_text(textwrap.dedent(text))
    return root


def store_toml(data_dir: Path, extra: str = "") -> str:
    return f'[store]\npath = "{data_dir}"\n' + textwrap.dedent(extra)


RIG_TENANT = """
[upstream]
base_url = "{upstream}"
{upstream_extra}
[models."{model}"]
context_window = {window}
[compaction]
strategy = "{strategy}"
summarizer = "{summarizer}"
summary_max_tokens = 200
"""  # a protocol rig's tenant: its fake upstream, one model's window, a strategy and summariser


async def start_rig_proxy(
    root: Path, proxies: list[ProxyTestServer], tenants: Mapping[str, str], proxy_toml: str = ""
) -> ProxyTestServer:
    """A proxy on ``tenants`` (name → TOML) with its own config directory under ``root`` and the
    rig's one store, started and added to ``proxies`` (which the rig closes)."""
    config = write_config(root / f"config{len(proxies)}", tenants, store_toml(root / "data", proxy_toml))
    server = ProxyTestServer(create_app(ConfigHolder.load(config, {})))
    proxies.append(server)
    await server.start_server()
    return server


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    """A client session for tests that call a server themselves."""
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
async def upstream_http() -> AsyncIterator[UpstreamHttp]:
    """ctxproxy's own HTTP to upstreams (its pool), for tests that call the port or its callers."""
    opened = await open_session()
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def upstream(aiohttp_server: Callable[..., Awaitable[TestServer]]) -> Upstream:
    fake, server = await start_fake_upstream(aiohttp_server)
    return Upstream(fake, server)


MakeProxy = Callable[..., Awaitable[Proxy]]


class ProxyTestServer(TestServer):
    """aiohttp's TestServer on ``ProxyAppRunner``: the connections ``ctxproxy serve`` makes."""

    async def _make_runner(self, **kwargs: Any) -> BaseRunner:
        return ProxyAppRunner(self.app, **kwargs)


@pytest.fixture
async def make_proxy(tmp_path: Path, upstream: Upstream) -> AsyncIterator[MakeProxy]:
    """Start a proxy. ``tenants`` maps tenant name → TOML text; by default one ``default``
    tenant pointing at the fake upstream. ``{upstream}`` in tenant text is replaced by the
    fake's base URL."""

    async def factory(
        tenants: Mapping[str, str] | None = None,
        proxy_toml: str = "",
        env: Mapping[str, str] | None = None,
    ) -> Proxy:
        tenants = tenants if tenants is not None else {"default": '[upstream]\nbase_url = "{upstream}"\n'}
        rendered = {name: text.replace("{upstream}", upstream.base_url) for name, text in tenants.items()}
        config_dir = write_config(tmp_path / "config", rendered, store_toml(tmp_path / "data", proxy_toml))
        holder = ConfigHolder.load(config_dir, env or {})
        server = ProxyTestServer(create_app(holder))
        servers.append(server)
        await server.start_server()
        return Proxy(server, holder, config_dir)

    servers: list[ProxyTestServer] = []
    yield factory
    for server in servers:
        await server.close()


@pytest.fixture
async def proxy(make_proxy: MakeProxy) -> Proxy:
    return await make_proxy()
