"""A ``paged`` tenant in front of the fake Anthropic upstream that archives one page a request, a
conversation it archives, and the calls the model makes to ctxproxy's tools: shared by the tests of
the Messages tool loop."""

from __future__ import annotations

from typing import Any

import anthropic

from tests.anthropic.conftest import CLIENT_KEY, Claude, MakeProxy, blocks, tenant_toml
from tests.recall.paged import FACTS, RECALL, SEARCH

__all__ = ["RECALL", "SEARCH"]  # re-exported: the tests name ctxproxy's tools with them

SYSTEM = "You are a helpful assistant."
PAGED = """
[compaction.paged]
active_pages = 2
archive_batch = 1
"""
ADMIN = '[admin]\napi_key = "adm"\n'
WEATHER = {"name": "get_weather", "description": "The weather in a city.", "input_schema": {"type": "object"}}


def history(turns: int = 5, more: str = "") -> list[dict[str, Any]]:
    """``turns`` answered pages (one fact each, and ``more``) and a question: the tenant archives the
    older ones as pages 1, 2, …"""
    messages: list[dict[str, Any]] = []
    for i in range(turns):
        messages.append({"role": "user", "content": FACTS[i % len(FACTS)] + more})
        messages.append({"role": "assistant", "content": f"Noted ({i + 1})."})
    messages.append({"role": "user", "content": "What is my locker code?"})
    return messages


async def paged_client(make_proxy: MakeProxy, claude: Claude, extra: str = "") -> tuple[anthropic.AsyncAnthropic, str]:
    """An SDK client of a proxy whose ``default`` tenant is ``paged``; ``extra``: more TOML tables
    (``[tools]``). The proxy has an admin key, ``adm``."""
    tenant = tenant_toml(claude, strategy="paged", extra=PAGED + extra)
    return await make_proxy(tenants={"default": tenant}, proxy_toml=ADMIN)


def sync_client(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key=CLIENT_KEY, max_retries=0)


def recall(page: int, name: str = RECALL, id: str | None = None) -> dict[str, Any]:
    """A ``tool_use`` the fake makes: ctxproxy's recall of ``page``."""
    use: dict[str, Any] = {"name": name, "input": {"page_index": page}}
    if id is not None:
        use["id"] = id
    return use


def tool_uses(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in blocks(message) if b.get("type") == "tool_use"]


def results(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in blocks(message) if b.get("type") == "tool_result"]
