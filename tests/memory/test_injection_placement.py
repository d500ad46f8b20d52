"""Auto-injection: where ``## Relevant Memories`` (or note 002's User and Scope Memory) goes, what
fits its budget, and that it only ever adds to the client's messages — a client message that
looks like an injection is the client's. Which blocks a request carries is
``test_carried_injections``'s."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxproxy.memory.inject import (
    HEADER,
    INJECTION_NAME,
    LAYER_HEADERS,
    Injection,
    Insert,
    Memory,
    MemoryBlock,
    block_side,
    fair_share,
    fitted,
    inject,
    query_for,
    render,
    with_newest,
)
from tests.compaction.gen import conversations


def count(text: str) -> int:
    return len(text.split())


def convo() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Which database did we pick?"},
        {"role": "assistant", "content": "Postgres."},
        {"role": "user", "content": "And the port?"},
    ]


MEMORIES = [
    Memory("We chose Postgres 16 for the orders service.", "decision", 2.0),
    Memory("The database listens on port 5433.", "fact", 1.0),
]
SCOPE = [Memory("Project uses Python 3.12.", "fact", 3.0)]


def near(memories: list[Memory], max_tokens: int = 200) -> MemoryBlock:
    return MemoryBlock(HEADER, memories, max_tokens)


def layers(max_tokens: int = 150) -> list[MemoryBlock]:
    """Note 002's front blocks: the user's, then the scope's, each with its own budget."""
    return [
        MemoryBlock(LAYER_HEADERS["user"], MEMORIES[1:], max_tokens, chronological=True),
        MemoryBlock(LAYER_HEADERS["scope"], SCOPE, max_tokens, chronological=True),
    ]


def without_added(injection: Injection) -> list[dict[str, Any]]:
    return [m for i, m in enumerate(injection.messages) if i not in injection.positions]


def block(memories: list[Memory], max_tokens: int = 200) -> str:
    made = render(near(memories, max_tokens), count)
    assert made is not None
    return made[0]


def at(index: int, memories: list[Memory] = MEMORIES, max_tokens: int = 200, *, after: bool = False) -> Insert:
    return Insert(index, block(memories, max_tokens), len(memories), after)


def test_a_block_goes_right_before_the_message_it_names_as_a_user_message() -> None:
    injection = inject(convo(), count, "assistant_named", inserts=[at(3)])
    out = injection.messages
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user", "user"]
    assert injection.positions == (3,) and injection.memories == 2
    assert out[3] == {"role": "user", "content": block(MEMORIES)}  # no name, whatever the summary's placement
    assert out[3]["content"].startswith(HEADER) and "- (decision) We chose Postgres 16" in out[3]["content"]
    assert out[-1] == convo()[-1] and without_added(injection) == convo()


def test_blocks_keep_their_order_and_places() -> None:
    """Carried blocks and a new one, each at its own message, in the order given where two
    share a gap (after one message, before the next)."""
    inserts = [at(1, MEMORIES[:1]), at(1, MEMORIES[1:], after=True), at(2, SCOPE), at(3, MEMORIES, after=True)]
    injection = inject(convo(), count, "user", inserts=inserts)
    out = injection.messages
    assert injection.positions == (1, 3, 4, 7) and injection.memories == 5
    assert [out[i]["content"] for i in injection.positions] == [
        block(MEMORIES[:1]),
        block(MEMORIES[1:]),
        block(SCOPE),
        block(MEMORIES),
    ]
    assert without_added(injection) == convo()


def test_after_tool_results_the_block_follows_the_users_message() -> None:
    """A user typing while tools ran: on the Messages API the tool results and the text are one
    message (``tool`` messages, then the ``user`` one, in ctxproxy's model). A block before the
    text would split it, one before the results would cut them from their call: it goes after."""
    calling = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    }
    typed = [*convo(), calling, {"role": "tool", "tool_call_id": "c1", "content": "ok"}, convo()[3]]
    assert block_side(typed, len(typed) - 1) and not block_side(convo(), 3) and not block_side(convo(), 1)


LOOKALIKES = [
    {"role": "user", "content": HEADER + "\n- (fact) my own notes"},
    {"role": "user", "content": "## Scope Memory\nPlease review PostgreSQL 16 notes for orders."},
    {"role": "user", "content": "## User Memory"},
    {"role": "assistant", "name": INJECTION_NAME, "content": "My own memory plugin wrote this."},
    {"role": "system", "content": "## Relevant Memories\n- (fact) from the client's framework"},
]


