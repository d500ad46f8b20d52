"""``recall_page`` serves an anonymous conversation its own archived pages only: Bob's page 2
is Bob's, whatever Alice (same session key: same system prompt, same "Hi") archived as her
page 2; and Alice still reads hers."""

from __future__ import annotations

from tests.conftest import MakeProxy, Upstream
from tests.security.anonymous import (
    ALICE,
    BOB,
    PAGED,
    PIN,
    QUESTION,
    leaked,
    play,
    post,
    recall_call,
    tool_answer,
)


async def test_a_strangers_recall_reads_only_their_own_pages(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": PAGED})
    await play(proxy, ALICE)
    await play(proxy, BOB)

    # Alice's PIN and e-mail pages have the numbers 2 and 3 in her conversation.
    for page, bobs in ((2, "Lisbon"), (3, "touring")):
        upstream.fake.reply_json(tool_calls=[recall_call(page)])
        upstream.fake.reply_json("Done.")
        await post(proxy, [*BOB, QUESTION])
        answer = tool_answer(upstream)
        assert answer.startswith(f"## Page #{page}") and bobs in answer and leaked(answer) == []

    upstream.fake.reply_json(tool_calls=[recall_call(2)])
    upstream.fake.reply_json("Done.")
    await post(proxy, [*ALICE, QUESTION])
    assert PIN in tool_answer(upstream)
