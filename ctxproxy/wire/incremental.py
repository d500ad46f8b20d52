"""Parsing a request body that repeats the previous one: only the new messages are parsed.

A client resends its whole history every turn: the body of request n+1 is, byte for byte, the
body of request n up to the end of some message (an element of its ``messages`` array; of
``input`` in the Responses API), then a tail (the answer, the new question, the
rest of the body). ``load`` keeps, per tenant and conversation, the previous body's bytes
(``Layout``: where its ``messages`` array starts, where each message ends, the parsed messages)
and, when a new body's bytes equal it up to a message's end (a ``memcmp`` of the prefix, no
copy), parses only the rest: the previous body's bytes before the array, then the tail after the
matched message, which is a whole body holding only the new messages. The matched messages are
the previous request's parsed objects, so later steps that compare message lists (the
known-conversation cache) find them equal by identity, in C.

Equal to a full parse, whatever the bytes: the bytes before the array were read once, in full,
as the body's only top-level ``messages`` key (``_locate``); a matched message is the same bytes,
so the same value; the rest is parsed by the same parser: the new messages (as the head of a
body holding only them), then the members after the array on their own (as an object), put into
the body in their order (a key the head has keeps its place, takes their value: what a full parse
does). Members that repeat the previous body's byte for byte are not parsed again: their values
are the previous body's (an agent's ``tools``, tens of kilobytes, repeat every turn), shared, as
its messages are (nothing downstream changes a parsed body's values in place). Members naming
``messages`` again send the body to a full parse.
Whenever anything does not fit (fields reordered, an edited message, whitespace moved, another
conversation's body), the body is parsed in full, as it always was, and its layout kept for the
next request. Positions are found with the standard library's JSON scanner on the bytes decoded
as Latin-1 (one character per byte, so a character's index is its byte offset; JSON's structure
is ASCII); values always come from ``orjson``, which also judges validity.

The layouts are a cache bounded by bytes (``ctxproxy.cache``): losing one costs a full parse,
never correctness. Kept per tenant and per conversation fingerprint (the session header, the
body's first bytes), so one tenant's bodies are never compared with another's.
"""

from __future__ import annotations

import json
import json.scanner
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from ctxproxy.cache import ByteLRU
from ctxproxy.wire.converted import Conversion, ConvertOne, Message, convert
from ctxproxy.wire.json_body import load_object

__all__ = ["BODIES", "BodyLoader", "Layout", "Parsed", "RawBodies", "convert_all", "load_incremental", "locate"]

_FINGERPRINT_BYTES = 1024  # a conversation's body is told from others by its first bytes ...
_PER_FINGERPRINT = 64  # ... and, among those sharing them, by the bytes of its messages
_MESSAGES = "messages"
_WS = re.compile(r"[ \t\n\r]*")
_BLANKS = frozenset(" \t\n\r")
_JSON_BLANKS = b" \t\n\r"
_scan: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]


@dataclass(frozen=True)
class Layout:
    """A parsed body and where its messages lie in its bytes."""

    raw: bytes
    start: int  # the offset just after the ``messages`` array's ``[``
    ends: tuple[int, ...]  # the offset just after each message
    messages: tuple[Any, ...]  # the parsed messages (``orjson``), in order
    trailer: bytes  # the bytes after the array's ``]``: no second ``messages`` among them
    converted: list[Conversion] = field(default_factory=list, compare=False)  # its conversion, once made
    members: dict[str, Any] | None = field(default=None, compare=False)  # ``trailer``'s members, once parsed

    @property
    def nbytes(self) -> int:
        """Its bytes, its offsets, and its parsed messages estimated at the size of their bytes
        (their conversion, if one is kept, at 64 bytes a message), its parsed members likewise."""
        members = 2 * len(self.trailer) if self.members is not None else 0
        return 2 * len(self.raw) + 8 * len(self.ends) + 128 * len(self.messages) + members


