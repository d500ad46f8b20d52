"""Recalls are counted per conversation: Alice reading her pages 2 and 3 back never shows up as
recalls of Bob's pages 2 and 3 ("(recalled 2×, …" on his Contents Page, and the eviction rules
that read the counts), though both conversations share a session key (same system prompt,
same "Hi")."""

from __future__ import annotations

from tests.conftest import MakeProxy, Upstream
from tests.security.anonymous import ALICE, BOB, PAGED, QUESTION, contents_page, play, post, recall_call


async def test_a_strangers_recalls_are_not_counted_as_ones_own(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": PAGED})
    await play(proxy, ALICE)
    for _ in range(2):  # Alice reads her pages 2 and 3 back
        upstream.fake.reply_json(tool_calls=[recall_call(2), recall_call(3)])
        upstream.fake.reply_json("Done.")
        await post(proxy, [*ALICE, QUESTION])

    await post(proxy, [*ALICE, QUESTION, {"role": "assistant", "content": "Done."}, QUESTION])
    assert "(recalled 2×, last recalled" in (contents_page(upstream) or "")  # Alice's next archival counts them

    # Bob's pages are archived after Alice's recalls: his Contents Page shows no recall of his own.
    await play(proxy, BOB)
    await post(proxy, [*BOB, QUESTION])
    page = contents_page(upstream)
    assert page is not None and "[Page #2]" in page and "recalled" not in page
