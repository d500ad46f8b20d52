"""Session keys: which stored conversation a stateless request belongs to.

A client may name its session with ``X-Session-Id``. Otherwise the key is derived from the
tenant and the chain hash of the messages up to and including the first user message, i.e. the
system prompt **together with** the first user message. Deriving it from the system prompt
alone would merge unrelated conversations that share a prompt; deriving it from more than the
first user turn would give every resent request of one conversation a new key.

Keys are always scoped by tenant: the same conversation under two tenants has two keys, and a
client-chosen id is namespaced by tenant in ``store_id`` so it can never reach another tenant.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

from ctxproxy.errors import BadRequest
from ctxproxy.session.digest import PrefixChain
from ctxproxy.store.keys import session_store_id
from ctxproxy.vocabulary import ROLE_USER

SESSION_HEADER = "X-Session-Id"
_CLIENT_ID = re.compile(r"^[A-Za-z0-9._:@-]{1,128}$")


@dataclass(frozen=True)
class SessionKey:
    tenant: str
    value: str  # what the client sees in X-Ctx-Session
    source: Literal["header", "derived"]

    @cached_property
    def store_id(self) -> str:
        """The key's identity inside the store; always carries the tenant (a request asks for it
        at every step: made once per key)."""
        return session_store_id(self)


def identity_length(messages: Sequence[Mapping[str, Any]]) -> int:
    """How many leading messages identify the conversation: through the first user message."""
    for i, message in enumerate(messages):
        if message.get("role") == ROLE_USER:
            return i + 1
    return min(1, len(messages))


def session_key(
    tenant: str,
    messages: Sequence[Mapping[str, Any]],
    chain: PrefixChain,
    header: str | None = None,
) -> SessionKey:
    if header is not None:
        if not _CLIENT_ID.match(header):
            raise BadRequest(
                f"{SESSION_HEADER} must be 1-128 characters of letters, digits and . _ : @ -",
                param=SESSION_HEADER,
                code="invalid_session_id",
            )
        return SessionKey(tenant, header, "header")
    anchor = chain.prefix_hash(identity_length(messages))
    digest = hashlib.blake2b(tenant.encode() + b"\0" + anchor, digest_size=12).hexdigest()
    return SessionKey(tenant, f"s_{digest}", "derived")
