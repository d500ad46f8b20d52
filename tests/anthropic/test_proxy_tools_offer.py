"""Which of ctxproxy's tools a Messages request is offered, in Anthropic's shape, under which names,
and the room compaction keeps for them (pure)."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from ctxproxy.config.models import CompactionConfig, TenantConfig
from ctxproxy.strategies.none import NoneOptions
from ctxproxy.strategies.paged import PagedOptions
from ctxproxy.tokens import TokenCounter
from ctxproxy.tools.definitions import ORDER, RECALL_PAGE, RETRIEVE, SEARCH_MEMORY
from ctxproxy.tools.definitions import offer_tools as offer_functions
from ctxproxy.tools.reserve import tools_reserve
from ctxproxy.wire.anthropic.tools import offer_tools

BODY: dict[str, Any] = {"model": "claude-test-1", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
PAGED = TenantConfig(
    name="t", compaction=CompactionConfig(strategy="paged", options={"paged": PagedOptions(), "none": NoneOptions()})
)
COUNTER = TokenCounter()


def test_definitions_are_anthropic_tools_with_the_neutral_descriptions_and_schemas() -> None:
    tools = offer_tools(BODY, ORDER)
    functions = offer_functions({"messages": []}, ORDER)
    assert tools is not None and functions is not None
    assert [set(d) for d in tools.definitions] == [{"name", "description", "input_schema"}] * 3
    names = [d["name"] for d in tools.definitions]
    assert names == ["ctxproxy_recall_page", "ctxproxy_search_memory", "ctxproxy_retrieve"]
    for ours, theirs in zip(tools.definitions, functions.definitions, strict=True):
        assert ours["description"] == theirs["function"]["description"]
        assert ours["input_schema"] == theirs["function"]["parameters"]


def test_names_never_clash_with_any_tool_of_the_client() -> None:
    client = [
        {"name": "ctxproxy_recall_page", "input_schema": {"type": "object"}},
        {"type": "web_search_20250305", "name": "ctxproxy_search_memory"},  # a server tool has a name too
        {"type": "custom", "name": "ctxproxy_search_memory_", "input_schema": {"type": "object"}},
    ]
    tools = offer_tools({**BODY, "tools": client}, ORDER)
    assert tools is not None
    assert dict(tools.wire_names) == {
        RECALL_PAGE: "ctxproxy_recall_page_",
        SEARCH_MEMORY: "ctxproxy_search_memory__",
        RETRIEVE: "ctxproxy_retrieve",
    }


@pytest.mark.parametrize(
    "choice",
    [
        {"type": "none"},
        {"type": "any"},
        {"type": "tool", "name": "lookup"},
        {"type": "any", "disable_parallel_tool_use": True},
    ],
)
def test_a_choice_the_client_made_declines_them(choice: dict[str, Any]) -> None:
    assert offer_tools({**BODY, "tool_choice": choice}, ORDER) is None


@pytest.mark.parametrize("choice", [None, {"type": "auto"}, {"type": "auto", "disable_parallel_tool_use": True}])
def test_auto_takes_them(choice: dict[str, Any] | None) -> None:
    body = BODY if choice is None else {**BODY, "tool_choice": choice}
    assert offer_tools(body, [SEARCH_MEMORY]) is not None


def test_compaction_keeps_room_for_the_anthropic_definitions() -> None:
    tools = offer_tools(BODY, [RECALL_PAGE, SEARCH_MEMORY])  # retrieve: kept apart, for tool results
    assert tools is not None
    reserve = tools_reserve(PAGED, partial(offer_tools, BODY), COUNTER, "claude-test-1")
    assert reserve == COUNTER.count_tools(tools.definitions, "claude-test-1") > 0
    declined = {**BODY, "tool_choice": {"type": "none"}}
    assert tools_reserve(PAGED, partial(offer_tools, declined), COUNTER, "claude-test-1") == 0
