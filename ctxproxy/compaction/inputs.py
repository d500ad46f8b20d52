"""What the compaction engine is asked (one request's conversation) and what it answers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple

from ctxproxy.compaction.observer import CompactionKind
from ctxproxy.config.models import TenantConfig
from ctxproxy.memory.scopes import MemoryScope
from ctxproxy.session import PrefixChain, SessionKey
from ctxproxy.session.fork import owner_of
from ctxproxy.session.known import Known
from ctxproxy.session.lineage import anonymous
from ctxproxy.strategies.base import Checkpoint, Message, Window
from ctxproxy.upstream.client import UpstreamHttp
from ctxproxy.upstream.completion import Completion, CompletionClient, Credential

DEFAULT_SUMMARY_MODEL = "gpt-4o-mini"  # a request without a model, on a tenant without summary_model
_NO_HEADERS: Mapping[str, str] = MappingProxyType({})


class CompactionInput(NamedTuple):
    """One request's conversation, as the engine is asked it (a NamedTuple: made at every
    request, cheaper than a frozen dataclass, as immutable; ``_replace`` changes a field)."""

    tenant: TenantConfig
    key: SessionKey
    messages: Sequence[Message]
    chain: PrefixChain
    tokens: Sequence[int]  # per message
    model: str | None
    window: Window
    completion: Completion  # how the request's protocol asks its upstream for a text (LLM summaries)
    # The client's request headers: its ``credential`` is read from them only when a call of
    # ctxproxy's own asks (most requests make none).
    headers: Mapping[str, str] = _NO_HEADERS  # never shown (``__repr__``): it holds a key
    user: str | None = None  # whose long-term memories (OpenAI `user` / X-Ctx-User)
    scope: str | None = None  # X-Ctx-Scope: a project or workspace whose memories are shared
    # The session's previous request as this process saw it, when this one does not carry it on
    # (a fork, ``ctxproxy.session.fork``); None when it does, or when this process saw none.
    previous: Known | None = None
    system_at: Sequence[int] | None = None  # where the system messages are, when known
    total: int | None = None  # ``sum(tokens)``, when known (the known conversation carries it on)

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{name}={value!r}" for name, value in zip(self._fields, self, strict=True) if name != "headers"
        )
        return f"CompactionInput({shown})"

    @property
    def credential(self) -> Credential:
        """The client's key, for those calls when the tenant has no key (``completion.credential``)."""
        return self.completion.credential(self.headers)

    @property
    def memory_scope(self) -> MemoryScope:
        """Whose memories the request reads and writes; without an identity, its own lineage's."""
        lineage = self.chain if anonymous(self.key, self.user, self.scope) else None
        return MemoryScope(self.tenant.name, self.key.store_id, self.user, self.scope, lineage)

    @property
    def owner(self) -> str | None:
        """Whose conversation this is, as a hash (``session.fork.owner_of``): branch summaries
        go only to their owner's requests."""
        return owner_of(self.user, self.scope)

    @property
    def summary_caller(self) -> str | None:
        """Whose key an LLM summary of this request is paid with, as a hash (never the key):
        None when the tenant's own upstream key is used, whoever asks."""
        if self.tenant.upstream.api_key is not None:
            return None
        return self.credential.caller()

    @property
    def authorization(self) -> str | None:
        """The client's ``Authorization`` header, for the OpenAI-shaped calls of its own
        (embeddings) when the tenant has no key."""
        return self.credential.value("Authorization")

    def completions(self, http: UpstreamHttp) -> CompletionClient:
        """The tenant's upstream, asked in this request's protocol on its client's behalf, each
        call within the tenant's ``summary_timeout``."""
        return CompletionClient(
            http, self.tenant.upstream, self.completion, self.credential, self.tenant.compaction.summary_timeout
        )

    @property
    def summary_model(self) -> str:
        """The model that writes LLM summaries and page lines: the tenant's ``summary_model``, else
        the request's own."""
        return self.tenant.compaction.summary_model or self.model or DEFAULT_SUMMARY_MODEL


class CompactionOutcome(NamedTuple):
    """What a request forwards (a NamedTuple: made at every request, cheaper than a frozen
    dataclass, as immutable; ``_replace`` changes a field)."""

    messages: list[Message] | None  # None: forward the client's body unchanged
    tokens_after: int  # prompt tokens of what is forwarded (messages only)
    checkpoint: Checkpoint | None
    compacted: bool = False  # this request made a new checkpoint
    branches: int = 0  # branch summaries forwarded (``ctxproxy.strategies.branch``)
    kind: CompactionKind | None = None  # why this request compacted, when it did


@dataclass(frozen=True)
class NotCompacted:
    """Why an upstream overflow could not be met by compacting harder; told to the client."""

    reason: str
