"""Ranking over layers: neighbour pages, cards folded into their page, kinds, layers, embeddings."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from ctxproxy.memory.cards import MemoryCard, card_id, page_doc
from ctxproxy.memory.docs import DEFAULT_SEARCH, LayerIndex, search_layers
from ctxproxy.memory.windows import around, page_windows, windows_at


def page(n: int, user: str, assistant: str, source: str = "s1") -> MemoryCard:
    return page_doc(
        n, [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}], source, float(n)
    )


def card(
    content: str,
    now: float = 1.0,
    page_number: int | None = None,
    source: str = "s1",
    vector: tuple[float, ...] | None = None,
) -> MemoryCard:
    return MemoryCard(card_id(content), content, "fact", (), now, source, page_number, vector=vector)


def index(*docs: MemoryCard) -> LayerIndex:
    return LayerIndex.build(docs, DEFAULT_SEARCH)


TURNS = [
    ("Morning! The weather is lovely today.", "It really is, sunny and warm."),
    ("Do you have any pets at home?", "Yes, a snake called Seraphim."),
    ("Where did you get Seraphim from?", "Oh, that was a while ago."),
    ("Tell me.", "I bought her a year ago in Paris, at a small shop."),
    ("Nice. What are you cooking tonight?", "Pasta with tomatoes from the garden."),
    ("I went to the market for groceries.", "Did you buy anything nice?"),
]
CONVERSATION = [page(n, user, assistant) for n, (user, assistant) in enumerate(TURNS, start=1)]


def test_the_answer_next_to_the_page_that_names_the_subject_ranks_high() -> None:
    # Page 4 says where the snake was bought but never names it; pages 2 and 3 name it.
    query = "Where did Jolene buy her snake Seraphim?"
    hits = search_layers(query, [("session", index(*CONVERSATION))], 3)
    assert 4 in [hit.doc.page for hit in hits]
    plain = replace(DEFAULT_SEARCH, neighbour_shares=(), context_weight=0.0, wide_radius=0)
    alone = search_layers(query, [("session", LayerIndex.build(CONVERSATION, plain))], 3, params=plain)
    assert 4 not in [hit.doc.page for hit in alone]


def test_pages_matching_nothing_nearby_are_not_returned() -> None:
    plain = replace(DEFAULT_SEARCH, neighbour_shares=(), context_weight=0.0, wide_radius=0)
    hits = search_layers("snake", [("session", LayerIndex.build(CONVERSATION, plain))], 10, params=plain)
    assert [hit.doc.page for hit in hits] == [2]
    assert all(hit.score > 0 for hit in search_layers("snake", [("session", index(*CONVERSATION))], 10))


def test_the_wide_context_ranks_a_page_in_a_matching_stretch_above_an_isolated_one() -> None:
    # Pages 1 and 9 both mention "recipe" once; page 1 sits in a stretch about baking (pages 1-4),
    # page 9 among unrelated talk (a short radius: the toy conversation is shorter than the default window).
    turns = [
        ("I finally found a recipe I like.", "Which one?"),
        ("Tell me more.", "Sure."),
        ("The oven was too hot at first.", "Happens to everyone."),
        ("The cake came out great in the end.", "Well done!"),
        *[(f"Random chat number {n}.", "Nice.") for n in range(5, 9)],
        ("I lost the recipe my aunt sent.", "Oh no."),
        ("Anyway, how was work?", "Busy."),
    ]
    pages = [page(n, user, assistant) for n, (user, assistant) in enumerate(turns, start=1)]
    query = "recipe for the cake baked in the oven"
    wide = replace(DEFAULT_SEARCH, neighbour_shares=(), context_weight=0.0, wide_radius=2)
    ranked = [
        hit.doc.page for hit in search_layers(query, [("session", LayerIndex.build(pages, wide))], 10, params=wide)
    ]
    assert ranked.index(1) < ranked.index(9)
    narrow = replace(wide, wide_radius=0)
    alone = [
        hit.doc.page for hit in search_layers(query, [("session", LayerIndex.build(pages, narrow))], 10, params=narrow)
    ]
    assert 2 not in alone  # without the wide context a page matching nothing itself is not found


def test_hits_carry_their_layer_and_each_document_appears_once() -> None:
    shared = card("The deploy key rotates every 90 days.")
    user = index(shared)
    session = index(shared, card("Deploys happen on Tuesdays."))
    hits = search_layers("deploy key", [("user", user), ("session", session)], 10)
    assert [(hit.doc.content, hit.layer) for hit in hits][0] == (shared.content, "user")
    assert sum(1 for hit in hits if hit.doc.id == shared.id) == 1


def test_a_card_from_an_archived_page_is_folded_into_that_page() -> None:
    pages = [
        page(1, "Which port does the orders database use?", "It listens on 5433."),
        page(2, "Thanks.", "You're welcome."),
    ]
    from_page = card("Assistant: It listens on 5433.", page_number=1)
    elsewhere = card("The orders database port is 5433 in staging too.", page_number=9)  # its page is not stored
    hits = search_layers("orders database port", [("session", index(*pages, from_page, elsewhere))], 10)
    ids = [hit.doc.id for hit in hits]
    assert from_page.id not in ids
    assert pages[0].id in ids and elsewhere.id in ids


def test_kinds_filter() -> None:
    docs = index(page(1, "Which port does the database use?", "5433."), card("The database port is 5433."))
    assert {hit.doc.kind for hit in search_layers("database port", [("session", docs)], 10, kinds={"card"})} == {"card"}
    assert {hit.doc.kind for hit in search_layers("database port", [("session", docs)], 10, kinds={"page"})} == {"page"}


def test_equal_matches_newest_first() -> None:
    docs = index(card("Standup at nine, old room.", now=1.0), card("Standup at nine, new room.", now=5.0))
    assert [hit.doc.created_at for hit in search_layers("standup", [("session", docs)], 2)] == [5.0, 1.0]


def test_no_match_and_degenerate_arguments() -> None:
    docs = index(card("Something unrelated."))
    assert search_layers("kubernetes", [("session", docs)], 5) == []
    assert search_layers("something", [("session", docs)], 0) == []
    assert search_layers("something", [], 5) == []


def test_vectors_are_fused_with_bm25() -> None:
    lexical = card("GPU budget approved for the inference cluster.", vector=(0.0, 1.0))
    semantic = card("We will buy eight H100 cards next quarter.", vector=(1.0, 0.0))  # shares no word with the query
    docs = index(lexical, semantic)
    bm25_only = search_layers("GPU budget", [("session", docs)], 5)
    assert [hit.doc.id for hit in bm25_only] == [lexical.id]
    fused = search_layers("GPU budget", [("session", docs)], 5, query_vector=(1.0, 0.1))
    assert {hit.doc.id for hit in fused} == {lexical.id, semantic.id}
    mismatched = search_layers("GPU budget", [("session", docs)], 5, query_vector=(1.0, 0.0, 0.0))
    assert [hit.doc.id for hit in mismatched] == [lexical.id]  # vectors of another model are ignored


def test_reindexing_reuses_term_counts() -> None:
    first = index(card("Alpha fact."))
    extra = card("Beta fact.")
    second = LayerIndex.build([*first.docs.values(), extra], DEFAULT_SEARCH, previous=first)
    only_id = next(iter(first.docs))
    assert second.tf[only_id] is first.tf[only_id]
    assert extra.id in second.tf


def test_a_user_layer_card_is_folded_into_its_page_in_the_session_layer() -> None:
    archived = page(1, "Which port does the orders database use?", "It listens on 5433.")
    from_page = card("Assistant: It listens on 5433.", page_number=1)
    hits = search_layers(
        "orders database port", [("user", index(from_page)), ("session", index(archived, from_page))], 10
    )
    assert [hit.doc.id for hit in hits] == [archived.id]
    other_session = search_layers("orders database port 5433", [("user", index(from_page)), ("session", index())], 10)
    assert [(hit.doc.id, hit.layer) for hit in other_session] == [(from_page.id, "user")]


def test_neighbours_are_by_page_number_even_when_each_page_names_its_own_source() -> None:
    pages = [page(n, user, assistant, f"session x, page {n}") for n, (user, assistant) in enumerate(TURNS, start=1)]
    hits = search_layers("Where did Jolene buy her snake Seraphim?", [("session", index(*pages))], 3)
    assert 4 in [hit.doc.page for hit in hits]


@given(
    st.dictionaries(st.integers(1, 60), st.dictionaries(st.sampled_from("abcdef"), st.integers(1, 3)), max_size=30),
    st.integers(1, 5),
)
def test_wide_windows_equal_the_plain_sum_of_the_pages_around(pages: dict[int, dict[str, int]], radius: int) -> None:
    numbers = {page: f"p{page}" for page in pages}
    tf = {f"p{page}": {term: float(n) for term, n in counts.items()} for page, counts in pages.items()}
    got = dict(page_windows(numbers, tf, radius))
    for page, doc_id in numbers.items():
        expected: dict[str, float] = {}
        for other in pages:
            if abs(other - page) <= radius:
                for term, n in tf[f"p{other}"].items():
                    expected[term] = expected.get(term, 0.0) + n
        assert got[doc_id] == expected


@given(
    st.dictionaries(st.integers(1, 60), st.dictionaries(st.sampled_from("abcdef"), st.integers(1, 3)), max_size=30),
    st.sets(st.integers(-5, 70), max_size=20),
    st.integers(1, 13),
)
def test_windows_at_some_pages_equal_the_plain_sum_of_the_pages_around(
    pages: dict[int, dict[str, int]], wanted: set[int], radius: int
) -> None:
    """What ``LayerIndex.extend`` and ``drop`` recount: the windows of a few pages (any numbers,
    in runs and apart), summed as one running window."""
    numbers = {page: f"p{page}" for page in pages}
    tf = {f"p{page}": {term: float(n) / 2 for term, n in counts.items()} for page, counts in pages.items()}
    got = list(windows_at(sorted(wanted), numbers, tf, radius))
    assert [page for page, _ in got] == sorted(wanted)
    for page, window in got:
        assert window == around(page, numbers, tf, radius)
