"""Incremental body parsing equals a full parse, whatever the client sends next: random
conversations that go on, are edited, fork, reorder their fields, change their whitespace,
name ``messages`` twice or break the JSON (``ctxproxy.wire.incremental``)."""

from __future__ import annotations

import json
import sys
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxproxy.cache import ByteLRU
from ctxproxy.errors import BadRequest
from ctxproxy.wire.incremental import RawBodies, _last_or_all_but, load_incremental, locate

TEXT = st.text(alphabet=st.sampled_from('ab "\\\n\t{}[],:é€😀\u2028'), max_size=12)
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant", "tool"]), "content": TEXT},
    optional={"name": TEXT, "extra": st.lists(st.integers(-(2**63), 2**63 - 1) | TEXT | st.none(), max_size=3)},
)
FIELDS = st.dictionaries(
    st.sampled_from(["model", "stream", "tools", "user", "n"]), st.integers(-(2**63), 2**63 - 1) | TEXT, max_size=3
)


def encode(body: dict[str, Any], style: int) -> bytes:
    """One of several ways clients serialise a body."""
    if style == 0:
        return orjson.dumps(body)
    if style == 1:
        return json.dumps(body).encode()
    if style == 2:
        return json.dumps(body, indent=2, ensure_ascii=False).encode()
    return (" " + json.dumps(body, separators=(" ,", " : ")) + "\n").encode()


def ordered(fields: dict[str, Any], messages: list[Any], where: int, key: str, pad: bool = False) -> dict[str, Any]:
    """The body with ``messages`` under ``key`` at position ``where`` among its fields (after a
    first field of 1 KiB with ``pad``: bodies are told apart by their first KiB, so small ones
    are never extended)."""
    items = [(name, value) for name, value in fields.items() if name != key]
    where = min(where, len(items))
    return dict([*([("pad", "p" * 1100)] if pad else []), *items[:where], (key, messages), *items[where:]])


# Members written after the last field, kept for the requests that follow (equal trailers, then
# not): a head's key again, a key twice, a second ``messages``, blanks, a dangling comma.
EXTRA = [
    b"",
    b',"model":"z"',
    b',"n":1,"n":[2,{"m":3}]',
    b' ,\n "tools" : [ {"type":"function"} ] ,"user":null ',
    b',"messages":[],"input":[],"contents":[]',
    b"\n\t ",
    b",",
    b',"x":1,',
]
EDIT = st.one_of(
    st.tuples(st.just("append"), st.lists(MESSAGE, min_size=1, max_size=3)),
    st.tuples(st.just("edit_last"), MESSAGE),
    st.tuples(st.just("fork"), st.integers(0, 8), st.lists(MESSAGE, max_size=3)),
    st.tuples(st.just("reorder"), st.integers(0, 4)),
    st.tuples(st.just("restyle"), st.integers(0, 3)),
    st.tuples(st.just("fields"), FIELDS),
    st.tuples(st.just("duplicate_key"), st.lists(MESSAGE, max_size=2)),
    st.tuples(st.just("break"), st.integers(0, 40)),
    st.tuples(st.just("same")),
    st.tuples(st.just("extra"), st.sampled_from(EXTRA)),
)


def expected(raw: bytes) -> dict[str, Any] | str:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return "invalid"
    return body if isinstance(body, dict) else "not an object"


def loaded(load: Any, raw: bytes) -> dict[str, Any] | str:
    try:
        return load(raw, "`model` and `messages`")  # type: ignore[no-any-return]
    except BadRequest as error:
        return "invalid" if error.code == "invalid_json" else "not an object"


