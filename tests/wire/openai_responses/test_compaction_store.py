"""The summaries behind ctxproxy's compaction items: found again by the item's content in the
tenant that issued it only, the newest few kept, and gone with the session."""

from __future__ import annotations

from pathlib import Path

from ctxproxy.session import SessionKey
from ctxproxy.session.forget import forget_session
from ctxproxy.store import open_store
from ctxproxy.wire.openai_responses.compaction_store import GONE, KEPT, CompactionRef, ServedSummaries, is_ours

KEY = SessionKey("acme", "s_0123abcd", "derived")


async def test_a_summary_is_found_by_its_items_content_in_its_tenant_only(tmp_path: Path) -> None:
    store = open_store("diskcache", tmp_path / "data")
    summaries = ServedSummaries(store, ttl=3600)
    ref = CompactionRef.new(KEY)
    assert await summaries.save(ref, "## Goal\\ncount errors")
    assert is_ours(ref.content) and ref.content.endswith(":d:s_0123abcd")
    assert CompactionRef.parse("acme", ref.content) == ref
    assert await summaries.load(ref) == "## Goal\\ncount errors"
    elsewhere = CompactionRef.parse("other", ref.content)
    assert elsewhere is not None and await summaries.load(elsewhere) is GONE
    header = CompactionRef(SessionKey("acme", "s_0123abcd", "header"), ref.ident)
    assert await summaries.load(header) is GONE
    await store.close()


def test_malformed_content_refers_to_nothing() -> None:
    good = CompactionRef.new(KEY).content
    for content in (
        "ctxproxy:",
        "ctxproxy:../x",
        good.replace(":d:", ":x:"),
        good + "/..",
        good[:20],
        "ctxproxy:" + "A" * 32 + ":d:s",
    ):
        assert CompactionRef.parse("acme", content) is None, content


async def test_the_newest_are_kept_and_the_session_takes_them_along(tmp_path: Path) -> None:
    store = open_store("diskcache", tmp_path / "data")
    summaries = ServedSummaries(store, ttl=3600)
    refs = [CompactionRef.new(KEY) for _ in range(KEPT + 2)]
    for n, ref in enumerate(refs):
        await summaries.save(ref, f"summary {n}")
    assert [await summaries.load(ref) for ref in refs[:2]] == [GONE, GONE]
    assert await summaries.load(refs[-1]) == f"summary {KEPT + 1}"
    assert await forget_session(store, KEY)
    assert await summaries.load(refs[-1]) is GONE
    await store.close()
