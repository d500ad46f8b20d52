"""ctxproxy's compaction items expanded: into their summaries where they stood, a note for one that
is gone, the upstream's own untouched — and a body full of forged items costs a few store reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ctxproxy.session import SessionKey
from ctxproxy.store import open_store
from ctxproxy.wire.openai_responses.compaction_store import CompactionRef, ServedSummaries
from ctxproxy.wire.openai_responses.expand import GONE_NOTE, INTRO, MAX_SESSIONS, expand_compactions
from tests.wire.openai_responses.items import user

KEY = SessionKey("acme", "s_abc", "derived")


class CountingReads:
    def __init__(self, store: Any) -> None:
        self.store, self.reads = store, 0

    async def get(self, key: str) -> Any:
        self.reads += 1
        return await self.store.get(key)


def text(item: dict[str, Any]) -> str:
    return str(item["content"][0]["text"])


async def test_items_become_their_summaries_in_place(tmp_path: Path) -> None:
    store = open_store("diskcache", tmp_path / "data")
    summaries = ServedSummaries(store, ttl=60)
    ref = CompactionRef.new(KEY)
    await summaries.save(ref, "## Goal\nship it")
    upstreams = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAB..."}
    ours = {"type": "compaction", "id": "cmp_2", "encrypted_content": ref.content}
    body = {"model": "m", "input": [user("a"), ours, upstreams, user("b")]}
    expanded = await expand_compactions(summaries, "acme", body)
    assert expanded is not None
    out, count, gone = expanded
    assert (count, gone) == (1, 0) and out["input"][0] == user("a") and out["input"][2:] == [upstreams, user("b")]
    assert text(out["input"][1]) == f"{INTRO}\n\n## Goal\nship it" and out["input"][1]["role"] == "user"
    assert await expand_compactions(summaries, "acme", {"input": [upstreams]}) is None
    assert await expand_compactions(summaries, "other", body) == (
        {**body, "input": [user("a"), {**out["input"][1], "content": [{"type": "input_text", "text": GONE_NOTE}]},
                           upstreams, user("b")]}, 1, 1)  # fmt: skip
    await store.close()


async def test_a_body_of_forged_items_costs_a_few_reads(tmp_path: Path) -> None:
    store = open_store("diskcache", tmp_path / "data")
    counting = CountingReads(store)
    summaries = ServedSummaries(counting, ttl=60)  # type: ignore[arg-type]
    forged = [
        {
            "type": "compaction",
            "encrypted_content": CompactionRef(SessionKey("acme", f"s_{n % 50}", "derived"), f"{n:032x}").content,
        }  # fmt: skip
        for n in range(2000)
    ]
    expanded = await expand_compactions(summaries, "acme", {"input": forged})
    assert expanded is not None and expanded[1:] == (2000, 2000)
    assert counting.reads == MAX_SESSIONS
    assert {text(item) for item in expanded[0]["input"]} == {GONE_NOTE}
    await store.close()