def as_parsed(load: Any, raw: bytes) -> tuple[Any, list[str]]:
    """What ``load`` gives for ``raw``, with its keys in order, as a full parse gives them."""
    got, want = loaded(load, raw), expected(raw)
    assert (got, list(got) if isinstance(got, dict) else []) == (want, list(want) if isinstance(want, dict) else [])
    return got, list(got) if isinstance(got, dict) else []


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    key=st.sampled_from(["messages", "input", "contents"]),  # chat and Messages; Responses; Gemini
    first=st.lists(MESSAGE, min_size=1, max_size=6),
    fields=FIELDS,
    edits=st.lists(EDIT, min_size=1, max_size=8),
    pad=st.booleans(),
)
def test_every_request_parses_as_a_full_parse_would(
    key: str, first: list[Any], fields: dict[str, Any], edits: list[Any], pad: bool
) -> None:
    load = RawBodies(ByteLRU(1 << 24)).loader("acme", None, key)
    messages, where, style, extra = first, 1, 0, b""
    raw = encode(ordered(fields, messages, where, key, pad), style)
    as_parsed(load, raw)
    for edit in edits:
        kind = edit[0]
        if kind == "append":
            messages = [*messages, *edit[1]]
        elif kind == "edit_last":
            messages = [*messages[:-1], edit[1]]
        elif kind == "fork":
            messages = [*messages[: edit[1]], *edit[2]]
        elif kind == "reorder":
            where = edit[1]
        elif kind == "restyle":
            style = edit[1]
        elif kind == "fields":
            fields = edit[1]
        elif kind == "extra":
            extra = edit[1]
        raw = encode(ordered(fields, messages, where, key, pad), style)
        if extra:
            raw = raw.rstrip()[:-1] + extra + b"}"
        if kind == "duplicate_key":  # a second top-level ``messages`` after the first: the last wins
            raw = raw.rstrip()[:-1] + b',"' + key.encode() + b'":' + orjson.dumps(edit[1]) + b"}"
        elif kind == "break":
            raw = raw[: edit[1]] + raw[edit[1] + 1 :]
        as_parsed(load, raw)


def test_a_conversation_that_goes_on_parses_only_its_tail() -> None:
    """The repeated messages are the previous request's objects; the layout's ends are those a
    full scan finds."""
    messages = [{"role": "user", "content": f"q{i} é"} for i in range(50)]
    first = orjson.dumps({"model": "m", "messages": messages[:40], "tools": [{"messages": 1}]})
    second = orjson.dumps({"model": "m", "messages": messages, "tools": [{"messages": 1}]})
    before = orjson.loads(first)
    layout = locate(first, tuple(before["messages"]))
    assert layout is not None
    body, extended = load_incremental(second, layout, "x")
    assert body == orjson.loads(second)
    assert extended is not None
    assert all(a is b for a, b in zip(body["messages"][:40], before["messages"], strict=False))
    located = locate(second, tuple(body["messages"]))
    assert located is not None and located.ends == extended.ends


@pytest.mark.parametrize(
    "raw",
    [b'{"messages": [], "messages": [{"role": "user"}]}', b'{"model": "m"}', b'{"messages": "no"}', b"[1]"],
)
def test_bodies_without_one_messages_list_have_no_layout(raw: bytes) -> None:
    body = orjson.loads(raw)
    messages = body.get("messages") if isinstance(body, dict) else None
    assert locate(raw, tuple(messages) if isinstance(messages, list) else ()) is None


def test_tenants_never_share_a_layout() -> None:
    """One tenant's body is never extended from another tenant's: each finds only its own."""
    bodies = RawBodies(ByteLRU(1 << 24))
    messages = [{"role": "user", "content": "same start " * 200}, {"role": "assistant", "content": "a"}]
    raw = orjson.dumps({"model": "m", "messages": messages})
    acme = bodies.loader("acme", None)
    acme(raw, "x")
    longer = orjson.dumps({"model": "m", "messages": [*messages, {"role": "user", "content": "b"}]})
    other = bodies.loader("other", None)(longer, "x")
    mine = acme(longer, "x")
    assert other == mine == orjson.loads(longer)
    assert other["messages"][0] is not mine["messages"][0]


