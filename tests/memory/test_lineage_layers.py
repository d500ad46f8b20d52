"""An anonymous session's layer is lineage-bound: shared by every stranger whose opening gives
the same session key, it answers each request with the documents of its own conversation only,
from indexes that are cached like any layer's."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from ctxproxy.memory import docs as docs_module
from ctxproxy.memory.cards import MemoryCard, card_id, page_doc
from ctxproxy.memory.docs import LayerIndex, SearchParams
from ctxproxy.memory.memories import MemoryStore
from ctxproxy.memory.scopes import Layer, MemoryScope
from ctxproxy.session import PrefixChain
from ctxproxy.session.lineage import Lineage
from ctxproxy.store import Store
from ctxproxy.store.keys import layer_version_key

SESSION = "acme:d:s_shared"


def chat(*texts: str) -> PrefixChain:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful assistant."}]
    messages += [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)]
    return PrefixChain.of(messages)


ALICE = chat("Hi", "Hello!", "My PIN is 4417.", "Noted.", "What was it?")
BOB = chat("Hi", "Hello!", "I cycle to work.", "Nice.", "What was it?")


def scope(chain: PrefixChain) -> MemoryScope:
    return MemoryScope("acme", SESSION, lineage=chain)


def card(content: str, chain: PrefixChain, end: int = 5) -> MemoryCard:
    return MemoryCard(card_id(content), content, "fact", (), 1.0, "src", lineage=(Lineage.of(chain, end),))


async def found(memories: MemoryStore, chain: PrefixChain, query: str) -> list[str]:
    return [hit.doc.content for hit in await memories.search(scope(chain), query, 10)]


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every index built."""
    seen: list[int] = []
    original = LayerIndex.build.__func__  # type: ignore[attr-defined]

    def counting(cls: type[LayerIndex], docs: Any, params: SearchParams, previous: Any = None) -> LayerIndex:
        index: LayerIndex = original(cls, docs, params, previous)
        seen.append(len(index.docs))
        return index

    monkeypatch.setattr(docs_module.LayerIndex, "build", classmethod(counting))
    return seen


async def test_each_conversation_finds_only_its_own_documents(memories: MemoryStore) -> None:
    await memories.add(scope(ALICE), [card("My PIN is 4417 for the bank card.", ALICE)])
    await memories.add(scope(BOB), [card("I cycle to work on a blue bike.", BOB)])
    await memories.add(scope(BOB), [card("The opening greeting was friendly.", BOB, end=3)])
    assert set(await found(memories, ALICE, "PIN bank bike greeting")) == {
        "My PIN is 4417 for the bank card.",
        "The opening greeting was friendly.",  # derived from the opening, which is Alice's too
    }
    assert set(await found(memories, BOB, "PIN bank bike greeting")) == {
        "I cycle to work on a blue bike.",
        "The opening greeting was friendly.",
    }
    assert await memories.has_docs(scope(ALICE)) and await memories.has_docs(scope(BOB))
    stranger = chat("Hi", "Hello!", "Something else.", "Ok.", "?")
    assert await memories.search(scope(chat("Hi")), "PIN bike", 10) == []
    assert await found(memories, stranger, "PIN bike greeting") == ["The opening greeting was friendly."]


async def test_has_docs_counts_only_readable_documents(memories: MemoryStore) -> None:
    await memories.add(scope(ALICE), [card("My PIN is 4417 for the bank card.", ALICE)])
    assert await memories.has_docs(scope(ALICE))
    assert not await memories.has_docs(scope(BOB))


async def test_the_layer_is_apart_from_every_identified_one(memories: MemoryStore, store: Store) -> None:
    """Stored under its own key: neither a request with a scope on the same derived key reads it,
    nor does an anonymous request read what was stored for the session key alone (as before
    lineages, when it had no lineage: nobody's now)."""
    legacy = MemoryScope("acme", SESSION)
    await memories.add(
        legacy, [MemoryCard(card_id("Old anonymous note."), "Old anonymous note.", "fact", (), 1.0, "s")]
    )
    await memories.add(scope(ALICE), [card("My PIN is 4417 for the bank card.", ALICE)])
    assert Layer("acme", "session", SESSION, bound=True).key != legacy.session_layer.key
    assert await found(memories, ALICE, "old anonymous note PIN") == ["My PIN is 4417 for the bank card."]
    # Nor a scope's request: its session layer is the scope's own (tests/security/test_scope_session_layers.py).
    team = MemoryScope("acme", SESSION, scope="team")
    assert await memories.search(team, "old anonymous note PIN", 10) == []
    # A document in the bound layer without a lineage (written some other way) is nobody's.
    await store.put(
        scope(BOB).session_layer.key,
        {"docs": [MemoryCard(card_id("x y z"), "Stray note here.", "fact", (), 1.0, "s").to_json()]},
    )
    await store.delete(layer_version_key(scope(BOB).session_layer.key))
    assert await found(memories, BOB, "stray note") == [] and not await memories.has_docs(scope(BOB))


