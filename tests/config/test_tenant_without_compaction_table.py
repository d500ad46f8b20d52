"""A tenant file without a ``[compaction]`` table runs the default strategy with its default
options, also when a request does not fit and the strategy is asked for a plan.

Found by tests/security/test_fuzz_http.py: the loader filled ``compaction.options`` only from a
``[compaction]`` table, so such a tenant's first request over its window was a 500 KeyError.
"""

from __future__ import annotations

import aiohttp

from tests.conftest import MakeProxy, Upstream


async def test_request_over_the_window_is_answered(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": 'default_context_window = 2000\n[upstream]\nbase_url = "{upstream}"\n'})
    assert proxy.holder.current.tenants["default"].compaction.strategy == "none"
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "word " * 150} for i in range(21)
    ]
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url("/v1/chat/completions"), json={"model": "m", "messages": messages}) as resp:
            assert resp.status == 200, await resp.text()
    # Forwarded once; any other call is the summariser's (summarizer = "llm" by default; its
    # budget, scaled to this 2,000-token window, lets it summarise the history in chunks).
    forwarded = [r for r in upstream.fake.chat_requests() if r.json()["messages"][-1] == messages[-1]]
    assert len(forwarded) == 1
