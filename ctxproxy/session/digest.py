"""Canonical message digests and the prefix hash chain.

A message's digest covers exactly what makes it the same message to a model: ``role``,
``content`` (a plain string and a single text part are the same content), ``name``,
``tool_calls`` (id, type, function name and arguments), ``tool_call_id`` and the legacy
``function_call``. Prompt-cache hints on parts (``cache_control``) are not content: moving a
cache breakpoint must not make an old message look new; nor is a part's token-count hint
(``vocabulary.PART_TOKENS_HINT``). Keys are sorted, so two clients that
serialise the same message differently get the same digest; any other field is ignored.

The prefix hash ``h_k = H(digest(m_1) ‖ … ‖ digest(m_k))`` with ``h_0 = b""`` identifies "the
first k messages" exactly: equal hashes at position k mean equal prefixes, and an edit anywhere
before k changes every hash from there on (DESIGN.md §2 writes it as a step-by-step chain; this
is the same identification, computed with one hash call).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ctxproxy.vocabulary import PART_TOKENS_HINT

DIGEST_SIZE = 16
_IDENTITY_FIELDS = ("role", "content", "name", "tool_calls", "tool_call_id", "function_call")


# Per-part fields that steer the provider (prompt-cache breakpoints) or the counter, not the content.
_PART_HINTS = frozenset({"cache_control", PART_TOKENS_HINT})


def _canonical_content(content: Any) -> Any:
    if not isinstance(content, list):
        return content
    parts = [
        {k: v for k, v in part.items() if k not in _PART_HINTS} if isinstance(part, Mapping) else part
        for part in content
    ]
    if (
        len(parts) == 1
        and isinstance(parts[0], dict)
        and parts[0].get("type") == "text"
        and set(parts[0]) == {"type", "text"}
    ):
        return parts[0]["text"]
    return parts


def _canonical_tool_calls(calls: Any) -> Any:
    if not isinstance(calls, list):
        return calls
    out = []
    for call in calls:
        if isinstance(call, Mapping):
            out.append({k: call.get(k) for k in ("id", "type", "function")})
        else:
            out.append(call)
    return out


def _text_digest(role: str, content: str) -> bytes:
    # The common case, hashed without building a canonical dump: a role and a string content.
    return hashlib.sha256(b"\x01" + role.encode() + b"\x00" + content.encode("utf-8", "surrogatepass")).digest()[
        :DIGEST_SIZE
    ]


def message_digest(message: Mapping[str, Any]) -> bytes:
    """Digest of one chat message; stable across key order and content spelling."""
    if len(message) == 2:
        role, content = message.get("role"), message.get("content")
        if isinstance(role, str) and isinstance(content, str):
            return _text_digest(role, content)
    canon: dict[str, Any] = {}
    for field in _IDENTITY_FIELDS:
        if field in message and message[field] is not None:
            canon[field] = message[field]
    if "content" in canon:
        canon["content"] = _canonical_content(canon["content"])
    if "tool_calls" in canon:
        canon["tool_calls"] = _canonical_tool_calls(canon["tool_calls"])
    if canon.keys() == {"role", "content"} and isinstance(canon["role"], str) and isinstance(canon["content"], str):
        return _text_digest(canon["role"], canon["content"])
    data = orjson.dumps(canon, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    return hashlib.sha256(b"\x02" + data).digest()[:DIGEST_SIZE]


@dataclass(frozen=True)
class PrefixChain:
    """Digests of a message list; ``prefix_hash(k)`` identifies its first ``k`` messages.

    ``prefix_hash(k) = H(d_1 ‖ … ‖ d_k)`` over the fixed-size digests: equal for equal prefixes,
    different after any edit, as a step-by-step chain would be, but computed on demand with
    one hash call over ``16·k`` bytes instead of ``k`` hash calls per request.
    """

    digests: tuple[bytes, ...]
    # A sha256 state fed every digest (``hashed``): ``head`` without hashing them all again.
    whole: Any = dataclasses.field(default=None, compare=False, repr=False)
    # This chain's identity, and that of the chain whose digests ``hashed`` found it repeats whole
    # (``extends``): a caller that knew that one's prefix hashes knows this one's up to its length.
    token: object = dataclasses.field(default_factory=object, compare=False, repr=False)
    extends: object | None = dataclasses.field(default=None, compare=False, repr=False)
    # ``digests`` joined (``joined``), once made: ``hashed`` makes it from the previous chain's.
    _joined: bytes | None = dataclasses.field(default=None, compare=False, repr=False)
    # The prefix hashes asked of this chain, by length; and, when it ``extends`` a chain, that
    # one's (the same dict, never a reference to the chain) with the hash state at its length:
    # a request pays for the lengths and the digests its predecessor did not hash.
    _asked: dict[int, bytes] = dataclasses.field(default_factory=dict, compare=False, repr=False)
    _inherited: dict[int, bytes] | None = dataclasses.field(default=None, compare=False, repr=False)
    _resume: tuple[int, Any] | None = dataclasses.field(default=None, compare=False, repr=False)

    @classmethod
    def hashed(
        cls,
        digests: tuple[bytes, ...],
        previous: PrefixChain | None = None,
        *,
        made_on: bool = False,
        forked: bool = False,
    ) -> PrefixChain:
        """``digests`` with their hash state, fed on from ``previous``'s when ``digests`` repeat
        all of its (a conversation that went on hashes only its new digests; it then ``extends``
        ``previous``), or from the state ``previous`` was fed on from when they repeat the digests
        that state was fed (a new last message: an edited or regenerated question), else from the
        start (keeping the state before its last digest). ``made_on``: the caller made ``digests``
        as ``previous.digests`` and more, so they are not compared again; ``forked``: as all of
        them but the last, and more. A chain made on
        ``previous`` answers ``prefix_hash`` at the lengths ``previous`` was asked for (up to its
        hash state's length) from its answers, and at longer lengths from its hash state: the
        request pays for its new tail."""
        n = len(previous.digests) if previous is not None and previous.whole is not None else 0
        if previous is not None and n and not forked and (made_on or digests[:n] == previous.digests):
            tail = b"".join(digests[n:])
            whole = previous.whole.copy()
            whole.update(tail)
            joined = previous.joined + tail  # one copy of the bytes, not a join of every digest
            # ``previous.whole`` is never fed again: only copies of it are.
            return _made(cls, digests, whole, joined, previous.token, previous._asked, (n, previous.whole))
        resume = previous._resume if previous is not None else None
        if previous is not None and resume is not None and _repeats(digests, previous.digests, resume[0], forked):
            m, state = resume
            tail = b"".join(digests[m:])
            whole = state.copy()
            whole.update(tail)
            joined = previous.joined[: DIGEST_SIZE * m] + tail
            return _made(cls, digests, whole, joined, None, previous._asked, resume)
        joined = b"".join(digests)
        if len(digests) < 2:
            return _made(cls, digests, hashlib.sha256(joined), joined, None, None, None)
        # Fed in two, the state before the last digest kept: a new last message hashes on from it.
        before = hashlib.sha256(memoryview(joined)[:-DIGEST_SIZE])
        whole = before.copy()
        whole.update(memoryview(joined)[-DIGEST_SIZE:])
        return _made(cls, digests, whole, joined, None, None, (len(digests) - 1, before))

    @classmethod
    def of(cls, messages: Iterable[Mapping[str, Any]]) -> PrefixChain:
        return cls(tuple(message_digest(m) for m in messages))

    @classmethod
    def from_digests(cls, digests: Sequence[bytes]) -> PrefixChain:
        return cls(tuple(digests))

    def __len__(self) -> int:
        return len(self.digests)

    @property
    def joined(self) -> bytes:
        """The digests joined, ``DIGEST_SIZE`` bytes each (a prompt's print: ``session.prompt_prints``)."""
        if self._joined is None:
            object.__setattr__(self, "_joined", b"".join(self.digests))
        return self._joined  # type: ignore[return-value]

    def prefix_hash(self, k: int) -> bytes:
        if k == 0:
            return b""
        found = self._known(k)
        if found is None:
            start, state = self._start(k)
            state.update(self._span(start, k))
            found = self._asked[k] = state.digest()[:DIGEST_SIZE]
        return found

    def prefix_hashes(self, lengths: Iterable[int]) -> dict[int, bytes]:
        """``prefix_hash(k)`` for each ``k`` of ``lengths`` (those in ``0..len``), hashing every
        digest once however many prefixes are asked for."""
        wanted = sorted({k for k in lengths if 0 <= k <= len(self)})
        out: dict[int, bytes] = {}
        running: Any = None
        done = 0
        for k in wanted:
            found = b"" if k == 0 else self._known(k)
            if found is None:
                start, resumed = self._start(k)
                if running is None or start > done:
                    running, done = resumed, start
                running.update(self._span(done, k))
                done = k
                found = self._asked[k] = running.copy().digest()[:DIGEST_SIZE]
            out[k] = found
        return out

    def _known(self, k: int) -> bytes | None:
        """The prefix hash at ``k`` if this chain, or the one it goes on from, has computed it."""
        found = self._asked.get(k)
        if found is None and self._inherited is not None and self._resume is not None and k <= self._resume[0]:
            found = self._inherited.get(k)
            if found is not None:
                self._asked[k] = found
        return found

    def _start(self, k: int) -> tuple[int, Any]:
        """The longest hash state kept at or before ``k``, as a copy to feed on, and its length."""
        if self._resume is not None and self._resume[0] <= k:
            return self._resume[0], self._resume[1].copy()
        return 0, hashlib.sha256()

    def _span(self, start: int, end: int) -> bytes | memoryview:
        """The digests ``start`` to ``end`` joined (a view of ``joined`` when it is made)."""
        joined = self._joined
        if joined is not None and len(joined) == DIGEST_SIZE * len(self.digests):
            return memoryview(joined)[start * DIGEST_SIZE : end * DIGEST_SIZE]
        return b"".join(self.digests[start:end])

    @property
    def hashes(self) -> tuple[bytes, ...]:
        """Every prefix hash, ``hashes[k]`` for ``k`` in ``0..len`` (for inspection and tests)."""
        return tuple(self.prefix_hash(k) for k in range(len(self) + 1))

    @property
    def head(self) -> bytes:
        """Hash of the whole list."""
        if self.whole is not None and self.digests:
            return self.whole.digest()[:DIGEST_SIZE]  # type: ignore[no-any-return]
        return self.prefix_hash(len(self))


def _made(
    cls: type[PrefixChain],
    digests: tuple[bytes, ...],
    whole: Any,
    joined: bytes,
    extends: object | None,
    inherited: dict[int, bytes] | None,
    resume: tuple[int, Any] | None,
) -> PrefixChain:
    """``cls(digests, whole, extends=extends, _joined=joined, _inherited=inherited,
    _resume=resume)``, its fields set at once (a frozen dataclass sets them one by one): one is
    made on every request."""
    chain = cls.__new__(cls)
    chain.__dict__.update(
        digests=digests,
        whole=whole,
        token=object(),
        extends=extends,
        _joined=joined,
        _asked={},
        _inherited=inherited,
        _resume=resume,
    )
    return chain


def _repeats(digests: tuple[bytes, ...], theirs: tuple[bytes, ...], m: int, forked: bool) -> bool:
    """Whether ``digests`` start with ``theirs[:m]``: known when ``digests`` were made as all of
    ``theirs`` but its last (``forked``) and ``m`` is short of that."""
    if forked:
        return m < len(theirs)
    return len(digests) >= m and digests[:m] == theirs[:m]
