"""Every line about a tenant's work names the tenant (bound once, when the request's tenant is
known): compaction, summariser and tool lines, also from the tasks a request starts; and the
request line's ``compacted`` agrees with ``X-Ctx-Compacted``, after an overflow retry too."""

from __future__ import annotations

from typing import Any

import aiohttp

from ctxproxy.services import TASKS
from tests.conftest import MakeProxy, Proxy, Upstream
from tests.fakes.upstream import openai_error
from tests.logs.lines import capture, named, request_lines
from tests.recall.paged import PAGED_TENANT, paged_history
from tests.recall.test_paged_recall_http import recall
from tests.recovery.test_dead_lease_holder import over_the_window
from tests.recovery.test_overflow_retry import OVERFLOW, TENANT, history

COMPACTING = """
default_context_window = 2000
[upstream]
base_url = "{{upstream}}"
[compaction]
strategy = "cut_point"
summarizer = "{summarizer}"
summary_max_tokens = 300
[compaction.cut_point]
reserve_tokens = 500
keep_recent_tokens = 800
[memory]
enabled = false
"""


async def post(proxy: Proxy, path: str, body: dict[str, Any]) -> Any:
    async with aiohttp.ClientSession() as http, http.post(proxy.url(path), json=body) as resp:
        assert resp.status == 200, await resp.text()
        await resp.read()
        return resp.headers


async def test_compaction_and_summariser_lines_name_their_tenant(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy(
        {"red": COMPACTING.format(summarizer="llm"), "blue": COMPACTING.format(summarizer="extractive")}
    )
    body = {"model": "m", "messages": over_the_window()}
    with capture() as logs:
        upstream.fake.reply_error(500, openai_error("summariser down"))  # the LLM summary's call
        red = await post(proxy, "/t/red/v1/chat/completions", body)
        blue = await post(proxy, "/t/blue/v1/chat/completions", body)
        await proxy.server.app[TASKS].drain(5)
        await request_lines(logs, 2)
    assert red["X-Ctx-Compacted"] == blue["X-Ctx-Compacted"] == "1"
    fallbacks = named(logs, "summary.llm_fallback")
    assert fallbacks and {line["tenant"] for line in fallbacks} == {"red"}
    compactions = named(logs, "compaction")
    assert [(c["tenant"], c["summarizer"], c["kind"]) for c in compactions] == [
        ("red", "extractive", "planned"),
        ("blue", "extractive", "planned"),
    ]
    # A line written outside any request (the server's own) names no tenant.
    assert all("tenant" in line for line in logs if line.get("request_id") is not None)


async def test_tool_loop_lines_name_their_tenant_and_a_loop_without_calls_is_debug(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    proxy = await make_proxy({"acme": PAGED_TENANT})
    body = {"model": "gpt-4o-mini", "messages": paged_history()}
    with capture() as logs:
        upstream.fake.reply_json(tool_calls=[recall(1)])
        upstream.fake.reply_json("Your locker code is 4417.")
        await post(proxy, "/t/acme/v1/chat/completions", body)
        upstream.fake.reply_json("Nothing to look up.")
        await post(proxy, "/t/acme/v1/chat/completions", body)
        lines = await request_lines(logs, 2)
    answered, plain = named(logs, "tools.loop_done")
    assert (answered["log_level"], answered["tool_rounds"], answered["tenant"]) == ("info", 1, "acme")
    assert (plain["log_level"], plain["tool_rounds"], plain["tenant"]) == ("debug", 0, "acme")
    assert lines[0]["tool_calls"] == {"recall_page": 1} and "tool_calls" not in lines[1]


async def test_compacted_agrees_with_the_header_after_a_retry(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": TENANT.format(window=100_000, strategy="none")})
    upstream.fake.reply_error(400, OVERFLOW)
    with capture() as logs:
        headers = await post(proxy, "/v1/chat/completions", {"model": "m", "messages": history(30)})
        [line] = await request_lines(logs, 1)
    # The first attempt went as the client sent it; the retry's compaction is what was answered.
    assert headers["X-Ctx-Retried"] == "1" and headers["X-Ctx-Compacted"] == "1"
    assert line["compacted"] is True and line["retried"] is True
    assert line["overflow_outcome"] == "recovered"
    assert line["tokens_after"] == int(headers["X-Ctx-Tokens-After"])
    [compaction] = named(logs, "compaction")
    assert compaction["kind"] == "recovery" and compaction["tenant"] == "default"
