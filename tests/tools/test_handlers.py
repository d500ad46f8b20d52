"""``ToolAnswers`` against a real diskcache store: every answer is a text the model can act on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxproxy.memory.cards import MemoryCard, card_id
from ctxproxy.memory.inject import QUERY_MAX_CHARS
from ctxproxy.memory.memories import MemoryStore
from ctxproxy.memory.scopes import MemoryScope
from ctxproxy.session.identity import SessionKey
from ctxproxy.store import Store, open_store
from ctxproxy.store.keys import archived_page_key, page_recalls_key
from ctxproxy.strategies.base import Block, Checkpoint
from ctxproxy.strategies.paged.contents import ContentsEntry, encode_entries
from ctxproxy.tokens import TokenCounter
from ctxproxy.tools.calls import ProxyCall
from ctxproxy.tools.definitions import RECALL_PAGE, SEARCH_MEMORY
from ctxproxy.tools.handlers import UNAVAILABLE, ToolAnswers, page_ranges, whole_number

KEY = SessionKey("acme", "s1", "header")
SCOPE = MemoryScope("acme", KEY.store_id)
COUNTER = TokenCounter()
PAGE_1 = [
    {"role": "user", "content": "My locker code is 4417, please remember it."},
    {"role": "assistant", "content": "Noted: 4417."},
]
LONG_PAGE = [
    {"role": "user" if m % 2 == 0 else "assistant", "content": " ".join(f"fact{m}x{i} is here." for i in range(60))}
    for m in range(8)
]


def entry(page: int, start: int, end: int) -> ContentsEntry:
    return ContentsEntry(page, start, end, f"{page}:abcd", f"page {page}", (f"line {page}",), archived_turn=1)


ENTRIES = [entry(1, 1, 3), entry(2, 3, 5), entry(3, 5, 6)]
CHECKPOINT = Checkpoint(
    end=6,
    prefix_hash="00",
    blocks=(Block(1, 6, "## Contents Page", "contents"),),
    created_at=0.0,
    state=encode_entries(ENTRIES),
)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = open_store("diskcache", tmp_path / "store")
    await s.put(archived_page_key(KEY, "1:abcd"), {"messages": PAGE_1, "archived_at": 0.0})
    await s.put(archived_page_key(KEY, "3:abcd"), {"messages": LONG_PAGE, "archived_at": 0.0})
    # page 2 is listed but no longer stored
    yield s
    await s.close()


def answers_for(
    store: Store,
    max_tokens: int = 4000,
    checkpoint: Checkpoint | None = CHECKPOINT,
    wire_names: dict[str, str] | None = None,
) -> ToolAnswers:
    return ToolAnswers(
        store=store,
        memories=MemoryStore(store),
        key=KEY,
        scope=SCOPE,
        checkpoint=checkpoint,
        turn=lambda: 7,
        clip=lambda text, limit: COUNTER.clip_text(text, limit),
        max_tokens=max_tokens,
        wire_names=wire_names,
    )


async def ask(answers: ToolAnswers, name: str, arguments: Any, limit: int | None = None) -> str:
    """Call as the loop does: the raw JSON text, and the parsed object when it is one."""
    raw = arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()
    return await answers(name, ProxyCall("call_1", name, name, raw).parsed_arguments(), raw, limit)


# --- recall_page -----------------------------------------------------------------------------


async def test_recall_returns_the_page_and_counts_the_recall(store: Store) -> None:
    answers = answers_for(store)
    text = await ask(answers, RECALL_PAGE, {"page_index": 1})
    assert text.startswith("## Page #1 (messages 2-3 of this conversation)")
    assert "My locker code is 4417" in text and "Noted: 4417." in text
    assert await store.get(page_recalls_key(KEY)) == {"1:abcd": {"count": 1, "last_turn": 7}}  # by the page's key
    assert answers.calls == {RECALL_PAGE: 1}


@pytest.mark.parametrize("given", [3, 3.0, "3", " #3 "])
async def test_page_numbers_are_read_leniently(store: Store, given: Any) -> None:
    assert (await ask(answers_for(store), RECALL_PAGE, {"page_index": given})).startswith("## Page #3")


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"page_index": "²"}, 'page_index must be a number, not "²"'),
        ({"page_index": "9" * 5000}, "page_index must be a page number, not a number that large"),
        ('{"page_index": ' + "9" * 30 + "}", "page_index must be a page number, not a number that large"),
        ('{"page_index": ' + "9" * 400 + "}", "page_index must be a page number, not a number that large"),
        ({"page_index": 1.5}, "page_index must be a whole number, not 1.5"),
        ({"page_index": True}, "page_index must be a number, not true"),
        ({"page_index": None}, "page_index must be a number, not null"),
        ({"page_index": [1]}, "page_index must be a number, not a JSON array"),
        ({"page_index": "three"}, 'page_index must be a number, not "three"'),
        ({"page": 1}, 'ctxproxy_recall_page needs "page_index"'),
        ({}, 'ctxproxy_recall_page needs "page_index"'),
        ("", 'ctxproxy_recall_page needs "page_index"'),
        ('{"page_index": 1', "The arguments were not valid JSON"),
        ("[1]", "The arguments must be a JSON object"),
    ],
)
async def test_bad_recall_arguments_are_explained(store: Store, arguments: Any, expected: str) -> None:
    text = await ask(answers_for(store), RECALL_PAGE, arguments)
    assert text.startswith(expected), text
    assert '{"page_index": 3}' in text  # how to call it right
    assert len(text) < 400  # a huge argument is never echoed back
    assert await store.get(page_recalls_key(KEY)) is None


@pytest.mark.parametrize(
    ("page", "expected"),
    [
        (0, "Page numbers start at 1."),
        (-2, "Page numbers start at 1."),
        ("-2", "Page numbers start at 1."),
        (42, "There is no archived page #42."),
    ],
)
async def test_pages_that_do_not_exist_list_the_ones_that_do(store: Store, page: Any, expected: str) -> None:
    text = await ask(answers_for(store), RECALL_PAGE, {"page_index": page})
    assert text == f"{expected} Archived pages: 1, 2, 3."


async def test_without_archived_pages(store: Store) -> None:
    text = await ask(answers_for(store, checkpoint=None), RECALL_PAGE, {"page_index": 1})
    assert text == "There is no archived page #1. Archived pages: none."


async def test_a_page_no_longer_stored(store: Store) -> None:
    text = await ask(answers_for(store), RECALL_PAGE, {"page_index": 2})
    assert text == "Page #2 is no longer stored; call ctxproxy_search_memory to find what it held."
    assert await store.get(page_recalls_key(KEY)) is None  # nothing was recalled


async def test_a_recalled_page_is_clipped_to_the_limit(store: Store) -> None:
    answers = answers_for(store, max_tokens=4000)
    whole = await ask(answers, RECALL_PAGE, {"page_index": 3})
    assert COUNTER.count_text(whole) > 2000 and "[cut:" not in whole
    clipped = await ask(answers, RECALL_PAGE, {"page_index": 3}, limit=300)
    assert clipped.startswith("## Page #3") and "[cut:" in clipped and "fact0x0 " in clipped
    assert COUNTER.count_text(clipped) <= 300
    capped = await ask(answers_for(store, max_tokens=200), RECALL_PAGE, {"page_index": 3}, limit=5000)
    assert COUNTER.count_text(capped) <= 200  # result_max_tokens caps whatever the loop allows


async def test_a_failing_store_is_explained(tmp_path: Path) -> None:
    closed = open_store("diskcache", tmp_path / "closed")
    answers = answers_for(closed)
    await closed.close()
    assert await ask(answers, RECALL_PAGE, {"page_index": 1}) == UNAVAILABLE
    assert await ask(answers, SEARCH_MEMORY, {"query": "locker"}) == UNAVAILABLE


async def test_an_unknown_tool(store: Store) -> None:
    assert await ask(answers_for(store), "x" * 500, {}) == 'Unknown tool "' + "x" * 80 + '" (… 420 more characters).'


# --- search_memory ---------------------------------------------------------------------------


def card(content: str, type: Any = "fact", page: int | None = None, kind: Any = "card") -> MemoryCard:
    return MemoryCard(card_id(content), content, type, (), 1.0, "test", page=page, kind=kind)


@pytest.fixture
async def memories(store: Store) -> Store:
    await MemoryStore(store).add(
        SCOPE,
        [
            card("We decided to migrate the database to Postgres.", "decision", page=2),
            card("User: the database migration runs on Friday.", page=1, kind="page"),
            card("The database password rotates monthly."),
        ],
    )
    return store


async def test_search_hits_are_numbered_and_labelled(memories: Store) -> None:
    text = await ask(answers_for(memories), SEARCH_MEMORY, {"query": "database migration", "top_k": 3})
    lines = text.splitlines()
    assert len(lines) == 3 and [line[:3] for line in lines] == ["1. ", "2. ", "3. "]
    assert any(line.endswith("[decision, page 2] We decided to migrate the database to Postgres.") for line in lines)
    assert any("[page 1] (ctxproxy_recall_page 1 for all of it) User: the database migration" in line for line in lines)
    assert any(line.endswith("[fact] The database password rotates monthly.") for line in lines)


async def test_a_page_hit_no_longer_listed_is_not_offered_for_recall(memories: Store) -> None:
    text = await ask(answers_for(memories, checkpoint=None), SEARCH_MEMORY, {"query": "migration Friday"})
    assert "[page 1] User: the database migration" in text and "recall_page" not in text


@pytest.mark.parametrize(
    ("top_k", "count", "note"),
    [
        (None, 3, ""),
        (1, 1, ""),
        ("2", 2, ""),
        (0, 1, "Note: top_k must be 1-10; used 1."),
        (-4, 1, "Note: top_k must be 1-10; used 1."),
        (50, 3, "Note: top_k must be 1-10; used 10."),
        (2.5, 3, "Note: top_k must be a whole number, not 2.5; used 5."),
        (True, 3, "Note: top_k must be a number, not true; used 5."),
        ("lots", 3, 'Note: top_k must be a number, not "lots"; used 5.'),
    ],
)
async def test_top_k_is_clamped_or_explained(memories: Store, top_k: Any, count: int, note: str) -> None:
    arguments = {"query": "database"} if top_k is None else {"query": "database", "top_k": top_k}
    lines = (await ask(answers_for(memories), SEARCH_MEMORY, arguments)).splitlines()
    hits = [line for line in lines if not line.startswith("Note:")]
    assert len(hits) == count
    assert [line for line in lines if line.startswith("Note:")] == ([note] if note else [])


@pytest.mark.parametrize("arguments", [{}, {"query": ""}, {"query": "   "}, {"query": 7}, {"top_k": 3}])
async def test_a_missing_query_is_explained(memories: Store, arguments: Any) -> None:
    text = await ask(answers_for(memories), SEARCH_MEMORY, arguments)
    assert text.startswith('ctxproxy_search_memory needs "query"') and '{"query": ' in text


async def test_a_huge_query_is_searched_by_its_start_and_not_echoed(memories: Store) -> None:
    query = "database " + "filler " * 60_000  # ~400 KB
    text = await ask(answers_for(memories), SEARCH_MEMORY, {"query": query})
    assert text.splitlines()[0] == f"Note: the query was searched by its first {QUERY_MAX_CHARS} characters."
    assert "database" in text and len(text) < 2000
    nothing = await ask(answers_for(memories), SEARCH_MEMORY, {"query": "zebra " * 80_000})
    assert nothing.endswith(f'No memories match "{("zebra " * 14)[:80]}" (… {QUERY_MAX_CHARS - 80} more characters).')
    assert len(nothing) < 400


async def test_search_answers_share_the_limit(store: Store) -> None:
    long = [card(f"Deployment note {i}: " + " ".join(f"step{i}x{j}" for j in range(400))) for i in range(4)]
    await MemoryStore(store).add(SCOPE, long)
    text = await ask(answers_for(store), SEARCH_MEMORY, {"query": "deployment note", "top_k": 4}, limit=400)
    lines = text.splitlines()
    assert len(lines) == 4 and all("[cut:" in line for line in lines)  # every hit gets its share
    assert COUNTER.count_text(text) <= 400


async def test_a_hit_that_holds_the_query_word_for_word_is_shown_from_there(store: Store) -> None:
    """An agent's path, deep in a long page, is in the hit's share of the answer."""
    listing = "\n".join(f"aiohttp/module_{i}.py | {i} +-" for i in range(400))
    await MemoryStore(store).add(SCOPE, [card(f"Tool result (bash): {listing}", page=1, kind="page")])
    text = await ask(answers_for(store), SEARCH_MEMORY, {"query": "aiohttp/module_377.py"}, limit=200)
    assert "…aiohttp/module_377.py | 377" in text  # from the line that holds it
    assert "Tool result (bash)" not in text
    head = await ask(answers_for(store), SEARCH_MEMORY, {"query": "aiohttp/module_1.py"}, limit=200)
    assert "Tool result (bash): aiohttp/module_0.py" in head  # near the start: shown from the start


# --- the pure helpers ------------------------------------------------------------------------


def test_whole_number_and_page_ranges() -> None:
    assert [whole_number(v) for v in (7, 7.0, "07", "#7", "-7")] == [7, 7, 7, 7, -7]
    assert whole_number(10**12) == whole_number(1e30) == "a page number, not a number that large"
    assert page_ranges([3, 1, 2]) == "1, 2, 3"
    assert page_ranges([]) == ""
    many = [*range(1, 41), 42, *range(45, 61)]
    assert page_ranges(many) == "1-40, 42, 45-60"


async def test_answers_name_the_tools_as_this_request_offered_them(store: Store) -> None:
    # a client tool called ctxproxy_search_memory pushed ours to ctxproxy_search_memory_
    renamed = {RECALL_PAGE: "ctxproxy_recall_page_", SEARCH_MEMORY: "ctxproxy_search_memory_"}
    answers = answers_for(store, wire_names=renamed)
    assert (await ask(answers, RECALL_PAGE, {})).startswith('ctxproxy_recall_page_ needs "page_index"')
    gone = await ask(answers, RECALL_PAGE, {"page_index": 2})
    assert gone == "Page #2 is no longer stored; call ctxproxy_search_memory_ to find what it held."
    assert "Call ctxproxy_search_memory_ again" in await ask(answers, SEARCH_MEMORY, "{not json")


async def test_a_hit_that_holds_the_query_word_for_word_comes_first(store: Store) -> None:
    """A page that shares the query's words more often loses to the one that ran the command."""
    ran = "Assistant called bash(git log --stat -n 4 -- pkg/m7.py)\n" + "Tool: commit abc, a long listing\n" * 80
    decoys = [
        card(f"Notes on pkg m7 {i}: git log stat for pkg m7 py, pkg m7 again.", page=i, kind="page") for i in (1, 2, 3)
    ]
    await MemoryStore(store).add(SCOPE, [*decoys, card(ran, page=7, kind="page")])
    text = await ask(answers_for(store), SEARCH_MEMORY, {"query": "git log --stat -n 4 -- pkg/m7.py", "top_k": 1})
    assert text.startswith("1. [page 7]") and "pkg/m7.py" in text
