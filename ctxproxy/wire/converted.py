"""A conversation's canonical messages, converted only from where the previous request's differ.

The incremental parse (``ctxproxy.wire.incremental``) hands back, for the messages a body
repeats, the previous request's parsed objects. A protocol whose conversation array is not in
ctxproxy's message model (Messages, Gemini, Responses) checks and converts each element into
one or more canonical messages; an element's messages depend only on the elements up to it (its
own value, its index, the one before it), so the previous request's messages for a repeated
prefix are this request's too. ``convert`` reuses them for the leading elements that are the very same
objects (compared by identity in C: equal values are not enough, ``1 == 1.0 == true``) and
converts the rest; a conversion is kept only when every element checked.

A protocol may make an element's messages depend on the element after it too (``lookahead``:
the Responses API's run of assistant items is one message, made when the run ends); then the
last element a conversion shares with the previous one is converted again, unless the array is
the previous one whole.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import is_
from typing import Any

__all__ = ["Conversion", "ConvertOne", "Message", "convert"]

Message = dict[str, Any]
# The canonical messages of ``elements[i]`` (all elements given: a message may depend on the
# one before it); raises ``Uncompactable`` for an element ctxproxy cannot model.
ConvertOne = Callable[[Sequence[Any], int], list[Message]]


@dataclass(frozen=True)
class Conversion:
    """A conversation array and its canonical messages."""

    elements: tuple[Any, ...]  # the array as parsed
    ends: tuple[int, ...]  # ends[i]: how many messages ``elements[: i + 1]`` make
    messages: tuple[Message, ...]


def convert(
    elements: Sequence[Any], previous: Conversion | None, one: ConvertOne, *, lookahead: bool = False
) -> Conversion:
    """``elements`` converted by ``one``, ``previous``'s messages reused for the elements it
    shares with them (all of its elements, or all but the last: a conversation that went on, or
    whose newest message changed); with ``lookahead``, but the last of those unless the two
    arrays are the same elements (a conversation shortened by its last element ends a run that
    went on in the previous one)."""
    k = _repeated(elements, previous)
    if lookahead and k and previous is not None and not k == len(elements) == len(previous.elements):
        k -= 1  # the element's messages were made seeing another element after it, or none
    ends = list(previous.ends[:k]) if previous is not None and k else []
    out = list(previous.messages[: ends[-1]]) if previous is not None and ends else []
    for i in range(k, len(elements)):
        out += one(elements, i)
        ends.append(len(out))
    return Conversion(tuple(elements), tuple(ends), tuple(out))


def _repeated(elements: Sequence[Any], previous: Conversion | None) -> int:
    if previous is None:
        return 0
    n = len(previous.elements)
    if 0 < n <= len(elements) and all(map(is_, previous.elements, elements)):
        return n
    if 1 < n <= len(elements) + 1 and all(map(is_, previous.elements[: n - 1], elements)):
        return n - 1
    return 0
