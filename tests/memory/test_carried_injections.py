"""Note 001's ``## Relevant Memories`` carried with the conversation (``ctxproxy.memory.carry``):
made once at the user message it answers, re-sent byte for byte at that place, a new block only
for memories no carried block holds, within what the carried ones leave of the budget."""

from __future__ import annotations

from typing import Any

from ctxproxy.memory.carry import Anchor, Carried, carry
from ctxproxy.memory.inject import HEADER, Memory, MemoryBlock
from ctxproxy.session.digest import PrefixChain

BUDGET, TOP_K = 200, 5  # a full block: 5 memories of 40 tokens each


def count(text: str) -> int:
    return len(text.split())


def memory(n: int, words: int = 6) -> Memory:
    return Memory(f"fact {n} " + "word " * (words - 2), "fact", float(n), f"id{n}")


def wanted(*ns: int, words: int = 6) -> MemoryBlock:
    return MemoryBlock(HEADER, [memory(n, words) for n in ns], BUDGET)


def chat(questions: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": "terse"}]
    for n in range(questions):
        out.append({"role": "user", "content": f"question {n}"})
        if n < questions - 1:
            out.append({"role": "assistant", "content": f"answer {n}"})
    return out


def step(previous: Carried | None, messages: list[dict[str, Any]], found: MemoryBlock | None, **kw: Any) -> Carried:
    newest = max(i for i, m in enumerate(messages) if m["role"] == "user")
    return carry(previous, messages, PrefixChain.of(messages), newest, kw.pop("cut", 0), found, TOP_K, count, **kw)


def held(carried: Carried) -> list[tuple[int, str]]:
    return [(block.at.index, block.text) for block in carried.placed]


def test_a_block_is_made_once_at_its_user_message_and_then_carried_as_it_was() -> None:
    first = step(None, chat(1), wanted(1, 2))
    [(at, text)] = held(first)
    assert at == 1 and not first.placed[0].after  # right before the question
    assert text.startswith(HEADER) and "fact 1" in text and "fact 2" in text
    # The next turn finds the same memories: nothing new, the block is sent again as it was.
    second = step(first, chat(2), wanted(2, 1))
    assert held(second) == held(first)
    assert second.asked == Anchor(3, PrefixChain.of(chat(2)).prefix_hash(4))


def test_only_memories_no_carried_block_holds_make_a_new_block_at_the_newest_message() -> None:
    first = step(None, chat(1), wanted(1, 2))
    second = step(first, chat(2), wanted(2, 3, 1))
    assert held(second)[0] == held(first)[0]  # the old block's bytes and place
    (at, text) = held(second)[1]
    assert at == 3 and "fact 3" in text and "fact 1" not in text and "fact 2" not in text
    assert second.placed[1].count == 1


def test_the_same_newest_message_gets_no_new_block() -> None:
    """An agent's tool loop (or a retry) asks with the same user message: whatever the search
    finds now, the request carries what the first one got."""
    first = step(None, chat(1), wanted(1))
    loop = [
        *chat(1),
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": {}}]},
        {"role": "tool", "tool_call_id": "c", "content": "ok"},
    ]
    assert held(step(first, loop, wanted(7, 8))) == held(first)
    # Nothing found the first time: still nothing new for the same message.
    empty = step(None, chat(1), None)
    assert step(empty, loop, wanted(7)).placed == ()


def test_an_edited_history_does_not_get_the_block_of_the_message_it_changed() -> None:
    first = step(None, chat(2), wanted(1))
    edited = chat(2)
    edited[1] = {"role": "user", "content": "question 0, edited"}
    again = step(first, edited, wanted(1))
    [(at, text)] = held(again)  # made again for the new history, not carried
    assert at == 3 and again.placed[0].at != first.placed[0].at
    assert text == held(first)[0][1]


def test_a_compaction_that_covers_the_message_drops_its_block() -> None:
    first = step(None, chat(1), wanted(1))
    later = step(first, chat(3), wanted(1, 2), cut=3)  # messages 1-2 summarised
    [(at, text)] = held(later)
    assert at == 5 and "fact 1" in text and "fact 2" in text  # chosen again


def test_a_newest_message_the_summary_covers_gets_no_block() -> None:
    assert step(None, chat(2), wanted(1), cut=4).placed == ()


def test_the_carried_blocks_share_one_budget() -> None:
    """Each new memory gets the room it would have in a full block; once the carried blocks have
    used the budget, new memories wait for a compaction (the cache is worth more)."""
    full = step(None, chat(1), wanted(1, 2, 3, 4, words=30))  # 4 x 33 tokens: 139 of 200 with the header
    more = step(full, chat(2), wanted(5, 6, 7, words=30))  # 61 left: one share of 40
    assert [block.count for block in more.placed] == [4, 1]
    assert "fact 5" in more.placed[1].text and "fact 6" not in more.placed[1].text
    assert sum(block.tokens for block in more.placed) <= BUDGET
    none_left = step(more, chat(3), wanted(8, words=30))
    assert held(none_left) == held(more)


def test_a_message_that_opens_with_tool_results_gets_its_block_after_it() -> None:
    typed = [
        *chat(1),
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": {}}]},
        {"role": "tool", "tool_call_id": "c", "content": "ok"},
        {"role": "user", "content": "also check the other one"},
    ]
    made = step(step(None, chat(1), None), typed, wanted(1))
    assert [(block.at.index, block.after) for block in made.placed] == [(4, True)]


def test_a_block_holding_a_deleted_memory_is_not_sent_again() -> None:
    first = step(None, chat(1), wanted(1, 2))
    assert first.ids == {"id1", "id2"}
    assert step(first, chat(2), None, gone=frozenset({"id2"})).placed == ()
    assert held(step(first, chat(2), None, gone=frozenset({"id9"}))) == held(first)