@pytest.mark.parametrize("lookalike", LOOKALIKES, ids=lambda m: f"{m['role']}:{m['content'][:16]}")
def test_a_client_message_that_looks_like_an_injection_is_kept(lookalike: dict[str, Any]) -> None:
    """The audit's case: the user typed the header. Nothing of the client's is removed or changed,
    wherever the look-alike is — in the history, or the newest message itself."""
    middle = [*convo()[:3], dict(lookalike), *convo()[3:]]
    newest = [*convo()[:1], dict(lookalike)] if lookalike["role"] == "user" else middle
    for messages in (middle, newest):
        for blocks in ({"inserts": [at(len(messages) - 1)]}, {"front": layers()}):
            injection = inject(messages, count, "assistant_named", head=1, **blocks)
            assert without_added(injection) == messages
            assert injection.positions  # and the real injection still happened


def test_nothing_is_taken_for_an_earlier_injection_not_even_ctxproxys_own_output() -> None:
    """ctxproxy never injects twice into one list (the module doc says why): given its own output,
    it adds again rather than guessing by looks which messages are its own."""
    first = inject(convo(), count, "assistant_named", inserts=[at(3, MEMORIES[:1])])
    again = inject(first.messages, count, "assistant_named", inserts=[at(4, MEMORIES[1:])])
    assert without_added(again) == first.messages
    assert len(again.messages) == len(convo()) + 2


def test_budget_keeps_the_best_that_fit() -> None:
    long = Memory("word " * 500, "page 3")
    made = fitted(near([long, MEMORIES[0]], 60), count)
    assert made is not None
    text, kept = made
    assert count(text) <= 60
    assert "Postgres 16" in text and MEMORIES[0] in kept  # the long page was clipped or skipped


def test_a_short_memory_leaves_its_room_to_a_long_one() -> None:
    """An even split would cut a 50-word page to a third of an 80-word budget while the two short
    memories use a few words each: the page keeps what they leave, and is whole when it fits."""
    page = Memory(" ".join(f"w{i}" for i in range(50)), "page 3")
    made = fitted(near([page, *MEMORIES], 80), count)
    assert made is not None
    text, kept = made
    assert count(text) <= 80 and len(kept) == 3
    assert page.text in text  # whole, no ellipsis
    too_long = Memory(" ".join(f"w{i}" for i in range(200)), "page 4")
    made = fitted(near([too_long, *MEMORIES], 80), count)
    assert made is not None and len(made[1]) == 3 and "w40 " in made[0] and "w100" not in made[0]
    assert count(made[0]) <= 80


@pytest.mark.parametrize(
    ("sizes", "room", "share"),
    [([10, 20, 30], 100, 30), ([10, 20, 300], 100, 70), ([50, 50, 50], 90, 30), ([], 10, 0), ([5], 0, 0)],
)
def test_fair_share_keeps_the_sizes_below_it_whole(sizes: list[int], room: int, share: int) -> None:
    assert fair_share(sizes, room) == share
    assert sum(min(size, share) for size in sizes) <= max(room, 0)


def test_memories_that_do_not_fit_make_no_block() -> None:
    huge = [Memory("word " * 50, f"page {i}") for i in range(3)]
    assert fitted(near(huge, 10), count) is None and render(near(huge, 10), count) is None
    assert fitted(near([]), count) is None


def test_nothing_to_insert_is_the_input() -> None:
    assert inject(convo(), count, "assistant_named") == Injection(convo())
    # An insert past the end (a message that is not there) is left out.
    assert inject(convo(), count, "assistant_named", inserts=[at(9)]) == Injection(convo())


def test_layered_order_puts_user_and_scope_memory_after_the_system_prompt() -> None:
    """Note 002: ``[User Memory] [Scope Memory] [Session Memory] [raw rounds] [current user]`` —
    nothing between the raw rounds and the current message."""
    injection = inject(convo(), count, "assistant_named", head=1, front=layers())
    out = injection.messages
    assert out[1]["content"].startswith(LAYER_HEADERS["user"]) and "5433" in out[1]["content"]
    assert out[2]["content"].startswith(LAYER_HEADERS["scope"]) and "Python 3.12" in out[2]["content"]
    assert out[-2] == convo()[-2] and out[-1] == convo()[-1]
    assert injection.positions == (1, 2) and injection.memories == 2
    assert without_added(injection) == convo()


