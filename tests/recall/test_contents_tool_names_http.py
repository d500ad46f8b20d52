"""The Contents Page names the recall tools a request really has: renamed when the client defined
a tool of the same name, none when ctxproxy's tools are not offered — and stays byte-identical
between archivals for a client that always sends the same tools."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson
import pytest

from tests.conftest import MakeProxy, Proxy, Upstream
from tests.recall.paged import FACTS as PAGED_FACTS
from tests.recall.paged import PAGED_TENANT, RECALL, SEARCH, paged_history

FACTS = (*PAGED_FACTS, "The printer on floor two is out of toner.")


def tool(name: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": "client's", "parameters": {"type": "object", "properties": {}}},
    }


def history(turns: int = 5) -> list[dict[str, Any]]:
    return paged_history(turns, FACTS)


async def send(proxy: Proxy, body: dict[str, Any]) -> None:
    """Post ``body`` and check it went out with a Contents Page."""
    async with aiohttp.ClientSession() as http:
        resp = await http.post(proxy.url("/v1/chat/completions"), json={"model": "m", **body})
        assert resp.status == 200, await resp.text()
        assert "X-Ctx-Summarized" in resp.headers


def contents_of(sent: dict[str, Any]) -> str:
    [page] = [m for m in sent["messages"] if str(m.get("content", "")).startswith("## Contents Page")]
    assert page.get("name") == "contents_page"
    return str(page["content"])


def offered(sent: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in sent.get("tools") or [] if "function" in t]


async def test_a_renamed_recall_tool_is_the_one_the_contents_page_names(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    proxy = await make_proxy({"default": PAGED_TENANT})
    upstream.fake.reply_json(tool_calls=[{"function": {"name": RECALL + "_", "arguments": '{"page_index": 1}'}}])
    upstream.fake.reply_json("4417.")
    await send(proxy, {"messages": history(), "tools": [tool(RECALL)]})
    first, second = (r.json() for r in upstream.fake.chat_requests())
    assert offered(first) == [RECALL, RECALL + "_", SEARCH]
    text = contents_of(first)
    assert f"call the `{RECALL}_` tool" in text and f"call `{SEARCH}`" in text
    assert f"`{RECALL}`" not in text  # the client's own tool of that name is not ours to advertise
    # The name it was told works: ctxproxy answers it with the page.
    assert second["messages"][-1]["role"] == "tool" and "locker code is 4417" in second["messages"][-1]["content"]


async def test_both_names_taken_and_a_plain_request_afterwards(make_proxy: MakeProxy, upstream: Upstream) -> None:
    """The adjustment is per request: the stored Contents Page keeps the default names, so the
    same session asked without clashing tools gets them back."""
    proxy = await make_proxy({"default": PAGED_TENANT})
    await send(proxy, {"messages": history(), "tools": [tool(RECALL), tool(SEARCH), tool(RECALL + "_")]})
    await send(proxy, {"messages": history()})
    clashing, plain = (r.json() for r in upstream.fake.chat_requests())
    assert offered(clashing)[-2:] == [RECALL + "__", SEARCH + "_"]
    text = contents_of(clashing)
    assert f"`{RECALL}__`" in text and f"`{SEARCH}_`" in text
    assert f"`{RECALL}`" not in text and f"`{SEARCH}`" not in text
    default = contents_of(plain)
    assert f"call the `{RECALL}` tool" in default and f"call `{SEARCH}`." in default
    # Only the instruction differs: the same page list, byte for byte.
    assert text.split("\n\n")[2:] == default.split("\n\n")[2:] and text != default


NOT_OFFERED = [
    pytest.param({"n": 2}, id="n=2"),
    pytest.param({"tools": [tool("lookup")], "tool_choice": "required"}, id="required"),
    pytest.param(
        {"tools": [tool("lookup")], "tool_choice": {"type": "function", "function": {"name": "lookup"}}},
        id="forced",
    ),
    pytest.param({"tools": [tool("lookup")], "tool_choice": "none"}, id="none"),
    pytest.param(
        {"functions": [{"name": "lookup", "parameters": {"type": "object", "properties": {}}}]}, id="functions"
    ),
]


@pytest.mark.parametrize("extra", NOT_OFFERED)
async def test_without_proxy_tools_the_contents_page_names_none(
    make_proxy: MakeProxy, upstream: Upstream, extra: dict[str, Any]
) -> None:
    proxy = await make_proxy({"default": PAGED_TENANT})
    await send(proxy, {"messages": history(), **extra})
    [sent] = (r.json() for r in upstream.fake.chat_requests())
    assert not any(name.startswith("ctxproxy_") for name in offered(sent))
    text = contents_of(sent)
    assert "ctxproxy_" not in text and "not available here" in text
    assert "[Page #1] User: My locker code is 4417" in text  # the listing itself is all there


async def test_tools_disabled_for_the_tenant(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": PAGED_TENANT + "[tools]\nenabled = false\n"})
    await send(proxy, {"messages": history()})
    await send(proxy, {"messages": history(6)})
    first, second = (r.json() for r in upstream.fake.chat_requests())
    assert "tools" not in first and "tools" not in second
    for sent in (first, second):
        text = contents_of(sent)
        assert "ctxproxy_" not in text and "call" not in text.split("\n\n")[1]


async def test_byte_identical_between_archivals_for_a_client_with_clashing_tools(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    proxy = await make_proxy({"default": PAGED_TENANT.replace("archive_batch = 1", "archive_batch = 3")})
    tools = [tool(RECALL), tool("lookup")]
    for turns in (5, 6):  # 5 turns + question: archive; 6: no archival (below active + batch)
        await send(proxy, {"messages": history(turns), "tools": tools})
    first, second = (r.json() for r in upstream.fake.chat_requests())
    assert f"`{RECALL}_`" in contents_of(first)
    assert orjson.dumps(first["messages"][:-1]) == orjson.dumps(second["messages"][: len(first["messages"]) - 1])
    assert orjson.dumps(first["tools"]) == orjson.dumps(second["tools"])
