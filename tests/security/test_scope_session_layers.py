"""Two scopes never share a session layer: requests naming different ``X-Ctx-Scope`` values (and
no user) that open the same way get the same derived session key, but each scope's session
layer (its archived page copies and session cards) is its own. Before, both read
``mem:session:{h(session)}``, so team B's injection and search found team A's PIN."""

from __future__ import annotations

import pytest

from tests.conftest import MakeProxy, Upstream
from tests.recall.test_memory_http import injected
from tests.security.anonymous import ALICE, BOB, PIN, QUESTION, TENANTS, leaked, play, post


@pytest.mark.parametrize("strategy", sorted(TENANTS))
async def test_another_scope_with_the_same_opening_gets_nothing(
    make_proxy: MakeProxy, upstream: Upstream, strategy: str
) -> None:
    proxy = await make_proxy({"default": TENANTS[strategy]})
    await play(proxy, ALICE, {"X-Ctx-Scope": "team-a"})
    await play(proxy, BOB, {"X-Ctx-Scope": "team-b"})
    await post(proxy, [*BOB, QUESTION], {"X-Ctx-Scope": "team-b"})
    forwarded = upstream.fake.chat_requests()[-1].body.decode()
    assert leaked(forwarded) == []
    assert PIN not in (injected(upstream) or "")


@pytest.mark.parametrize("strategy", sorted(TENANTS))
async def test_the_same_scope_still_shares(make_proxy: MakeProxy, upstream: Upstream, strategy: str) -> None:
    proxy = await make_proxy({"default": TENANTS[strategy]})
    await play(proxy, ALICE, {"X-Ctx-Scope": "team-a"})
    await play(proxy, BOB, {"X-Ctx-Scope": "team-a"})
    await post(proxy, [*BOB, QUESTION], {"X-Ctx-Scope": "team-a"})
    assert PIN in (injected(upstream) or "")
