"""``search_memory`` answers an anonymous conversation from its own memories only: Bob's model,
searching for a PIN and an e-mail address, never reads Alice's, though both conversations
share a session key (same system prompt, same "Hi"); Alice's search still finds them."""

from __future__ import annotations

import pytest

from tests.conftest import MakeProxy, Upstream
from tests.recall.paged import SEARCH
from tests.security.anonymous import (
    ALICE,
    BOB,
    EMAIL,
    PIN,
    QUESTION,
    TENANTS,
    leaked,
    play,
    post,
    search_call,
    tool_answer,
)

QUERY = "bank card PIN e-mail address statements"


@pytest.mark.parametrize("strategy", sorted(TENANTS))
async def test_a_strangers_search_finds_none_of_the_memories(
    make_proxy: MakeProxy, upstream: Upstream, strategy: str
) -> None:
    proxy = await make_proxy({"default": TENANTS[strategy]})
    await play(proxy, ALICE)
    await play(proxy, BOB)

    upstream.fake.reply_json(tool_calls=[search_call(QUERY)])
    upstream.fake.reply_json("I do not know them.")
    await post(proxy, [*BOB, QUESTION])
    assert SEARCH in [t["function"]["name"] for t in upstream.fake.chat_requests()[-2].json()["tools"]]
    assert leaked(tool_answer(upstream)) == []

    upstream.fake.reply_json(tool_calls=[search_call(QUERY)])
    upstream.fake.reply_json("Here they are.")
    await post(proxy, [*ALICE, QUESTION])
    answer = tool_answer(upstream)
    assert PIN in answer and EMAIL in answer
