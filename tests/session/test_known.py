"""The per-process memo of each session's last request: reuse only what is really repeated."""

from __future__ import annotations

import sys
import tracemalloc

import orjson
import pytest

from ctxproxy.cache import ENTRY_BYTES, ByteLRU, json_size
from ctxproxy.errors import BadRequest
from ctxproxy.pipeline.identify import identify
from ctxproxy.session import PrefixChain
from ctxproxy.session.known import Known, KnownConversations, message_sizes
from ctxproxy.tokens import TokenCounter
from ctxproxy.wire.openai_chat import OPENAI_CHAT
from ctxproxy.wire.openai_chat.body import parse_body


def convo(n: int, last: str = "next?") -> list[dict]:
    messages = [{"role": "system", "content": "be brief"}]
    for i in range(n):
        messages.append({"role": "user", "content": f"question {i}"})
        messages.append({"role": "assistant", "content": f"answer {i}"})
    messages.append({"role": "user", "content": last})
    return messages


def known(messages: list[dict]) -> Known:
    digests = PrefixChain.of(messages).digests
    return Known(messages, digests, tuple(range(len(messages))), "enc", message_sizes(messages))


def test_continued_conversation_reuses_everything_it_saw() -> None:
    memo = KnownConversations()
    first = convo(3)
    memo.remember("s", known(first))
    later = first + [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}]
    found = memo.prefix("s", later)
    assert found is not None and found[1] == len(first)


def test_edited_last_message_reuses_all_but_it() -> None:
    memo = KnownConversations()
    first = convo(3, last="original")
    memo.remember("s", known(first))
    found = memo.prefix("s", convo(3, last="edited"))
    assert found is not None and found[1] == len(first) - 1


def test_edit_in_the_middle_reuses_nothing() -> None:
    memo = KnownConversations()
    first = convo(3)
    memo.remember("s", known(first))
    edited = convo(3)
    edited[2] = {"role": "user", "content": "changed"}
    assert memo.prefix("s", edited + [{"role": "user", "content": "x"}]) is None
    assert memo.prefix("other", first) is None


def test_bounded_by_bytes() -> None:
    cost = known(convo(4)).nbytes + len("a") + 100 + ENTRY_BYTES  # generous for the key
    memo = KnownConversations(ByteLRU(2 * cost))  # room for two
    memo.remember("a", known(convo(4)))
    memo.remember("b", known(convo(4)))
    assert memo.prefix("a", convo(4)) is not None  # a is now more recent than b
    memo.remember("c", known(convo(4)))  # evicts the least recently used, "b"
    assert memo.prefix("b", convo(4)) is None
    assert memo.prefix("a", convo(4)) is not None and memo.prefix("c", convo(4)) is not None
    assert memo.nbytes <= 2 * cost


def test_a_request_over_the_whole_budget_is_not_kept() -> None:
    memo = KnownConversations(ByteLRU(100_000))
    memo.remember("s", known(convo(1)))
    big = convo(1, last="x" * 100_000)
    memo.remember("s", known(big))
    assert memo.prefix("s", big) is None and memo.prefix("s", convo(1)) is None
    assert memo.nbytes == 0


def test_an_entry_costs_at_least_what_its_messages_hold() -> None:
    raw = orjson.dumps(convo(50, last="é" * 50_000))
    tracemalloc.start()
    try:
        messages = orjson.loads(raw)
        allocated, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    entry = known(messages)
    assert entry.nbytes >= allocated
    assert sum(entry.sizes) == json_size(messages) - sys.getsizeof(messages)  # the list is counted apart


def _identify(messages: list[dict], memo: KnownConversations, counter: TokenCounter):
    chat = parse_body(orjson.dumps({"model": "gpt-4o", "messages": messages}))
    return identify(OPENAI_CHAT, chat, "t", None, counter, memo)


def test_identify_matches_a_cold_computation() -> None:
    counter, memo = TokenCounter(), KnownConversations()
    first = convo(5)
    _identify(first, memo, counter)
    later = first + [{"role": "assistant", "content": "sure"}, {"role": "user", "content": "and then?"}]
    warm = _identify(later, memo, counter)
    cold = _identify(later, KnownConversations(), TokenCounter())
    assert warm.reused == len(first)
    assert cold.reused == 0
    assert warm.chain == cold.chain
    assert warm.tokens == cold.tokens
    assert warm.key == cold.key
    # The prefix's sizes were reused, the new messages measured: the same as measuring them all.
    remembered = memo.prefix(warm.key.store_id, later)
    assert remembered is not None and remembered[0].sizes == tuple(json_size(m) for m in later)


def test_the_first_tool_result_is_kept_with_the_known_conversation() -> None:
    """``tool_at``: found among the new messages only, and the same as a cold scan's, edits too."""
    counter, memo = TokenCounter(), KnownConversations()
    first = convo(5)
    assert _identify(first, memo, counter).tool_at is None
    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "f", "arguments": "{}"}}]}  # fmt: skip
    result = {"role": "tool", "tool_call_id": "c1", "content": "42"}
    later = [*first, call, result, {"role": "user", "content": "and then?"}]
    assert _identify(later, memo, counter).tool_at == len(first) + 1
    more = [*later, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "more?"}]
    warm = _identify(more, memo, counter)
    assert warm.reused == len(later) and warm.tool_at == len(first) + 1
    assert _identify(more, KnownConversations(), TokenCounter()).tool_at == len(first) + 1
    edited = [*first, {"role": "assistant", "content": "no tools"}, {"role": "user", "content": "fine"}]
    assert _identify(edited, memo, counter).tool_at is None  # the result was after the edit


def test_new_messages_are_still_checked() -> None:
    counter, memo = TokenCounter(), KnownConversations()
    first = convo(2)
    _identify(first, memo, counter)
    with pytest.raises(BadRequest) as caught:
        _identify(first + [{"role": "robot", "content": "x"}], memo, counter)
    assert caught.value.param == f"messages[{len(first)}].role"
