"""Fixtures for Anthropic's Messages API through ctxproxy: a fake of api.anthropic.com that
validates like the real one (``claude``), and proxies in front of it (``make_proxy``) that the
real ``anthropic`` SDK reaches by base URL only."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import anthropic
import pytest
from aiohttp.test_utils import TestServer

from tests.conftest import ProxyTestServer, start_rig_proxy
from tests.fakes.anthropic_upstream import FakeAnthropic, start_fake_anthropic

MODEL = "claude-test-1"
CLIENT_KEY = "sk-ant-client"
ADMIN_KEY = "admin-secret"
TENANT = """
[upstream]
base_url = "{base}"
{key}
[models."claude-test-*"]
context_window = {window}
[compaction]
strategy = "{strategy}"
summarizer = "extractive"
"""
SENTENCES = (
    "We agreed to fly to Lisbon on the ninth and to rent a small car at the airport.",
    "The budget for the whole trip is two thousand euros, hotels included.",
    "Maria will book the hotel near the river, and Tom looks for a fado evening.",
    "The museum of tiles is closed on Mondays, so we visit it on Tuesday morning.",
)


class Claude:
    def __init__(self, fake: FakeAnthropic, server: TestServer) -> None:
        self.fake, self.server = fake, server

    @property
    def base_url(self) -> str:
        return str(self.server.make_url("/v1"))


@pytest.fixture
async def claude(aiohttp_server: Any) -> Claude:
    fake, server = await start_fake_anthropic(aiohttp_server)
    return Claude(fake, server)


def tenant_toml(
    claude: Claude, *, window: int = 200_000, strategy: str = "none", key: str | None = None, extra: str = ""
) -> str:
    """A tenant in front of ``claude``: its window for ``claude-test-*``, its strategy, its
    upstream key, and ``extra`` TOML after ``[compaction]`` (new tables, or keys of it)."""
    upstream_key = f'api_key = "{key}"' if key else ""
    return TENANT.format(base=claude.base_url, window=window, strategy=strategy, key=upstream_key) + extra


MakeProxy = Callable[..., Awaitable[tuple[anthropic.AsyncAnthropic, str]]]


@pytest.fixture
async def make_proxy(tmp_path: Path, claude: Claude) -> AsyncIterator[MakeProxy]:
    """Start a proxy with one ``default`` tenant (``tenant_toml``'s keywords), or the given
    ``tenants`` (name → TOML); ``proxy_toml`` is added to proxy.toml after ``[store]``. Answers an
    SDK client (key ``client_key``, no retries) and the proxy's root URL."""
    servers: list[ProxyTestServer] = []
    clients: list[anthropic.AsyncAnthropic] = []

    async def factory(
        window: int = 200_000,
        strategy: str = "none",
        key: str | None = None,
        *,
        extra: str = "",
        tenants: Mapping[str, str] | None = None,
        proxy_toml: str = "",
        client_key: str = CLIENT_KEY,
        base_path: str = "",
    ) -> tuple[anthropic.AsyncAnthropic, str]:
        if tenants is None:
            tenants = {"default": tenant_toml(claude, window=window, strategy=strategy, key=key, extra=extra)}
        server = await start_rig_proxy(tmp_path, servers, tenants, proxy_toml)
        url = str(server.make_url(""))
        client = anthropic.AsyncAnthropic(base_url=url + base_path, api_key=client_key, max_retries=0)
        clients.append(client)
        return client, url

    yield factory
    for client in clients:
        await client.close()
    for server in servers:
        await server.close()


def conversation(turns: int) -> list[dict[str, Any]]:
    """``turns`` user/assistant exchanges about a trip (the assistant's as text blocks), then a
    question."""
    messages: list[dict[str, Any]] = []
    for i in range(turns):
        text = " ".join(SENTENCES[(i + k) % len(SENTENCES)] for k in range(6))
        messages.append({"role": "user", "content": f"Turn {i}. {text}"})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": f"Noted {i}. {text}"}]})
    messages.append({"role": "user", "content": "What did we decide about the car?"})
    return messages


def blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A message's content as blocks (a string is one text block)."""
    content = message["content"]
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


def check_shape(body: dict[str, Any]) -> None:
    """What the Messages API demands of a conversation, asserted: it opens with a user turn, roles
    alternate, and every tool_result answers a tool_use of the assistant turn right before and
    opens its user turn."""
    messages = body["messages"]
    assert messages[0]["role"] == "user"
    for before, after in zip(messages, messages[1:], strict=False):
        assert before["role"] != after["role"], (before["role"], after["role"])
    for i, message in enumerate(messages):
        results = [b for b in blocks(message) if b.get("type") == "tool_result"]
        if not results:
            continue
        kinds = [b.get("type") for b in blocks(message)]
        assert kinds[: len(results)] == ["tool_result"] * len(results), kinds
        uses = {b["id"] for b in blocks(messages[i - 1]) if b.get("type") == "tool_use"}
        assert {b["tool_use_id"] for b in results} <= uses