def load_incremental(
    raw: bytes, previous: Layout | None, needs: str, field: str = _MESSAGES, matched: int | None = None
) -> tuple[dict[str, Any], Layout | None]:
    """``raw`` parsed (as ``load_object``: the same object, the same errors), with its layout when
    it went on from ``previous`` (only what follows their longest common message-boundary prefix
    was parsed); None when it was parsed in full (``locate`` finds its layout when needed).
    ``matched``: how many of ``previous``'s messages ``raw`` is known to repeat, when the caller
    compared them already (else they are compared here)."""
    if previous is not None:
        found = _extend(raw, previous, field, matched)
        if found is not None:
            return found
    return load_object(raw, needs=needs), None


def locate(raw: bytes, messages: tuple[Any, ...], field: str = _MESSAGES) -> Layout | None:
    """The layout of ``raw``, whose ``messages`` parsed as ``messages``; None when it has none to
    offer (no ``messages`` list, the key twice, anything the scanner reads otherwise). ``field``:
    the key of the body's conversation array (``input`` in the Responses API)."""
    text = raw.decode("latin-1")
    try:
        i = _skip(text, 0)
        if text[i] != "{":
            return None
        found = _keys(text, i + 1, 0, field)
    except (ValueError, IndexError, StopIteration, RecursionError):
        return None
    if found is None:
        return None
    start, ends, array_end, _ = found
    if len(ends) != len(messages):
        return None
    return Layout(raw, start, tuple(ends), messages, raw[array_end + 1 :])


def _keys(text: str, i: int, offset: int, field: str) -> tuple[int, list[int], int, int] | None:
    """Walk an object's members from ``i`` (just inside its ``{``, or after a member): where the
    one ``messages`` array starts, its elements end, its ``]`` is, and where the object ends;
    ``offset`` is added to every position. None when ``messages`` is not there exactly once."""
    found: tuple[int, list[int], int] | None = None
    i = _skip(text, i)
    if text[i] == "}":
        return None
    while True:
        key, i = _scan(text, _skip(text, i))
        i = _skip(text, i)
        if text[i] != ":":
            return None
        i = _skip(text, i + 1)
        if key == field:
            if found is not None or text[i] != "[":
                return None
            ends, close = _elements(text, i + 1, offset)
            found = (offset + i + 1, ends, offset + close)
            i = close + 1
        else:
            _, i = _scan(text, i)
        i = _skip(text, i)
        if text[i] == "}":
            return None if found is None else (*found, offset + i)
        if text[i] != ",":
            return None
        i += 1


def _elements(text: str, i: int, offset: int) -> tuple[list[int], int]:
    """The ends (plus ``offset``) of the array elements from ``i`` (just after ``[`` or a comma),
    and the position of its ``]``."""
    ends: list[int] = []
    i = _skip(text, i)
    if text[i] == "]":
        return ends, i
    while True:
        _, i = _scan(text, i)
        ends.append(offset + i)
        i = _skip(text, i)
        if text[i] == "]":
            return ends, i
        if text[i] != ",":
            raise ValueError("not an array")
        i = _skip(text, i + 1)


def _skip(text: str, i: int) -> int:
    if text[i : i + 1] not in _BLANKS:  # compact JSON: nothing to skip, no pattern run
        return i
    match = _WS.match(text, i)
    return i if match is None else match.end()


def _matched(raw: bytes, previous: Layout) -> int:
    """How many of ``previous``'s messages ``raw`` repeats byte for byte from its first byte:
    the last first (a conversation that went on), then the one before (the newest message
    edited, or a marker moved off it), then the longest by bisection."""
    ends = previous.ends
    view = memoryview(previous.raw)
    n = len(ends)
    last = _last_or_all_but(raw, view, ends)
    if last:
        return last
    low, high = 0, n - 2  # raw repeats the first ``low`` messages and not the first ``high + 1``
    while low < high:
        mid = (low + high + 1) // 2
        if raw.startswith(view[: ends[mid - 1]]):
            low = mid
        else:
            high = mid - 1
    return low


