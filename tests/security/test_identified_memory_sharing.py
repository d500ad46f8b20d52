"""Requests that name an identity keep today's sharing rules: another conversation of the same
user (``user`` or ``X-Ctx-User``), the same scope (``X-Ctx-Scope``) or the same ``X-Session-Id``
gets the memories — lineages bind only requests that name none of them."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import MakeProxy, Upstream
from tests.recall.test_memory_http import injected
from tests.security.anonymous import ALICE, BOB, PIN, QUESTION, TENANTS, play, post

IDENTITIES: dict[str, tuple[dict[str, str], dict[str, Any]]] = {
    "user field": ({}, {"user": "alice"}),
    "X-Ctx-User": ({"X-Ctx-User": "alice"}, {}),
    "X-Ctx-Scope": ({"X-Ctx-Scope": "bank-team"}, {}),
    "X-Session-Id": ({"X-Session-Id": "bank-chat-1"}, {}),
}


@pytest.mark.parametrize("strategy", sorted(TENANTS))
@pytest.mark.parametrize("identity", sorted(IDENTITIES))
async def test_another_conversation_of_the_same_identity_gets_the_memories(
    make_proxy: MakeProxy, upstream: Upstream, identity: str, strategy: str
) -> None:
    headers, body = IDENTITIES[identity]
    proxy = await make_proxy({"default": TENANTS[strategy]})
    await play(proxy, ALICE, headers, **body)
    await play(proxy, BOB, headers, **body)
    await post(proxy, [*BOB, QUESTION], headers, **body)
    assert PIN in (injected(upstream) or "")
