"""The texts a conversation repeats, scanned once: each summary of a conversation reads its whole
history for them (``scaffolding.repeated_in``), and the next summary's history is the same one
with more messages after it.

``RepeatScans.repeated(messages, context)`` is ``repeated_in(messages, context, units_of)``. It
keeps, per conversation, what the scan of the last ``context`` found — the messages read, in
order, and the keys seen once and twice — and when the next ``context`` starts with those very
message objects (compared by identity: the incremental parse hands a conversation's repeated
messages on as the same objects) it reads only the messages after them. Anything else (another
conversation, a fork, an edited message, a copy equal in value) is scanned from the start, as
before. Repetition is a property of the set of message objects counted, not of their order, so
``messages`` outside the scanned ``context`` (a range that is not part of it) are counted on top,
the kept scan left as it was.

A scan holds its messages (so their ids stay theirs while it is kept) in the summariser's memo,
under the id of its first message, accounted for what it adds: a reference, an id and a set slot
per message, the keys, and the texts it read (the message objects are the conversation's, which
the known conversations hold while it is alive).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import is_
from typing import Any

from ctxproxy.cache import ByteLRU
from ctxproxy.summarize.scaffolding import Units, message_units, repeated_in, text_parts

__all__ = ["RepeatScans"]

_SCAN = "\x00repeats"  # the memo's key for a conversation's scan, beside the summariser's analyses
MESSAGE_BYTES = 120  # per message read: the reference, its id (an int in a set) and the set's slot
KEY_BYTES = 100  # per key seen: a 16-byte digest and its set slot


@dataclass
class _Scan:
    """What the scan of one conversation's messages (``held``, in order) found."""

    held: list[Any] = field(default_factory=list)
    counted: set[int] = field(default_factory=set)  # ids of the mappings among them
    seen: set[bytes] = field(default_factory=set)
    repeated: set[bytes] = field(default_factory=set)
    size: int = 0  # bytes accounted, besides the keys

    def starts(self, context: Sequence[Any]) -> bool:
        """``context`` begins with the very messages this scan read."""
        return len(context) >= len(self.held) and all(map(is_, self.held, context))

    def extend(self, context: Sequence[Any], units_of: Units) -> None:
        """Read the messages of ``context`` after those already read."""
        for message in context[len(self.held) :]:
            self.held.append(message)
            self.size += MESSAGE_BYTES
            if not isinstance(message, Mapping) or id(message) in self.counted:
                continue
            self.counted.add(id(message))
            units = message_units(message, units_of)
            if units:
                self.repeated |= units & self.seen
                self.seen |= units
                self.size += sum(len(text) for text in text_parts(message.get("content")))

    def with_extra(self, messages: Sequence[Any], units_of: Units) -> frozenset[bytes]:
        """The repeated keys once ``messages`` not among those read are counted too."""
        seen: set[bytes] = set()
        repeated: set[bytes] = set()
        counted: set[int] = set()
        for message in messages:
            if not isinstance(message, Mapping) or id(message) in self.counted or id(message) in counted:
                continue
            counted.add(id(message))
            units = message_units(message, units_of)
            repeated |= (units & self.seen) | (units & seen)
            seen |= units
        return frozenset(self.repeated | repeated)

    @property
    def nbytes(self) -> int:
        return self.size + KEY_BYTES * len(self.seen)


class RepeatScans:
    """``repeated_in``, going on from the last scan of the same conversation (module docstring)."""

    def __init__(self, cache: ByteLRU[Any, Any], units_of: Units) -> None:
        self._cache = cache
        self._units_of = units_of
        self._last: tuple[tuple[str, int], _Scan] | None = None

    def repeated(self, messages: Sequence[Mapping[str, Any]], context: Sequence[Mapping[str, Any]]) -> frozenset[bytes]:
        if not context:
            return repeated_in(messages, context, self._units_of)
        key = (_SCAN, id(context[0]))
        scan = self._cache.pop(key)  # taken out while it changes; put back with its new size
        if not isinstance(scan, _Scan) or not scan.starts(context):
            scan = _Scan()
        scan.extend(context, self._units_of)
        found = scan.with_extra(messages, self._units_of)
        self._cache.put(key, scan, scan.nbytes)
        self._last = key, scan
        return found

    def keep(self) -> None:
        """Hold the last scan as the memo's newest entry again: the summary that asked for it
        put its analyses after it, and a long range's can push it out of the memo."""
        if self._last is not None:
            key, scan = self._last
            self._last = None
            self._cache.put(key, scan, scan.nbytes)