def _last_or_all_but(raw: bytes, view: memoryview, ends: tuple[int, ...]) -> int:
    """How many of the messages ending at ``ends`` in ``view`` ``raw`` repeats byte for byte from
    its first byte when that is all of them or all but the last, else 0: the bytes through the
    last but one compared once (a large body's bytes are not compared twice), then the last."""
    n = len(ends)
    if n > 1:
        if not raw.startswith(view[: ends[-2]]):
            return 0
        return n if raw.startswith(view[ends[-2] : ends[-1]], ends[-2]) else n - 1
    return 1 if n == 1 and raw.startswith(view[: ends[0]]) else 0


def _extend(raw: bytes, previous: Layout, field: str, matched: int | None) -> tuple[dict[str, Any], Layout] | None:
    """``raw`` parsed from ``previous``'s repeated messages on, or None (parse it in full)."""
    k = _matched(raw, previous) if matched is None else matched
    if k == 0:
        return None
    after = previous.ends[k - 1]
    tail = raw[after:].decode("latin-1")
    try:
        i = _skip(tail, 0)
        if tail[i] == ",":
            i += 1
        elif tail[i] != "]":
            return None
        new_ends, close = _elements(tail, i, after)
    except (ValueError, IndexError, StopIteration, RecursionError):
        return None
    trailer = raw[after + close + 1 :]
    try:
        body = orjson.loads(raw[: previous.start] + raw[after + i : after + close + 1] + b"}")
        same = trailer == previous.trailer and previous.members is not None
        members = previous.members if same else _members(trailer)
    except orjson.JSONDecodeError:
        return None
    new = body.get(field) if isinstance(body, dict) else None
    if not isinstance(new, list) or len(new) != len(new_ends) or members is None or field in members:
        return None
    messages = previous.messages[:k] + tuple(new)  # a tuple's whole slice is itself: one copy
    body[field] = list(messages)
    body.update(members)  # in their order, as a full parse assigns them
    ends = previous.ends[:k] + tuple(new_ends)
    return body, Layout(raw, previous.start, ends, messages, trailer, members=members)


def _members(trailer: bytes) -> dict[str, Any] | None:
    """The members after the array's ``]`` (``trailer``: a comma, members and the closing brace,
    or the brace alone) parsed as an object; None when they are not that. Raises
    ``orjson.JSONDecodeError`` as a full parse would."""
    rest = trailer.lstrip(_JSON_BLANKS)
    if rest[:1] == b",":
        rest = rest[1:]
        if rest.lstrip(_JSON_BLANKS)[:1] == b"}":  # ``,}``: invalid, though ``{}`` is not
            return None
    elif rest[:1] != b"}":
        return None
    members = orjson.loads(b"{" + rest)
    return members if isinstance(members, dict) else None


@dataclass(frozen=True)
class Parsed:
    """A body parsed in full, its layout not yet looked for (most bodies are never extended)."""

    raw: bytes
    messages: Any  # its ``messages`` as parsed, the list itself (the body's may be replaced)
    converted: list[Conversion] = field(default_factory=list, compare=False)  # its conversion, once made

    @property
    def nbytes(self) -> int:
        return 2 * len(self.raw) + 64 * len(self.messages)


Entry = Layout | Parsed
_SNIFF_BYTES = 4096  # a fully parsed body is located only for a body that repeats its start (or first half)


