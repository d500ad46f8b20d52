"""Which proxy tools a request gets, under which names, and where they sit in ``tools``."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from ctxproxy.tools.definitions import ORDER, RECALL_PAGE, SEARCH_MEMORY, offer_tools, with_tools


def tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}


def body(**extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], **extra}


def test_default_wire_names() -> None:
    tools = offer_tools(body(), ORDER)
    assert tools is not None
    assert tools.wire(RECALL_PAGE) == "ctxproxy_recall_page"
    assert tools.wire(SEARCH_MEMORY) == "ctxproxy_search_memory"
    assert tools.internal("ctxproxy_search_memory") == SEARCH_MEMORY
    assert tools.internal("search_memory") is None
    assert tools.internal(None) is None


def test_names_never_clash_with_client_tools() -> None:
    client = [tool("ctxproxy_recall_page"), tool("ctxproxy_recall_page_"), tool("ctxproxy_search_memory")]
    tools = offer_tools(body(tools=client), ORDER)
    assert tools is not None
    assert tools.wire(RECALL_PAGE) == "ctxproxy_recall_page__"
    assert tools.wire(SEARCH_MEMORY) == "ctxproxy_search_memory_"
    assert tools.internal("ctxproxy_recall_page") is None  # the client's own tool stays the client's


def test_custom_tools_count_as_taken_names() -> None:
    custom = {"type": "custom", "custom": {"name": "ctxproxy_recall_page"}}
    tools = offer_tools(body(tools=[custom]), ORDER)
    assert tools is not None and tools.wire(RECALL_PAGE) == "ctxproxy_recall_page_"


def test_names_are_deterministic() -> None:
    request = body(tools=[tool("ctxproxy_search_memory"), tool("lookup")])
    first, second = offer_tools(request, ORDER), offer_tools(request, ORDER)
    assert first is not None and second is not None
    assert orjson.dumps(with_tools(request, first)) == orjson.dumps(with_tools(request, second))


@pytest.mark.parametrize(
    "extra",
    [
        {"tool_choice": "none"},
        {"tool_choice": "required"},
        {"tool_choice": {"type": "function", "function": {"name": "lookup"}}},
        {"tool_choice": {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": []}}},
        {"n": 2},
        {"functions": [{"name": "legacy", "parameters": {}}]},
        {"function_call": "auto"},
    ],
)
def test_declined_requests(extra: dict[str, Any]) -> None:
    assert offer_tools(body(tools=[tool("lookup")], **extra), ORDER) is None


@pytest.mark.parametrize("extra", [{}, {"tool_choice": "auto"}, {"n": 1}, {"tool_choice": None}])
def test_offered_requests(extra: dict[str, Any]) -> None:
    assert offer_tools(body(**extra), ORDER) is not None


def test_nothing_available_means_no_tools() -> None:
    assert offer_tools(body(), []) is None


def test_unknown_tool_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown proxy tools"):
        offer_tools(body(), ["recall_everything"])


def test_only_available_tools_in_fixed_order() -> None:
    only_search = offer_tools(body(), [SEARCH_MEMORY])
    assert only_search is not None
    assert [d["function"]["name"] for d in only_search.definitions] == ["ctxproxy_search_memory"]
    assert only_search.internal("ctxproxy_recall_page") is None
    reversed_order = offer_tools(body(), [SEARCH_MEMORY, RECALL_PAGE])
    assert reversed_order is not None
    assert [d["function"]["name"] for d in reversed_order.definitions] == [
        "ctxproxy_recall_page",
        "ctxproxy_search_memory",
    ]


def test_schemas() -> None:
    tools = offer_tools(body(), ORDER)
    assert tools is not None
    recall, search, retrieve = (d["function"] for d in tools.definitions)
    assert retrieve["parameters"]["required"] == ["ref"] and "query" in retrieve["parameters"]["properties"]
    assert recall["parameters"]["required"] == ["page_index"]
    assert recall["parameters"]["properties"]["page_index"]["type"] == "integer"
    assert "Contents Page" in recall["description"]
    top_k = search["parameters"]["properties"]["top_k"]
    assert (top_k["minimum"], top_k["maximum"], top_k["default"]) == (1, 10, 5)
    assert search["parameters"]["required"] == ["query"]


def test_with_tools_appends_ours_after_the_clients() -> None:
    request = body(tools=[tool("lookup"), tool("write")], temperature=0.2, unknown_field={"kept": True})
    original = copy.deepcopy(request)
    tools = offer_tools(request, ORDER)
    assert tools is not None
    sent = with_tools(request, tools)
    assert [t["function"]["name"] for t in sent["tools"]] == [
        "lookup",
        "write",
        "ctxproxy_recall_page",
        "ctxproxy_search_memory",
        "ctxproxy_retrieve",
    ]
    assert {k: v for k, v in sent.items() if k != "tools"} == {k: v for k, v in request.items() if k != "tools"}
    assert request == original  # the client's body is not touched
    sent["tools"][-1]["function"]["parameters"]["properties"].clear()
    assert with_tools(request, tools)["tools"][-1]["function"]["parameters"]["properties"]  # no shared state


def test_with_tools_without_client_tools() -> None:
    tools = offer_tools(body(), [RECALL_PAGE])
    assert tools is not None
    sent = with_tools(body(), tools)
    assert [t["function"]["name"] for t in sent["tools"]] == ["ctxproxy_recall_page"]
    assert "tool_choice" not in sent