def test_a_fingerprint_shared_by_large_bodies_keeps_what_fits() -> None:
    """Conversations that share their first KiB (one agent's system prompt) and are each larger
    than the cache allows for all of them together: the newest that fit are kept, and the
    newest one goes on incrementally."""
    cache: ByteLRU[Any, Any] = ByteLRU(600_000)
    load = RawBodies(cache).loader("acme", None)
    system = {"role": "system", "content": "shared prompt " * 100}
    bodies = [[system, {"role": "user", "content": f"conversation {i} " + "x" * 60_000}] for i in range(10)]
    parsed = [load(orjson.dumps({"model": "m", "messages": messages}), "x") for messages in bodies]
    assert 0 < cache.nbytes <= 600_000
    again = orjson.dumps({"model": "m", "messages": [*bodies[-1], {"role": "assistant", "content": "a"}]})
    assert load(again, "x")["messages"][1] is parsed[-1]["messages"][1]


@pytest.mark.parametrize("depth", [900, 1020, 5000])
def test_deeply_nested_messages_parse_as_a_full_parse_would(depth: int) -> None:
    """The positions' scanner recurses where orjson does not go as deep: a message nested past
    what it can read is parsed in full, never an error of ctxproxy's own."""
    load = RawBodies(ByteLRU(1 << 24)).loader("acme", None)
    first = b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'
    assert loaded(load, first) == expected(first)
    nested = b"[" * depth + b"]" * depth
    for raw in (first[:-2] + b',{"role":"user","content":' + nested + b"}]}", first[:-2] + b"," + nested + b"]}"):
        results = [loaded(load, raw), loaded(load, raw)]  # the second with this body as the previous one
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(limit + 2 * depth)  # comparing the nested lists recurses too
        try:
            assert results == [expected(raw)] * 2
        finally:
            sys.setrecursionlimit(limit)


@given(
    messages=st.lists(st.binary(min_size=1, max_size=4), max_size=6),
    head=st.binary(max_size=3),
    cut=st.integers(0, 30),
    tail=st.binary(max_size=6),
)
def test_repeating_all_or_all_but_the_last_message_is_found_as_by_comparing_each(
    messages: list[bytes], head: bytes, cut: int, tail: bytes
) -> None:
    """Bytes that repeat a previous body's first ``cut`` bytes, then anything: the messages they
    repeat whole, found by one comparison of all but the last, as comparing all, then all but
    the last, finds them."""
    previous = head + b"".join(messages)
    ends = tuple(len(head) + sum(len(m) for m in messages[: i + 1]) for i in range(len(messages)))
    raw = previous[:cut] + tail
    view = memoryview(previous)
    n = len(ends)
    want = next((k for k in (n, n - 1) if k > 0 and raw.startswith(view[: ends[k - 1]])), 0)
    assert _last_or_all_but(raw, view, ends) == want


@pytest.mark.parametrize("trailer", [b",}", b" , \n}", b"", b"}x", b',"a":1,}', b"}", b' , "tools" : [1] } '])
def test_a_repeated_trailer_is_taken_from_the_previous_body(trailer: bytes) -> None:
    """A body that goes on parses its members after the array on their own; when they repeat the
    previous body's byte for byte their values are the previous body's objects, in the order and
    with the errors of a full parse."""
    load = RawBodies(ByteLRU(1 << 24)).loader("acme", None)
    pad = b"x" * 1100  # bodies are told apart by their first KiB
    head = b'{"tools":[{"a":"' + pad + b'"}],"model":"m","messages":[{"role":"user","content":"q0"}'
    bodies = [head + b"".join(b',{"role":"user","content":"q%d"}' % i for i in range(1, n)) + b"]" for n in (1, 2, 3)]
    as_parsed(load, bodies[0] + b"}")
    second, third = (as_parsed(load, raw + trailer)[0] for raw in bodies[1:])
    if isinstance(third, dict) and "tools" in trailer.decode():
        assert list(third) == ["tools", "model", "messages"] and third["tools"] == [1]
        assert third["tools"] is second["tools"]  # not parsed again
