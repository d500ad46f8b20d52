"""Canonical message digests and the prefix hash chain.

A message's digest covers exactly what makes it the same message to a model: ``role``,
``content`` (a plain string and a single text part are the same content), ``name``,
``tool_calls`` (id, type, function name and arguments), ``tool_call_id`` and the legacy
``function_call``. Prompt-cache hints on parts (``cache_control``) are not content: moving a
cache breakpoint must not make an old message look new. Keys are sorted, so two clients that
serialise the same message differently get the same digest; any other field is ignored.

The chain ``h_k = H(h_{k-1} ‖ digest(m_k))`` with ``h_0 = b""`` identifies "the first k
messages" exactly: equal chain hashes at position k mean equal prefixes, and an edit anywhere
before k changes every hash from there on.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

DIGEST_SIZE = 16
_IDENTITY_FIELDS = ("role", "content", "name", "tool_calls", "tool_call_id", "function_call")


# Per-part fields that steer the provider (prompt-cache breakpoints), not the content.
_PART_HINTS = frozenset({"cache_control"})


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


def message_digest(message: Mapping[str, Any]) -> bytes:
    """Digest of one chat message; stable across key order and content spelling."""
    canon: dict[str, Any] = {}
    for field in _IDENTITY_FIELDS:
        if field in message and message[field] is not None:
            canon[field] = message[field]
    if "content" in canon:
        canon["content"] = _canonical_content(canon["content"])
    if "tool_calls" in canon:
        canon["tool_calls"] = _canonical_tool_calls(canon["tool_calls"])
    data = orjson.dumps(canon, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    return hashlib.blake2b(data, digest_size=DIGEST_SIZE).digest()


def chain_step(previous: bytes, digest: bytes) -> bytes:
    return hashlib.blake2b(previous + digest, digest_size=DIGEST_SIZE).digest()


@dataclass(frozen=True)
class PrefixChain:
    """Digests of a message list and the chain hash of each prefix.

    ``hashes[k]`` identifies the first ``k`` messages (``hashes[0]`` is the empty prefix).
    """

    digests: tuple[bytes, ...]
    hashes: tuple[bytes, ...]

    @classmethod
    def of(cls, messages: Iterable[Mapping[str, Any]]) -> PrefixChain:
        return cls.from_digests([message_digest(m) for m in messages])

    @classmethod
    def from_digests(cls, digests: Sequence[bytes]) -> PrefixChain:
        hashes = [b""]
        for d in digests:
            hashes.append(chain_step(hashes[-1], d))
        return cls(tuple(digests), tuple(hashes))

    def __len__(self) -> int:
        return len(self.digests)

    def prefix_hash(self, k: int) -> bytes:
        return self.hashes[k]

    @property
    def head(self) -> bytes:
        """Hash of the whole list."""
        return self.hashes[-1]
