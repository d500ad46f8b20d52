"""Time-aware memory through the real proxy: a conversation that states its dates (a date line
at the start of a session, as LoCoMo's logs do) gets them on its Contents Page, on a recalled
page and beside each injected memory — rendered once, then carried byte for byte."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson

from tests.conftest import MakeProxy, Upstream
from tests.recall.paged import PAGED_TENANT, RECALL, paged_history

DATED_TENANT = PAGED_TENANT.replace("enabled = false", "enabled = true")


def dated_history() -> list[dict[str, Any]]:
    """``paged_history`` whose first session is dated 8 May 2023 and whose third page opens a
    session of 25 May 2023."""
    messages = paged_history()
    messages[1] = {**messages[1], "content": "Date: 1:56 pm on 8 May, 2023\n" + messages[1]["content"]}
    messages[5] = {**messages[5], "content": "[25 May 2023]\n" + messages[5]["content"]}
    return messages


def recall(page: int) -> dict[str, Any]:
    return {"function": {"name": RECALL, "arguments": orjson.dumps({"page_index": page}).decode()}}


async def _post(proxy_url: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http:
        resp = await http.post(proxy_url, json={"model": "gpt-4o-mini", "messages": messages})
        body: dict[str, Any] = await resp.json()
    assert resp.status == 200, body
    return body


async def test_the_contents_page_and_a_recalled_page_show_the_stated_date(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    proxy = await make_proxy({"default": PAGED_TENANT})
    upstream.fake.reply_json(tool_calls=[recall(3)])
    upstream.fake.reply_json("Priya starts the rotation.")
    await _post(proxy.url("/v1/chat/completions"), dated_history())
    first, second = (r.json() for r in upstream.fake.chat_requests())
    contents = first["messages"][1]["content"]
    assert "[Page #1, 8 May 2023] User: My locker code is 4417" in contents
    assert "[Page #2, 8 May 2023]" in contents and "[Page #3, 25 May 2023]" in contents
    assert "Date: 1:56 pm" not in contents  # the date line itself is not repeated in the summary
    assert second["messages"][-1]["content"].startswith("## Page #3, 25 May 2023 (messages 6-7")


async def test_an_injected_memory_names_its_page_and_date_and_stays_byte_stable(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    proxy = await make_proxy({"default": DATED_TENANT})
    upstream.fake.reply_json("It is 4417.")
    upstream.fake.reply_json("Noted.")
    messages = dated_history()
    await _post(proxy.url("/v1/chat/completions"), messages)
    messages += [{"role": "assistant", "content": "It is 4417."}, {"role": "user", "content": "And the standup?"}]
    await _post(proxy.url("/v1/chat/completions"), messages)
    first, second = (r.json() for r in upstream.fake.chat_requests())
    [injected] = [m["content"] for m in first["messages"] if m["content"].startswith("## Relevant Memories")]
    assert "- (page 1, 8 May 2023) User: My locker code is 4417" in injected
    # The next request carries it unchanged, at its place.
    assert injected in [m["content"] for m in second["messages"]]
