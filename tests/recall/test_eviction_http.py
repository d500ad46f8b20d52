"""Contents Page eviction through the real proxy, with the default m (10) and p (20): the recall
counts the model's ``ctxproxy_recall_page`` calls leave behind decide when a page leaves the
Contents Page, and a page that left is still found by ``ctxproxy_search_memory``."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson

from tests.conftest import MakeProxy, Proxy, Upstream
from tests.recall.paged import PAGED_TENANT, RECALL, SEARCH

# Archive one page per request (two stay raw); eviction at its defaults: PAGED_TENANT.
ADMIN = '[admin]\napi_key = "adm"\n'
FACTS = [
    "My locker code is 4417, please remember it.",
    "We moved the standup to 9:30 on Tuesdays.",
    "The staging database is called orders-stg.",
]


def history(turns: int) -> list[dict[str, Any]]:
    """``turns`` answered pages and a question: the request's turn is ``turns + 1``."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful assistant."}]
    for i in range(turns):
        text = FACTS[i] if i < len(FACTS) else f"Filler question {i + 1} about growing tomatoes on a balcony."
        messages.append({"role": "user", "content": text})
        messages.append({"role": "assistant", "content": f"Noted ({i + 1})."})
    messages.append({"role": "user", "content": "Anything else I should know?"})
    return messages


def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"function": {"name": name, "arguments": orjson.dumps(arguments).decode()}}


async def ask(http: aiohttp.ClientSession, proxy: Proxy, upstream: Upstream, turns: int) -> tuple[str, str]:
    """One request; the Contents Page its first upstream round carried, and the session."""
    already = len(upstream.fake.chat_requests())
    resp = await http.post(proxy.url("/v1/chat/completions"), json={"model": "m", "messages": history(turns)})
    assert resp.status == 200, await resp.text()
    first = upstream.fake.chat_requests()[already].json()
    contents = first["messages"][1]
    assert contents.get("name") == "contents_page"
    return str(contents["content"]), resp.headers["X-Ctx-Session"]


async def test_recall_counts_decide_eviction_and_evicted_pages_stay_searchable(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """Page p is archived at turn p + 2 (the request with p + 1 answered pages).

    - page 2, never recalled (archived at turn 4): listed while turn − 4 < 10, gone at turn 14;
    - page 1, archived at turn 3 and recalled by the model during turn 4: m no longer applies
      (it would have gone at turn 13); p does: gone at turn 24 (24 − 4 = 20).
    """
    proxy = await make_proxy({"default": PAGED_TENANT}, proxy_toml=ADMIN)
    listing: dict[int, set[int]] = {}  # turn → pages on the Contents Page
    async with aiohttp.ClientSession() as http:
        for turns in range(2, 24):
            if turns == 3:  # turn 4: the model reads page 1 back
                upstream.fake.reply_json(tool_calls=[call(RECALL, {"page_index": 1})])
                upstream.fake.reply_json("Your locker code is 4417.")
            contents, session = await ask(http, proxy, upstream, turns)
            listing[turns + 1] = {p for p in range(1, 30) if f"[Page #{p}]" in contents}
            if turns == 3:
                answered = upstream.fake.chat_requests()[-1].json()["messages"][-1]
                assert answered["role"] == "tool" and "locker code is 4417" in answered["content"]
        detail = await (
            await http.get(
                proxy.url(f"/admin/tenants/default/sessions/{session}"), headers={"Authorization": "Bearer adm"}
            )
        ).json()

        pages = {p["page"]: p for p in detail["pages"]}
        assert (pages[1]["recalls"], pages[1]["last_recall_turn"]) == (1, 4)
        assert pages[2]["recalls"] == 0

        assert listing[3] == {1} and listing[4] == {1, 2}
        assert 2 in listing[13] and 2 not in listing[14]  # m = 10
        assert all(1 in listing[t] for t in range(3, 24))  # recalled: m does not take it at 13
        assert 1 not in listing[24]  # p = 20 after the recall at turn 4
        assert all(3 in listing[t] for t in range(5, 15)) and 3 not in listing[15]  # m, like page 2

        # Evicted, but still stored and searchable: the model finds it through search_memory.
        upstream.fake.reply_json(tool_calls=[call(SEARCH, {"query": "locker code"})])
        upstream.fake.reply_json("It is 4417.")
        contents, _ = await ask(http, proxy, upstream, 23)
        assert "[Page #1]" not in contents and "locker" not in contents
        answer = upstream.fake.chat_requests()[-1].json()["messages"][-1]
        assert answer["role"] == "tool" and "[page 1]" in answer["content"]
        assert "My locker code is 4417" in answer["content"]
        # ... and can still be read in full by its number, though no longer listed.
        upstream.fake.reply_json(tool_calls=[call(RECALL, {"page_index": 1})])
        upstream.fake.reply_json("It is 4417.")
        await ask(http, proxy, upstream, 23)
        recalled = upstream.fake.chat_requests()[-1].json()["messages"][-1]
        assert recalled["role"] == "tool" and recalled["content"].startswith("## Page #1")
