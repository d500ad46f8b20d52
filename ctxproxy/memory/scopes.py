"""Where memories live: note 002's layers (user, scope, session) and the rule for writing them. Pure.

A request's ``MemoryScope`` names its tenant, its session (``SessionKey.store_id``), and, when
known, its user (the OpenAI ``user`` field or ``X-Ctx-User``) and scope (a project / workspace
name). Each present one is a ``Layer``, stored under one key (``Layer.key``; the spellings, and
why they keep tenants and users apart, are in ``ctxproxy.store.keys``): the user's layer, the
user's layer of one session, a scope's layer shared by its users, a session's layer of a scope
when no user is known, an anonymous session's layer (lineage-bound).

A session layer belongs to (user, session) whenever the request names a user: two users who
send the same ``X-Session-Id``, or open with the same system prompt and first message (and so
get the same derived session key), write and read two different layers. Only requests without
a user share a session's layer by the session key and their scope — and of those, a request that names
no identity at all (no user, no scope, no ``X-Session-Id``: ``ctxproxy.session.lineage.anonymous``)
has a layer of its own, *lineage-bound*: its derived key is shared by every stranger who opens
the same way, so each document there carries the lineage of the conversation that wrote it and
is read only by requests that extend it (``MemoryScope.lineage``, the request's chain; the
filtering is ``MemoryStore``'s). No identified request reads that layer, and an anonymous one
reads no other.

Everything a user's requests own is under ``keys.user_layer_key`` (their layer, then
``keys.user_owned_prefix``), which is how the admin API finds a user's session layers without
an index; the scope layers a user wrote to are recorded beside them (``keys.writer_marker_key``:
the same hash as the scope layer's key, so the layer key follows from the marker key without a
read).

Write rule (``write_layers``): every document goes to the session layer; a card also goes to
the scope layer when a scope is named, else to the user layer when a user is known (knowledge
follows the project if there is one, else the person); ``constraint`` cards — preferences and
rules — also go to the user layer when a user is known, because they hold for that person in
every project. Archived pages stay in their session: they are that conversation's raw text.
A writer may name the layers instead (``layers_of``): with note 002's layered memory, a
compression's cards go to the session layer alone, and what one round says of the user or the
project to the user or the scope layer.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal

from ctxproxy.memory.cards import MemoryCard
from ctxproxy.session.digest import PrefixChain
from ctxproxy.store import keys

__all__ = ["LAYER_KINDS", "Layer", "LayerKind", "MemoryScope"]

LayerKind = Literal["user", "scope", "session"]
LAYER_KINDS: Final[tuple[LayerKind, ...]] = ("user", "scope", "session")


@dataclass(frozen=True)
class Layer:
    tenant: str
    kind: LayerKind
    ident: str  # raw user id / scope name / session store_id
    owner: str | None = None  # a session layer's user, when the request named one
    bound: bool = False  # an anonymous session's layer: each document read only by its lineage

    def __post_init__(self) -> None:
        if self.owner is not None and self.kind != "session":
            raise ValueError(f"only session layers have an owner, not {self.kind} layers")
        if self.bound and (self.kind != "session" or self.owner is not None):
            raise ValueError("only an anonymous session's layer is lineage-bound")

    @property
    def key(self) -> str:
        if self.bound:
            return keys.lineage_layer_key(self.tenant, self.ident)
        if self.owner is not None:
            return keys.user_session_layer_key(self.tenant, self.owner, self.ident)
        if self.kind == "user":
            return keys.user_layer_key(self.tenant, self.ident)
        if self.kind == "scope":
            return keys.scope_layer_key(self.tenant, self.ident)
        return keys.session_layer_key(self.tenant, self.ident)


@dataclass(frozen=True)
class MemoryScope:
    tenant: str
    session: str  # SessionKey.store_id
    user: str | None = None
    scope: str | None = None
    lineage: PrefixChain | None = None  # an anonymous request's messages (its memories are bound to them)

    def __post_init__(self) -> None:
        if self.lineage is not None and (self.user or self.scope):
            raise ValueError("a request that names a user or a scope is not anonymous: it has no lineage")

    def layer(self, kind: LayerKind) -> Layer | None:
        """The request's layer of ``kind``, or None when the request names no such thing; the
        session layer always exists and belongs to the user when there is one."""
        if kind == "session":
            return self.session_layer
        ident = self.user if kind == "user" else self.scope
        return Layer(self.tenant, kind, ident) if ident else None

    @property
    def session_layer(self) -> Layer:
        """The session's layer of this request's owner: the user's when one is named, else the
        scope's (two scopes that open alike share a derived session key, never its layer)."""
        ident = self.session if self.user or not self.scope else keys.scoped_session_ident(self.session, self.scope)
        return Layer(self.tenant, "session", ident, owner=self.user or None, bound=self.lineage is not None)

    def read_layers(self) -> tuple[Layer, ...]:
        """The layers a search reads, broadest first: user, scope, session (those present)."""
        return self.layers_of(LAYER_KINDS)

    def layers_of(self, kinds: Iterable[LayerKind]) -> tuple[Layer, ...]:
        """The request's layers of ``kinds`` (those it has), in that order."""
        return tuple(layer for kind in kinds if (layer := self.layer(kind)) is not None)

    def write_layers(self, doc: MemoryCard) -> tuple[Layer, ...]:
        """The layers ``doc`` is written to (see the module docstring)."""
        session = self.session_layer
        if doc.kind == "page":
            return (session,)
        out = [session]
        user, scope = self.layer("user"), self.layer("scope")
        if scope is not None:
            out.append(scope)
        if user is not None and (scope is None or doc.type == "constraint"):
            out.append(user)
        return tuple(out)
