"""The room compaction keeps for ctxproxy's tools is what the definitions it may offer this request
count, under this request's names — nothing when it will offer none."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from ctxproxy.config.models import CompactionConfig, MemoryConfig, TenantConfig, ToolOutputsConfig, ToolsConfig
from ctxproxy.strategies.none import NoneOptions
from ctxproxy.strategies.paged import PagedOptions
from ctxproxy.strategies.paged.contents import INSTRUCTION, instruction
from ctxproxy.tokens import TokenCounter
from ctxproxy.tools.definitions import ORDER, RECALL_PAGE, SEARCH_MEMORY, offer_tools
from ctxproxy.tools.reserve import tools_reserve

COUNTER = TokenCounter()
PAGED = CompactionConfig(strategy="paged", options={"paged": PagedOptions(), "none": NoneOptions()})
NONE = CompactionConfig(strategy="none", options={"paged": PagedOptions(), "none": NoneOptions()})
PAGE_TOOLS = (RECALL_PAGE, SEARCH_MEMORY)
BODY: dict[str, Any] = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}


def tenant(compaction: CompactionConfig, memory: bool = False, tools: bool = True) -> TenantConfig:
    return TenantConfig(
        name="t", compaction=compaction, memory=MemoryConfig(enabled=memory), tools=ToolsConfig(enabled=tools)
    )


def reserve(config: TenantConfig, body: dict[str, Any]) -> int:
    return tools_reserve(config, partial(offer_tools, body), COUNTER, "gpt-4o-mini")


def counted(body: dict[str, Any], available: tuple[str, ...]) -> int:
    tools = offer_tools(body, available)
    assert tools is not None
    return COUNTER.count_tools(tools.definitions, "gpt-4o-mini")


def test_a_strategy_that_archives_pages_may_offer_both() -> None:
    assert reserve(tenant(PAGED), BODY) == counted(BODY, PAGE_TOOLS)


def test_tool_outputs_reserve_apart() -> None:
    """``retrieve`` is reserved by the tool-output step, for a conversation with tool results."""
    rewriting = PAGED.model_copy(update={"tool_outputs": ToolOutputsConfig(enabled=True)})
    assert reserve(tenant(rewriting), BODY) == counted(BODY, PAGE_TOOLS) < counted(BODY, ORDER)


def test_memory_alone_may_offer_search() -> None:
    kept = reserve(tenant(NONE, memory=True), BODY)
    assert kept == counted(BODY, (SEARCH_MEMORY,)) < counted(BODY, PAGE_TOOLS)


@pytest.mark.parametrize(
    ("config", "body"),
    [
        (tenant(NONE), BODY),  # nothing to recall: no tools
        (tenant(PAGED, tools=False), BODY),
        (tenant(PAGED), {**BODY, "tool_choice": "none"}),  # the request declines them
        (tenant(PAGED), {**BODY, "n": 2}),
    ],
)
def test_nothing_is_kept_when_no_tool_will_be_offered(config: TenantConfig, body: dict[str, Any]) -> None:
    assert reserve(config, body) == 0


def test_renamed_tools_are_counted_with_their_names_and_contents_page() -> None:
    clash = {**BODY, "tools": [{"type": "function", "function": {"name": "ctxproxy_recall_page"}}]}
    renamed = instruction("ctxproxy_recall_page_", "ctxproxy_search_memory")
    growth = COUNTER.count_text(renamed, "gpt-4o-mini") - COUNTER.count_text(INSTRUCTION, "gpt-4o-mini")
    kept = reserve(tenant(PAGED), clash)
    assert growth > 0 and kept == counted(clash, PAGE_TOOLS) + growth > counted(BODY, PAGE_TOOLS)
