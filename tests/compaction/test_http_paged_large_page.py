"""``paged`` when the newest page alone does not fit the window: an agent's turn of several large
tool results, over HTTP as a stateless client sends it.

A page is never split by the archive, so until then such a turn was forwarded over the window
(bench/compaction.py at 8k on its agent session: 10–11 prompts of 430). Now the start of the
page is summarised after the Contents Page, which stays byte for byte, and the page is archived
whole once the next one begins.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from ctxproxy.session import message_digest
from tests.compaction.test_http_strategies import BASE, COUNTER, MEMORY_OFF, MODEL, SYSTEM, TOOLS, Client
from tests.conftest import MakeProxy, Upstream

WINDOW, MAX_TOKENS = 2400, 200
PAGED = """
[compaction.paged]
active_pages = 1
archive_batch = 2
[compaction.tool_outputs]
enabled = {tool_outputs}
"""


def tenant(tool_outputs: bool) -> str:
    """``tool_outputs`` off: the page's own accounting, no room kept for ctxproxy_retrieve, no
    masking; on: the large page's entry is longer than the Contents Page's budget allows, and is
    shortened rather than taking the older entries with it."""
    base = BASE.format(window=WINDOW, strategy="paged", placement="assistant_named")
    paged = PAGED.format(tool_outputs=str(tool_outputs).lower())
    return base.replace("summary_max_tokens = 200\n", "") + paged + MEMORY_OFF


def output(n: int) -> str:
    """A tool's answer of about 450 tokens."""
    return " ".join(f"line {n}.{i}: sourdough order {i} for table {n * i} paid {i % 7} euros." for i in range(32))


def call(n: int) -> list[dict[str, Any]]:
    """One round of the agent: a tool call and its large result."""
    tool_call = {"id": f"call_{n}", "type": "function", "function": {"name": "lookup", "arguments": f'{{"q":"{n}"}}'}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [tool_call]},
        {"role": "tool", "tool_call_id": f"call_{n}", "content": output(n)},
    ]


@pytest.mark.parametrize("tool_outputs", [False, True], ids=["tool_outputs_off", "tool_outputs_on"])
async def test_a_page_larger_than_the_window_is_summarised_after_the_contents_page(
    make_proxy: MakeProxy, upstream: Upstream, tool_outputs: bool
) -> None:
    proxy = await make_proxy({"default": tenant(tool_outputs)})
    history: list[dict[str, Any]] = [SYSTEM]
    sent = []
    async with aiohttp.ClientSession() as http:
        client = Client(proxy, upstream, http)
        for n in range(1, 4):  # three small pages: the first two are archived
            history.append({"role": "user", "content": f"Short question {n} about the bakery's orders?"})
            sent.append(await client.send(history, tools=TOOLS, max_tokens=MAX_TOKENS))
            history.append({"role": "assistant", "content": f"Short answer {n}."})
        history.append({"role": "user", "content": "Go through every order record, one lookup at a time."})
        for n in range(1, 9):  # one page of eight ~450-token tool results: ~3,700 tokens
            history += call(n)
            sent.append(await client.send(history, tools=TOOLS, max_tokens=MAX_TOKENS))
        page_over = sent[-1]
        history.append({"role": "assistant", "content": "All eight records are paid."})
        for question in ("Thanks. Which table paid most?", "And which paid least?"):
            history.append({"role": "user", "content": question})
            after = await client.send(history, tools=TOOLS, max_tokens=MAX_TOKENS)
            sent.append(after)
            history.append({"role": "assistant", "content": "Table 217."})
        history.pop()
    for turn in sent:  # what the upstream received fits: messages, tools, the answer
        body = turn.forwarded.json()
        messages = COUNTER.count_messages(body["messages"], [message_digest(m) for m in body["messages"]], MODEL)
        assert messages + COUNTER.count_tools(body["tools"], MODEL) + MAX_TOKENS <= WINDOW
    # The whole page did not fit; its start was summarised after the Contents Page, kept whole.
    assert int(page_over.headers["X-Ctx-Tokens-Before"]) > WINDOW
    summary = page_over.messages[1]["content"]
    assert summary.startswith("## Contents Page") and "### Current turn so far" in summary
    assert "[Page #1]" in summary
    kept = page_over.summarized
    assert kept is not None and page_over.messages[2:] == page_over.sent[kept:]
    assert page_over.sent[kept]["role"] == "assistant" and page_over.messages[-1]["content"] == output(8)
    # The next archival archives the large page whole: a Contents Page listing it, no split turn.
    contents = after.messages[1]["content"]
    assert "[Page #4]" in contents and "[Page #5]" in contents and "### Current turn so far" not in contents
    assert after.messages[2:] == history[-1:] and after.headers["X-Ctx-Strategy"] == "paged"
