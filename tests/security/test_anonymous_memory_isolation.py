"""Anonymous memories never cross conversations: Bob, who shares Alice's session key only
because both opened with the same system prompt and "Hi", never gets Alice's PIN or e-mail
address injected into his prompt — while Alice's own later requests still do (injected, or in
the summary forwarded with them: what it already says is not injected again)."""

from __future__ import annotations

import pytest

from tests.conftest import MakeProxy, Upstream
from tests.recall.test_memory_http import injected
from tests.security.anonymous import ALICE, BOB, PIN, QUESTION, TENANTS, last_forwarded, leaked, play, post


def reaching_alice(upstream: Upstream, strategy: str) -> str:
    """The memories injected for Alice; with ``rounds``, whose Session Memory already says her
    PIN (so it is not injected again), what was forwarded."""
    return str(last_forwarded(upstream)) if strategy == "rounds" else injected(upstream) or ""


@pytest.mark.parametrize("strategy", sorted(TENANTS))
async def test_a_stranger_with_the_same_opening_gets_none_of_the_memories(
    make_proxy: MakeProxy, upstream: Upstream, strategy: str
) -> None:
    proxy = await make_proxy({"default": TENANTS[strategy]})
    await play(proxy, ALICE)
    alice = await post(proxy, [*ALICE, QUESTION])
    assert PIN in reaching_alice(upstream, strategy)  # Alice's memories were written, and she gets them

    await play(proxy, BOB)
    bob = await post(proxy, [*BOB, QUESTION])
    assert bob.headers["X-Ctx-Session"] == alice.headers["X-Ctx-Session"]  # one session key...
    assert leaked(str(last_forwarded(upstream))) == []  # ...but none of Alice's memories

    # Alice, in her own conversation, still gets them after Bob wrote his.
    await post(proxy, [*ALICE, QUESTION])
    assert PIN in reaching_alice(upstream, strategy)
