"""Property tests: no body, however malformed, makes parsing or counting fail with anything
but a BadRequest (an ``Uncompactable`` one among them, for what ctxproxy forwards as sent);
every accepted body can be counted and digested."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxproxy.errors import BadRequest
from ctxproxy.session import PrefixChain
from ctxproxy.tokens import TokenCounter
from ctxproxy.wire.openai_chat.body import parse_chat_body
from tests.chat_bodies import bodies

COUNTER = TokenCounter()


@settings(max_examples=400, deadline=None)
@given(bodies)
def test_any_body_is_accepted_or_refused_with_bad_request(body: object) -> None:
    raw = orjson.dumps(body)
    try:
        chat = parse_chat_body(raw)
    except BadRequest as exc:
        assert exc.status == 400 and exc.message
        return
    assert chat.raw == raw
    if chat.as_sent is not None:  # forwarded as sent: nothing of it is counted or digested
        assert chat.as_sent.param and chat.messages == []
        return
    # Accepted: the rest of the request path must be able to handle it.
    chain = PrefixChain.of(chat.messages)
    assert COUNTER.count_messages(chat.messages, chain.digests, chat.model) >= 3 + 3 * len(chat.messages)
    assert COUNTER.count_tools(chat.body.get("tools"), chat.model) >= 0
    assert chat.raw == raw


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_crash_the_parser(raw: bytes) -> None:
    try:
        parse_chat_body(raw)
    except BadRequest:
        pass