async def test_the_same_card_from_two_conversations_reaches_both(memories: MemoryStore, store: Store) -> None:
    same = "The office closes at six on Fridays."
    await memories.add(scope(ALICE), [card(same, ALICE)])
    assert await found(memories, BOB, "office closes") == []
    await memories.add(scope(BOB), [card(same, BOB)])
    assert await found(memories, BOB, "office closes") == [same] and await found(memories, ALICE, "office closes") == [
        same
    ]
    key = layer_version_key(scope(BOB).session_layer.key)
    version = await store.get(key)
    await memories.add(scope(BOB), [card(same, BOB, end=len(BOB))])  # again, later in Bob's conversation
    assert await store.get(key) == version  # nothing new: the layer is not rewritten


async def test_views_are_cached_and_follow_the_layer(memories: MemoryStore, builds: list[int]) -> None:
    await memories.add(scope(ALICE), [card("My PIN is 4417 for the bank card.", ALICE)])
    bobs_page = replace(page_doc(2, [], "src", 1.0), lineage=(Lineage.of(BOB, 4),))
    await memories.add(scope(BOB), [card("I cycle to work on a blue bike.", BOB), bobs_page])
    for _ in range(3):
        assert await found(memories, ALICE, "PIN bank") == ["My PIN is 4417 for the bank card."]
    assert builds == [3, 1]  # the layer once, Alice's part of it once
    for _ in range(2):
        assert await found(memories, BOB, "blue bike") == ["I cycle to work on a blue bike."]
    assert builds == [3, 1, 2]
    await memories.add(scope(ALICE), [card("My e-mail is ada@example.org.", ALICE)])
    assert set(await found(memories, ALICE, "PIN e-mail ada")) == {
        "My PIN is 4417 for the bank card.",
        "My e-mail is ada@example.org.",
    }
    assert builds[3:] == [2]  # a new revision: the layer's index extended by the write, Alice's part built again


async def test_a_conversation_that_reads_the_whole_layer_uses_its_index(
    memories: MemoryStore, builds: list[int]
) -> None:
    await memories.add(scope(ALICE), [card("My PIN is 4417 for the bank card.", ALICE)])
    await memories.add(scope(ALICE), [card("Statements go by e-mail.", ALICE, end=3)])
    for _ in range(2):
        assert len(await found(memories, ALICE, "PIN statements")) == 2
    assert builds == [2]


async def test_a_conversation_that_goes_on_reads_what_it_read_before(
    memories: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The readable part of a bound layer is checked once per revision and conversation
    (``readable_memo``): a request that repeats the previous one's messages reads the same
    documents without checking each lineage, another conversation and a new revision are checked."""
    from ctxproxy.memory import readable_memo

    checks: list[int] = []
    original = readable_memo.readable_ids

    def counting(index: LayerIndex, reader: PrefixChain | None) -> frozenset[str]:
        checks.append(len(index.docs))
        return original(index, reader)

    monkeypatch.setattr(readable_memo, "readable_ids", counting)
    await memories.add(scope(ALICE), [card("My PIN is 4417 for the bank card.", ALICE)])
    await memories.add(scope(BOB), [card("I cycle to work on a blue bike.", BOB)])
    assert await found(memories, ALICE, "PIN bike") == ["My PIN is 4417 for the bank card."]
    longer = chat("Hi", "Hello!", "My PIN is 4417.", "Noted.", "What was it?", "4417.", "And my bike?")
    assert await found(memories, longer, "PIN bike") == ["My PIN is 4417 for the bank card."]
    assert len(checks) == 1  # the conversation went on: what it read before
    assert await found(memories, BOB, "PIN bike") == ["I cycle to work on a blue bike."]
    assert len(checks) == 2  # another conversation: checked
    await memories.add(scope(longer), [card("The bike is blue too.", longer, end=7)])
    assert set(await found(memories, longer, "PIN bike blue")) == {
        "My PIN is 4417 for the bank card.",
        "The bike is blue too.",
    }
    assert len(checks) == 3  # a new revision: checked
    assert await found(memories, ALICE, "PIN bike blue") == ["My PIN is 4417 for the bank card."]  # shorter