def _candidate(raw: bytes, entries: tuple[Entry, ...], field: str) -> tuple[Entry | None, Layout | None, int | None]:
    """Of a fingerprint's entries, the one ``raw`` goes on from, its layout, and how many of its
    messages ``raw`` repeats when that was compared: the first that ``raw`` repeats all messages
    of, or all but the last (another conversation's fails at its first differing byte), else the
    newest; a parsed body is located when ``raw`` repeats its start."""
    for entry in entries:
        if isinstance(entry, Parsed):
            if raw.startswith(memoryview(entry.raw)[: min(_SNIFF_BYTES, len(entry.raw) // 2)]):
                return entry, locate(entry.raw, entry.messages, field), None
            continue
        k = _last_or_all_but(raw, memoryview(entry.raw), entry.ends)
        if k:
            return entry, entry, k
    newest = entries[0] if entries else None
    return (newest, newest, None) if isinstance(newest, Layout) else (None, None, None)


def _newest_within(entries: tuple[Entry, ...], max_bytes: int) -> tuple[tuple[Entry, ...], int]:
    """The newest of ``entries`` (at most ``_PER_FINGERPRINT``) that fit ``max_bytes`` together,
    and their bytes: a fingerprint shared by many large conversations keeps what fits rather than
    nothing."""
    total = 0
    for n, entry in enumerate(entries[:_PER_FINGERPRINT]):
        size = entry.nbytes
        if total + size > max_bytes:
            return entries[:n], total
        total += size
    return entries[:_PER_FINGERPRINT], total


class RawBodies:
    """The previous bodies per tenant and conversation fingerprint (``load_incremental``): the
    session header and the body's first bytes, which conversations of one agent may share, so
    each fingerprint keeps its ``_PER_FINGERPRINT`` most recent conversations' bodies."""

    def __init__(self, cache: ByteLRU[tuple[str, str, str, int], tuple[Entry, ...]]) -> None:
        self._entries = cache

    @property
    def nbytes(self) -> int:
        return self._entries.nbytes

    def loader(self, tenant: str, session: str | None, field: str = _MESSAGES) -> BodyLoader:
        """What parses one request's body of ``tenant`` (``session``: its session header, if any;
        ``field``: the key of its conversation array)."""
        return BodyLoader(self._entries, tenant, session or "", field)


class BodyLoader:
    """What parses one request's body (call it: ``raw``, what the body needs; the parsed object,
    as ``load_object``) from the previous body of its conversation on, and converts its
    conversation (``convert``) from the previous request's conversion on."""

    def __init__(
        self, entries: ByteLRU[tuple[str, str, str, int], tuple[Entry, ...]], tenant: str, session: str, field: str
    ) -> None:
        self._entries, self._tenant, self._session, self._field = entries, tenant, session, field
        self._used: Entry | None = None  # the previous body this one went on from
        self._fresh: Entry | None = None  # this body, as kept for the next

    def __call__(self, raw: bytes, needs: str) -> dict[str, Any]:
        # The first bytes' hash: ``hash`` of bytes is keyed per process (no crafted collisions),
        # and a collision only has a body compared, byte for byte, with another conversation's.
        key = (self._tenant, self._session, self._field, hash(raw[:_FINGERPRINT_BYTES]))
        entries = self._entries.get(key) or ()
        used, previous, matched = _candidate(raw, entries, self._field)
        body, layout = load_incremental(raw, previous, needs, self._field, matched)
        messages = body.get(self._field)
        fresh: Entry | None = layout
        if fresh is None and isinstance(messages, list):
            fresh = Parsed(raw, tuple(messages))
        self._used, self._fresh = used, fresh
        others = tuple(entry for entry in entries if entry is not used)
        kept, size = _newest_within((fresh, *others) if fresh is not None else others, self._entries.max_bytes // 2)
        if kept:
            self._entries.put(key, kept, size)
        else:
            self._entries.pop(key)
        return body

    def convert(self, elements: Sequence[Any], one: ConvertOne, *, lookahead: bool = False) -> list[Message]:
        """The canonical messages of the parsed body's conversation ``elements``, each made by
        ``one`` (which checks it) unless the previous body's conversion has it
        (``ctxproxy.wire.converted``, ``lookahead`` as there); kept for the next body when every
        element converted."""
        previous = self._used.converted[0] if self._used is not None and self._used.converted else None
        conversion = convert(elements, previous, one, lookahead=lookahead)
        if self._fresh is not None:
            self._fresh.converted[:] = [conversion]
        return list(conversion.messages)


def convert_all(
    elements: Sequence[Any], one: ConvertOne, load: BodyLoader | None, *, lookahead: bool = False
) -> list[Message]:
    """``elements`` converted by ``one``: by ``load`` (from the previous body's conversion on,
    ``lookahead`` as in ``ctxproxy.wire.converted``) when the body was parsed by one, else each
    in turn."""
    if load is not None:
        return load.convert(elements, one, lookahead=lookahead)
    return [message for i in range(len(elements)) for message in one(elements, i)]


BODIES = web.AppKey("bodies", RawBodies)  # the app's previous request bodies (opened with its resources)
