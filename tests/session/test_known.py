"""The per-process memo of each session's last request: reuse only what is really repeated."""

from __future__ import annotations

import orjson
import pytest

from proxy.errors import BadRequest
from proxy.server.chat_body import parse_body
from proxy.server.conversation import identify
from proxy.session import PrefixChain
from proxy.session.known import Known, KnownConversations
from proxy.tokens import TokenCounter


def convo(n: int, last: str = "next?") -> list[dict]:
    messages = [{"role": "system", "content": "be brief"}]
    for i in range(n):
        messages.append({"role": "user", "content": f"question {i}"})
        messages.append({"role": "assistant", "content": f"answer {i}"})
    messages.append({"role": "user", "content": last})
    return messages


def known(messages: list[dict]) -> Known:
    return Known(messages, PrefixChain.of(messages).digests, tuple(range(len(messages))), "enc")


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


def test_bounded_by_total_messages() -> None:
    memo = KnownConversations(max_messages=20)
    memo.remember("a", known(convo(4)))  # 10 messages
    memo.remember("b", known(convo(4)))
    memo.remember("c", known(convo(4)))  # evicts the least recently used, "a"
    assert memo.prefix("a", convo(4)) is None
    assert memo.prefix("c", convo(4)) is not None


def _identify(messages: list[dict], memo: KnownConversations, counter: TokenCounter):
    chat = parse_body(orjson.dumps({"model": "gpt-4o", "messages": messages}))
    return identify(chat, "t", None, counter, memo)


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


def test_new_messages_are_still_checked() -> None:
    counter, memo = TokenCounter(), KnownConversations()
    first = convo(2)
    _identify(first, memo, counter)
    with pytest.raises(BadRequest) as caught:
        _identify(first + [{"role": "robot", "content": "x"}], memo, counter)
    assert caught.value.param == f"messages[{len(first)}].role"
