"""A request whose naming messages (through the first user message) are the very objects of its
session's last request takes that request's session key and digests instead of checking, hashing
and keying them again, and sums its counts and sizes on from that request's: it must identify
exactly as a request identified from scratch."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxproxy.cache import ByteLRU, json_size
from ctxproxy.errors import BadRequest
from ctxproxy.pipeline.identify import Identified, identify
from ctxproxy.session import PrefixChain, session_key
from ctxproxy.session.identity import identity_length
from ctxproxy.session.known import KnownConversations
from ctxproxy.tokens import TokenCounter
from ctxproxy.wire.incremental import RawBodies
from ctxproxy.wire.openai_chat import OPENAI_CHAT
from ctxproxy.wire.openai_chat.body import parse_body

COUNTER = TokenCounter()
SYSTEM = {"role": "system", "content": "be brief. " * 120}  # a body's first KiB is its conversation's fingerprint

# One step of a client: what it does to the conversation before sending it again.
_STEP = st.sampled_from(
    ["go_on", "go_on", "go_on", "same", "same", "edit_first_user", "edit_system", "edit_last", "drop_system"]
    + ["go_on_tool", "go_on_system", "edit_last_system", "edit_last_tool"]
)
_HEADER = st.sampled_from([None, None, "s-1", "s-2"])
_TENANT = st.sampled_from(["acme", "acme", "other"])


def _identified(found: Identified) -> tuple[Any, ...]:
    return found.key, found.chain.digests, tuple(found.tokens), found.systems, found.tool_at, found.total


def _step(messages: list[dict[str, Any]], step: str, n: int) -> list[dict[str, Any]]:
    out = list(messages)
    if step == "go_on":
        out += [{"role": "assistant", "content": f"answer {n}"}, {"role": "user", "content": f"question {n}"}]
    elif step == "edit_first_user":
        first = next((i for i, m in enumerate(out) if m["role"] == "user"), len(out) - 1)
        out[first] = {"role": "user", "content": f"edited {n}"}
    elif step == "edit_system" and out[0]["role"] == "system":
        out[0] = {"role": "system", "content": f"system {n} " + SYSTEM["content"]}
    elif step == "edit_last":
        out[-1] = {"role": "user", "content": f"regenerated {n}"}
    elif step == "go_on_tool":  # a tool call and its result, then a question
        call = {"id": f"c{n}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        out += [{"role": "assistant", "content": None, "tool_calls": [call]}]
        out += [{"role": "tool", "tool_call_id": f"c{n}", "content": f"result {n}"}, {"role": "user", "content": "go"}]
    elif step == "go_on_system":  # a system message among the new ones
        out += [{"role": "developer", "content": f"rule {n}"}, {"role": "user", "content": f"question {n}"}]
    elif step == "edit_last_system":
        out[-1] = {"role": "system", "content": f"rule {n}"}
    elif step == "edit_last_tool":
        out[-1] = {"role": "tool", "tool_call_id": "c0", "content": f"result {n}"}
    elif step == "drop_system" and out[0]["role"] == "system" and len(out) > 1:
        out = out[1:]
    return out


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_STEP, _HEADER, _TENANT), min_size=1, max_size=12))
def test_identifying_by_the_very_objects_is_identifying_from_scratch(steps: list[tuple[str, str | None, str]]) -> None:
    bodies = RawBodies(ByteLRU(1 << 24))
    known = KnownConversations()
    messages: list[dict[str, Any]] = [SYSTEM, {"role": "user", "content": "hi"}]
    for n, (step, header, tenant) in enumerate(steps):
        messages = _step(messages, step, n)
        raw = orjson.dumps({"model": "gpt-4o-mini", "messages": messages})
        turn = parse_body(raw, bodies.loader(tenant, header))
        fresh = identify(OPENAI_CHAT, parse_body(raw), tenant, header, COUNTER, KnownConversations())
        found = identify(OPENAI_CHAT, turn, tenant, header, COUNTER, known)
        assert _identified(found) == _identified(fresh)
        # Its prefix hashes, hashed on from the last request's chain (a new last message: from the
        # state before it), as hashed from scratch.
        assert found.chain.hashes == fresh.chain.hashes and found.chain.head == fresh.chain.head
        kept = known.last(found.key.store_id)  # its sums, kept from the last request's on: as summed anew
        assert kept is not None and (kept.token_sum, kept.size_sum) == (sum(kept.tokens), sum(kept.sizes))
        assert kept.sizes == tuple(json_size(m) for m in turn.messages)
        assert kept.systems == found.systems and kept.tool_at == found.tool_at
        assert found.total == sum(found.tokens)
        anchor = identity_length(messages)
        assert found.key == session_key(tenant, messages, PrefixChain.of(messages[:anchor]), header)


def test_a_conversation_that_goes_on_is_named_by_its_last_request() -> None:
    bodies, known = RawBodies(ByteLRU(1 << 24)), KnownConversations()
    first = [SYSTEM, {"role": "user", "content": "hi"}]
    later = [*first, {"role": "assistant", "content": "hello"}, {"role": "user", "content": "more"}]
    turns = [
        parse_body(orjson.dumps({"model": "m", "messages": m}), bodies.loader("acme", None)) for m in (first, later)
    ]
    assert known.named("acme", None, turns[0].messages) is None
    one = identify(OPENAI_CHAT, turns[0], "acme", None, COUNTER, known)
    named = known.named("acme", None, turns[1].messages)
    assert named is not None and named.key == one.key and named.anchor == 2
    assert known.named("other", None, turns[1].messages) is None  # another tenant's
    assert known.named("acme", "s-1", turns[1].messages) is None  # another session header's
    assert known.named("acme", None, [dict(m) for m in turns[1].messages]) is None  # equal, not the same objects


def test_a_bad_session_header_is_refused_however_the_conversation_is_known() -> None:
    bodies, known = RawBodies(ByteLRU(1 << 24)), KnownConversations()
    raw = orjson.dumps({"model": "m", "messages": [SYSTEM, {"role": "user", "content": "hi"}]})
    identify(OPENAI_CHAT, parse_body(raw, bodies.loader("acme", None)), "acme", None, COUNTER, known)
    with pytest.raises(BadRequest):
        identify(
            OPENAI_CHAT, parse_body(raw, bodies.loader("acme", "bad header!")), "acme", "bad header!", COUNTER, known
        )
