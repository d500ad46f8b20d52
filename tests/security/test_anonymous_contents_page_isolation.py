"""The Contents Page of an anonymous conversation lists its own pages only: Bob's (same session
key as Alice's: same system prompt, same "Hi") never lists Alice's PIN or e-mail pages."""

from __future__ import annotations

from tests.conftest import MakeProxy, Upstream
from tests.security.anonymous import ALICE, BOB, PAGED, PIN, QUESTION, contents_page, leaked, play, post


async def test_a_strangers_contents_page_lists_none_of_the_pages(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": PAGED})
    await play(proxy, ALICE)
    await post(proxy, [*ALICE, QUESTION])
    assert PIN in (contents_page(upstream) or "")  # Alice's own Contents Page lists her pages

    await play(proxy, BOB)
    await post(proxy, [*BOB, QUESTION])
    page = contents_page(upstream)
    assert page is not None and "[Page #2]" in page and leaked(page) == []