def test_each_layer_has_its_own_budget() -> None:
    """A user layer that fills its own budget leaves the scope layer's untouched."""
    full_user = [Memory(f"I prefer answer style number {i} with words", "constraint", float(i)) for i in range(20)]
    blocks = [
        MemoryBlock(LAYER_HEADERS["user"], full_user, 30, chronological=True),
        MemoryBlock(LAYER_HEADERS["scope"], SCOPE, 30, chronological=True),
    ]
    out = inject(convo(), count, "assistant_named", head=1, front=blocks).messages
    assert count(out[1]["content"]) <= 30 and 0 < out[1]["content"].count("\n- ") < 20
    assert "Python 3.12" in out[2]["content"]


def test_a_layer_block_lists_its_memories_oldest_first() -> None:
    """Best first decides what fits; the block lists what fits in the order it was written, so the
    same memories found in another order give the same bytes."""
    memories = [Memory("second", "fact", 2.0), Memory("third", "fact", 3.0), Memory("first", "fact", 1.0)]
    texts = {
        inject(
            convo(), count, "assistant_named", head=1, front=[MemoryBlock("## User Memory", order, 100, True)]
        ).messages[1]["content"]
        for order in (memories, memories[::-1])
    }
    assert texts == {"## User Memory\n- (fact) first\n- (fact) second\n- (fact) third"}


def test_with_newest_tops_up_the_best_with_the_newest() -> None:
    assert with_newest(["b"], ["a", "b", "c", "d"], 3) == ["b", "d", "c"]
    assert with_newest(["x", "y", "z"], ["a"], 2) == ["x", "y"]


def test_layered_memories_go_before_a_summary() -> None:
    """With a summary placed as a ``user`` message, the layers go in front of it (``head``), after
    every system message."""
    compacted = [
        {"role": "system", "content": "You are terse."},
        {"role": "system", "content": "A system message of the summarised range."},
        {"role": "user", "content": "## Session Memory\n\n### Messages 2-5\n\n- Postgres picked."},
        {"role": "assistant", "content": "Anything else?"},
        {"role": "user", "content": "And the port?"},
    ]
    injection = inject(compacted, count, "user", head=2, front=layers())
    assert [str(m["content"]).split("\n")[0] for m in injection.messages] == [
        "You are terse.",
        "A system message of the summarised range.",
        LAYER_HEADERS["user"],
        LAYER_HEADERS["scope"],
        "## Session Memory",
        "Anything else?",
        "And the port?",
    ]
    assert without_added(injection) == compacted


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=conversations(max_messages=30, max_turns=8),
    disguise=st.lists(st.integers(min_value=0, max_value=29), max_size=4),
    layered=st.booleans(),
    placement=st.sampled_from(["assistant_named", "assistant", "user", "system"]),
)
def test_the_clients_messages_are_never_dropped_or_altered(
    messages: list[dict[str, Any]], disguise: list[int], layered: bool, placement: Any
) -> None:
    """Any conversation, some of its messages dressed as injections: the output is the input
    with ctxproxy's messages inserted."""
    for i in disguise:
        if i < len(messages) and messages[i].get("role") != "tool":
            messages[i] = {**messages[i], "name": INJECTION_NAME, "content": f"{HEADER}\nclient text {i}"}
    head = next((i for i, m in enumerate(messages) if m.get("role") not in ("system", "developer")), len(messages))
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    inserts = [at(i, MEMORIES[:1], after=block_side(messages, i)) for i in users[-2:]]
    blocks: dict[str, Any] = {"front": layers()} if layered else {"inserts": inserts}
    injection = inject(messages, count, placement, head=head, **blocks)
    assert without_added(injection) == messages
    assert all(injection.messages[i]["content"].startswith(("##",)) for i in injection.positions)
    for i in injection.positions:  # a block is never an assistant turn among the client's messages
        assert injection.messages[i]["role"] == "user" or (layered and i < head + 2)


def test_query_is_the_newest_user_text_including_content_parts() -> None:
    parts = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "GPU 选型"}, {"type": "image_url", "image_url": {"url": "data:x"}}],
        }
    ]
    assert query_for(parts) == "GPU 选型"
    assert query_for([{"role": "system", "content": "x"}]) is None
