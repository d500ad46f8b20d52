"""Where memories live: note 002's layers (user, scope, session) and the rule for writing them. Pure.

A request's ``MemoryScope`` names its tenant, its session (``SessionKey.store_id``), and, when
known, its user (the OpenAI ``user`` field or ``X-Ctx-User``) and scope (a project / workspace
name). Each present one is a ``Layer``, stored under one key::

    ctx:{tenant}:mem:{kind}:{blake2b-16 hex of the raw id}

The tenant is in every key and the raw id only as a hash, so a search that reads a scope's
layers can never reach another tenant's or another user's memories, and no character a
client sends can change the shape of a key.

Write rule (``write_layers``): every document goes to the session layer; a card also goes to
the scope layer when a scope is named, else to the user layer when a user is known (knowledge
follows the project if there is one, else the person); ``constraint`` cards — preferences and
rules — also go to the user layer when a user is known, because they hold for that person in
every project. Archived pages stay in their session: they are that conversation's raw text.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final, Literal

from proxy.memory.cards import MemoryCard

__all__ = ["LAYER_KINDS", "Layer", "LayerKind", "MemoryScope", "layer_prefix"]

LayerKind = Literal["user", "scope", "session"]
LAYER_KINDS: Final[tuple[LayerKind, ...]] = ("user", "scope", "session")


def _hash(ident: str) -> str:
    return hashlib.blake2b(ident.encode(), digest_size=16).hexdigest()


def layer_prefix(tenant: str, kind: LayerKind | None = None) -> str:
    """The key prefix of a tenant's layers (of one kind), for listing them."""
    return f"ctx:{tenant}:mem:" + (f"{kind}:" if kind else "")


@dataclass(frozen=True)
class Layer:
    tenant: str
    kind: LayerKind
    ident: str  # raw user id / scope name / session store_id

    @property
    def key(self) -> str:
        return layer_prefix(self.tenant, self.kind) + _hash(self.ident)


@dataclass(frozen=True)
class MemoryScope:
    tenant: str
    session: str  # SessionKey.store_id
    user: str | None = None
    scope: str | None = None

    def layer(self, kind: LayerKind) -> Layer | None:
        ident = {"user": self.user, "scope": self.scope, "session": self.session}[kind]
        return Layer(self.tenant, kind, ident) if ident else None

    def read_layers(self) -> tuple[Layer, ...]:
        """The layers a search reads, broadest first: user, scope, session (those present)."""
        return tuple(layer for kind in LAYER_KINDS if (layer := self.layer(kind)) is not None)

    def write_layers(self, doc: MemoryCard) -> tuple[Layer, ...]:
        """The layers ``doc`` is written to (see the module docstring)."""
        session = Layer(self.tenant, "session", self.session)
        if doc.kind == "page":
            return (session,)
        out = [session]
        user, scope = self.layer("user"), self.layer("scope")
        if scope is not None:
            out.append(scope)
        if user is not None and (scope is None or doc.type == "constraint"):
            out.append(user)
        return tuple(out)
