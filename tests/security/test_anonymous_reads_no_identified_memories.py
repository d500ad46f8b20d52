"""A request that names no identity reads none of what identified requests wrote, even when its
opening gives it their session key: a conversation with an ``X-Ctx-Scope`` used to leave its
session-layer memories (its pages, its cards) where an anonymous stranger with the same system
prompt and "Hi" read them."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import MakeProxy, Upstream
from tests.security.anonymous import ALICE, BOB, QUESTION, TENANTS, last_forwarded, leaked, play, post

IDENTITIES: dict[str, tuple[dict[str, str], dict[str, Any]]] = {
    "user field": ({}, {"user": "alice"}),
    "X-Ctx-User": ({"X-Ctx-User": "alice"}, {}),
    "X-Ctx-Scope": ({"X-Ctx-Scope": "bank-team"}, {}),
}


@pytest.mark.parametrize("strategy", sorted(TENANTS))
@pytest.mark.parametrize("identity", sorted(IDENTITIES))
async def test_an_anonymous_stranger_gets_none_of_an_identified_conversations_memories(
    make_proxy: MakeProxy, upstream: Upstream, identity: str, strategy: str
) -> None:
    headers, body = IDENTITIES[identity]
    proxy = await make_proxy({"default": TENANTS[strategy]})
    await play(proxy, ALICE, headers, **body)
    alice = await post(proxy, [*ALICE, QUESTION], headers, **body)

    await play(proxy, BOB)
    bob = await post(proxy, [*BOB, QUESTION])
    assert bob.headers["X-Ctx-Session"] == alice.headers["X-Ctx-Session"]
    assert leaked(str(last_forwarded(upstream))) == []
