"""Message digests and the prefix chain (DESIGN.md §2)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ctxproxy.session import PrefixChain, message_digest
from ctxproxy.session.digest import DIGEST_SIZE

CALL = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}
ASSISTANT_CALL: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [CALL]}
TOOL_RESULT = {"role": "tool", "tool_call_id": "call_1", "content": "42"}


def convo(n: int = 6) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."}]
    for i in range(1, n):
        role = "user" if i % 2 else "assistant"
        messages.append({"role": role, "content": f"message {i}"})
    return messages


def test_digest_is_fixed_size_bytes_and_deterministic() -> None:
    m = {"role": "user", "content": "hello"}
    d = message_digest(m)
    assert isinstance(d, bytes) and len(d) == DIGEST_SIZE
    assert message_digest(copy.deepcopy(m)) == d


def test_digest_stable_under_key_order() -> None:
    a = {"role": "assistant", "content": None, "tool_calls": [CALL], "name": "bot"}
    b = {
        "name": "bot",
        "tool_calls": [{"function": {"arguments": '{"q": "x"}', "name": "lookup"}, "type": "function", "id": "call_1"}],
        "content": None,
        "role": "assistant",
    }
    assert list(a) != list(b)
    assert message_digest(a) == message_digest(b)


def test_string_and_single_text_part_are_the_same_content() -> None:
    as_string = {"role": "user", "content": "hello"}
    as_part = {"role": "user", "content": [{"type": "text", "text": "hello"}]}
    assert message_digest(as_string) == message_digest(as_part)
    # Two parts, or a part with extra fields, are not the plain string.
    two_parts = {"role": "user", "content": [{"type": "text", "text": "hel"}, {"type": "text", "text": "lo"}]}
    assert message_digest(two_parts) != message_digest(as_string)
    image = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "hello"}}]}
    assert message_digest(image) != message_digest(as_string)


def test_none_fields_equal_absent_fields() -> None:
    assert message_digest({"role": "user", "content": "x", "name": None}) == message_digest(
        {"role": "user", "content": "x"}
    )


BASE: dict[str, Any] = {"role": "assistant", "content": "ok", "name": "bot", "tool_calls": [CALL]}


@pytest.mark.parametrize(
    "change",
    [
        {"role": "user"},
        {"content": "ok!"},
        {"content": [{"type": "text", "text": "ok"}, {"type": "text", "text": ""}]},
        {"name": "other"},
        {"tool_calls": [{**CALL, "id": "call_2"}]},
        {"tool_calls": [{**CALL, "function": {"name": "lookup", "arguments": '{"q": "y"}'}}]},
        {"tool_calls": [{**CALL, "function": {"name": "search", "arguments": '{"q": "x"}'}}]},
        {"tool_calls": [CALL, {**CALL, "id": "call_2"}]},
        {"tool_call_id": "call_1"},
        {"function_call": {"name": "f", "arguments": "{}"}},
    ],
    ids=lambda c: ",".join(c),
)
def test_digest_changes_with_identity_fields(change: dict[str, Any]) -> None:
    assert message_digest({**BASE, **change}) != message_digest(BASE)


def test_tool_call_id_distinguishes_tool_results() -> None:
    assert message_digest(TOOL_RESULT) != message_digest({**TOOL_RESULT, "tool_call_id": "call_2"})


@pytest.mark.parametrize(
    "extra",
    [
        {"refusal": None},
        {"annotations": []},
        {"audio": None},
        {"cache_control": {"type": "ephemeral"}},
        {"x_client_meta": {"id": 7}},
    ],
    ids=lambda e: ",".join(e),
)
def test_digest_ignores_unrelated_fields(extra: dict[str, Any]) -> None:
    assert message_digest({**BASE, **extra}) == message_digest(BASE)


def test_digest_ignores_extra_fields_inside_tool_calls() -> None:
    # A streaming client reassembles tool calls with an "index"; it is not part of the message.
    with_index = {**BASE, "tool_calls": [{**CALL, "index": 0}]}
    assert message_digest(with_index) == message_digest(BASE)


def test_chain_shape() -> None:
    messages = convo(4)
    chain = PrefixChain.of(messages)
    assert len(chain) == 4
    assert len(chain.hashes) == 5
    assert chain.prefix_hash(0) == b""
    assert chain.head == chain.hashes[4]
    assert chain.digests == tuple(message_digest(m) for m in messages)
    assert len(set(chain.hashes)) == 5  # every prefix is distinct
    assert PrefixChain.from_digests(chain.digests) == chain


def test_shared_prefixes_have_equal_hashes() -> None:
    short = convo(4)
    long = convo(8)
    a, b = PrefixChain.of(short), PrefixChain.of(long)
    for k in range(5):
        assert a.prefix_hash(k) == b.prefix_hash(k)
    assert a.head != b.head
    # The same messages serialised differently chain identically.
    respelled = [{**dict(reversed(list(m.items())))} for m in short]
    respelled[1] = {"content": [{"type": "text", "text": short[1]["content"]}], "role": "user"}
    assert PrefixChain.of(respelled).hashes == a.hashes


def test_edit_at_message_3_changes_hashes_from_3_on_only() -> None:
    original = convo(7)
    edited = copy.deepcopy(original)
    edited[3]["content"] = "message 3, edited"
    a, b = PrefixChain.of(original), PrefixChain.of(edited)
    # hashes[k] covers messages[:k]; message index 3 enters at hashes[4].
    for k in range(4):
        assert a.prefix_hash(k) == b.prefix_hash(k), k
    for k in range(4, len(original) + 1):
        assert a.prefix_hash(k) != b.prefix_hash(k), k
    # Digests after the edit are equal: only the chain carries the change forward.
    assert a.digests[4:] == b.digests[4:]
    assert a.digests[3] != b.digests[3]


def test_chain_is_order_sensitive() -> None:
    messages = convo(4)
    swapped = [messages[0], messages[2], messages[1], messages[3]]
    assert PrefixChain.of(messages).head != PrefixChain.of(swapped).head
    assert PrefixChain.of(messages).prefix_hash(1) == PrefixChain.of(swapped).prefix_hash(1)


def test_prefix_hashes_are_the_prefix_hash_of_each_length() -> None:
    chain = PrefixChain.of([{"role": "user", "content": f"message {i}"} for i in range(12)])
    wanted = [0, 1, 5, 5, 12, 3, 13, -1]
    assert chain.prefix_hashes(wanted) == {k: chain.prefix_hash(k) for k in (0, 1, 3, 5, 12)}
    assert chain.prefix_hashes([]) == {}


def test_a_hashed_chain_has_the_head_of_a_full_hash_whatever_came_before() -> None:
    digests = PrefixChain.of(convo(9)).digests
    first = PrefixChain.hashed(digests[:5])
    went_on = PrefixChain.hashed(digests, first)  # hashed on from the first one's state
    edited = PrefixChain.hashed((digests[0], message_digest({"role": "user", "content": "x"}), *digests[2:]), first)
    shorter = PrefixChain.hashed(digests[:3], went_on)
    for chain in (first, went_on, edited, shorter, PrefixChain.hashed(())):
        assert chain.head == PrefixChain(chain.digests).prefix_hash(len(chain.digests))
    assert went_on.head != edited.head
    assert first.head == PrefixChain.hashed(digests[:5], first).head  # the previous state is not consumed
