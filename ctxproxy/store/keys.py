"""Every Store key ctxproxy uses, spelled in one place. Pure; imports nothing of ctxproxy.

Layout (``{t}`` the tenant; ``{s}:{v}`` a session: ``h`` for a client-chosen ``X-Session-Id``,
``d`` for a derived key, then the key's value; ``h(x)`` the blake2b-16 hex of ``x``)::

    ctx:{t}:session:{s}:{v}                   session record: when seen, how large     session.recorder
    ctx:{t}:history:{s}:{v}                   the session's last requests, tokens each  session.recorder
    ctx:{t}:stats:{unix time of a bucket}     a tenant's totals over a time bucket      session.recorder
    ctx:{t}:ckpt:{s}:{v}                      checkpoint index (and refused sizes)     compaction.engine
    ctx:{t}:pending:{s}:{v}                   a background compaction to run again     compaction.engine
    ctx:{t}:compacting:{s}:{v}                name of the compaction lease (a lock)    compaction.engine
    ctx:{t}:forking:{s}:{v}                   name of the branch summary lease (a lock) compaction.branches
    ctx:{t}:page:{s}:{v}:{n}:{prefix hash}    a raw archived page (``paged``)          compaction.keeper
    ctx:{t}:recall:{s}:{v}                    recall counts of the archived pages      tools.handlers
    ctx:{t}:served:{s}:{v}                    summaries behind the Responses API's     wire.openai_responses
                                              compaction items ctxproxy issued         .compaction_store
    ctx:{t}:toolout:{s}:{v}                   the tool results sent compressed, and how  pipeline.tool_outputs
    ctx:{t}:original:{s}:{v}:{ref}            a tool result's original text (its ref:    pipeline.tool_outputs
                                              ``r`` and 16 hex digits)
    ctx:{t}:window:{sha256(model)[:24]}       what was learned of a model's window     compaction.learning
    ctx:{t}:mem:user:{h(user)}                a user's memory layer                    memory.memories
    ctx:{t}:mem:user:{h(user)}:session:{h(session id)}   that user's layer of one session
    ctx:{t}:mem:user:{h(user)}:wrote:{h(scope)}           "the user wrote cards to this scope layer"
    ctx:{t}:mem:scope:{h(scope)}              a scope's layer, shared by its users
    ctx:{t}:mem:session:{h(session id)}       a session's layer when no user is named
    ctx:{t}:mem:lineage:{h(session id)}       an anonymous session's (lineage-bound) layer
    {memory layer key}:v                      the layer's version entry, written with it
    ui:login:{h(session token)}               an inspector sign-in, until it ends      inspector.logins
    __store__:lock:{lock name}                a lease record (reserved for the backend)   store.*_lock
    __store__:probe:{random hex}              ``check_writable``'s probe (reserved)        store.disk, .redis_store
    __store__:fence                           the last fencing token handed out (reserved) store.*_lock

A network store (``RedisStore``) keeps each key under its ``key_prefix`` (``DEFAULT_KEY_PREFIX``), so
several deployments, or tests, can share one server without sharing a key.

"Session id" is ``session_store_id``: ``{t}:{s}:{v}``; the session layer of a request that names
a scope but no user hashes ``{session id}\\0scope:{scope}`` (``scoped_session_ident``).

Why no tenant, user or session reaches another's state:

* **The tenant comes first.** Every key ctxproxy writes starts with ``ctx:{tenant}:`` — but the
  inspector's sign-ins (``ui:login:``), which are an operator's, no tenant's. Tenant
  names never contain ``:`` (``config.loader`` allows ``[a-z0-9][a-z0-9_-]*``; ``tenant_prefix``
  refuses one that does), so one tenant's prefix is never a prefix of another tenant's key and a
  ``keys()`` scan of a tenant's prefix returns that tenant's keys only.
* **Then the family.** One word per family, followed by ``:``; the families' prefixes are
  prefix-free (``tests/store/test_keys.py``), so a scan of one family never returns another's key.
* **What a client chooses is hashed,** or checked: user ids, scope names, model names and
  memory session ids appear only as hashes, so no character a client sends changes a key's
  shape. A session's own keys carry its value as sent, which ``session.identity`` limits to
  ``[A-Za-z0-9._:@-]{1,128}``; its source letter keeps an ``X-Session-Id`` apart from a derived
  key of the same text, and nothing scans by a session's prefix alone: the one key with more after
  the session, a page key, ends in a fixed ``{n}:{hex}`` shape, and ``is_archived_page_of`` keeps
  a scan of ``archived_pages_prefix`` to exactly that shape (another session's value may go on
  with ``:``, but then at least two ``:`` follow the prefix).
* **A user's memories live under their own prefix** (``user_owned_prefix``): the admin API finds
  them with one scan, and a session layer of a request that names a user is inside it, so two
  users who send the same ``X-Session-Id`` never share a layer.

Keys under ``__store__:`` belong to the backend (``RESERVED_PREFIX``): its data methods refuse
them and ``keys()`` never lists them; every key above starts with ``ctx:`` or ``ui:``, so none is reserved.
Changing a spelling here orphans every value stored under the old one, so each is pinned in
``tests/store/test_keys.py``.
"""

from __future__ import annotations

import hashlib
from typing import Final, Protocol

__all__ = [
    "DEFAULT_KEY_PREFIX",
    "FENCE_KEY",
    "LEASE_PREFIX",
    "PROBE_PREFIX",
    "RESERVED_PREFIX",
    "SessionRef",
    "archived_page_key",
    "archived_pages_prefix",
    "branch_lock_key",
    "inspector_login_key",
    "checkpoints_key",
    "compaction_lock_key",
    "compaction_pending_key",
    "is_archived_page_of",
    "is_layer_version_key",
    "is_user_session_layer_of",
    "layer_version_key",
    "learned_window_key",
    "learned_windows_prefix",
    "lease_record_key",
    "lineage_layer_key",
    "memory_prefix",
    "page_recalls_key",
    "probe_key",
    "scope_layer_key",
    "scope_layer_of_marker",
    "scoped_session_ident",
    "session_history_key",
    "session_layer_key",
    "session_record_key",
    "session_records_prefix",
    "served_compactions_key",
    "session_store_id",
    "tenant_prefix",
    "tenant_stats_key",
    "tenant_stats_prefix",
    "user_layer_key",
    "user_layers_prefix",
    "user_owned_prefix",
    "user_session_layer_key",
    "user_sessions_prefix",
    "writer_marker_key",
    "writer_markers_prefix",
]

DEFAULT_KEY_PREFIX: Final = "ctxproxy:"  # a network store's prefix before each key below
RESERVED_PREFIX: Final = "__store__:"
LEASE_PREFIX: Final = RESERVED_PREFIX + "lock:"
PROBE_PREFIX: Final = RESERVED_PREFIX + "probe:"
FENCE_KEY: Final = RESERVED_PREFIX + "fence"  # the counter of a store's fencing tokens
_VERSION_SUFFIX: Final = ":v"


class SessionRef(Protocol):
    """What a session key is made of (``ctxproxy.session.SessionKey`` is one)."""

    @property
    def tenant(self) -> str: ...

    @property
    def value(self) -> str: ...

    @property
    def source(self) -> str:
        """``"header"`` (the client's ``X-Session-Id``) or ``"derived"``."""
        ...


def _hash(ident: str) -> str:
    return hashlib.blake2b(ident.encode(), digest_size=16).hexdigest()


def inspector_login_key(token: str) -> str:
    """An inspector sign-in, by its session token (hashed: the store never holds the token)."""
    return f"ui:login:{_hash(token)}"


def tenant_prefix(tenant: str) -> str:
    """The prefix of every key of ``tenant``."""
    if not tenant or ":" in tenant:
        raise ValueError(f"a tenant name is not empty and has no ':', got {tenant!r}")
    return f"ctx:{tenant}:"


# -- a session's state -------------------------------------------------------------------------


def _of_session(family: str, session: SessionRef) -> str:
    return f"{tenant_prefix(session.tenant)}{family}:{session.source[0]}:{session.value}"


def session_store_id(session: SessionRef) -> str:
    """The session's identity inside the store (it carries the tenant); memory layer keys hash it."""
    return f"{session.tenant}:{session.source[0]}:{session.value}"


def session_records_prefix(tenant: str) -> str:
    """The prefix of the tenant's session records (the admin API lists sessions with it)."""
    return tenant_prefix(tenant) + "session:"


def session_record_key(session: SessionRef) -> str:
    """When the session was first and last seen, how many requests, its newest size and model."""
    return _of_session("session", session)


def session_history_key(session: SessionRef) -> str:
    """The session's last requests: when, tokens before and after, compacted, retried."""
    return _of_session("history", session)


def checkpoints_key(session: SessionRef) -> str:
    """The session's index: its newest checkpoints and the contexts the upstream refused."""
    return _of_session("ckpt", session)


def compaction_lock_key(session: SessionRef) -> str:
    """The name of the lease held while one replica compacts the session (``Store.lock``)."""
    return _of_session("compacting", session)


def branch_lock_key(session: SessionRef) -> str:
    """The name of the lease held while one replica summarises a branch the session left."""
    return _of_session("forking", session)


def compaction_pending_key(session: SessionRef) -> str:
    """A background compaction requested while another ran: the request to run it again."""
    return _of_session("pending", session)


def archived_page_key(session: SessionRef, page: str) -> str:
    """A raw archived page; ``page`` is ``{number}:{prefix hash}``
    (``compaction.archive.page_key_suffix``), so a fork's page of the same number is another key."""
    return f"{_of_session('page', session)}:{page}"


def archived_pages_prefix(session: SessionRef) -> str:
    """What the session's archived page keys start with; a scan of it also finds the pages of a
    session whose value goes on with ``:``, which ``is_archived_page_of`` tells apart."""
    return f"{_of_session('page', session)}:"


def is_archived_page_of(session: SessionRef, key: str) -> bool:
    """Whether ``key`` is one of the session's archived pages: ``{n}:{hex}`` after its prefix."""
    prefix = archived_pages_prefix(session)
    number, colon, digest = key[len(prefix) :].partition(":")
    return (
        key.startswith(prefix)
        and bool(colon)
        and number.isascii()
        and number.isdigit()
        and digest != ""
        and all(c in "0123456789abcdef" for c in digest)
    )


def page_recalls_key(session: SessionRef) -> str:
    """How often, and when last, each archived page of the session was recalled."""
    return _of_session("recall", session)


def served_compactions_key(session: SessionRef) -> str:
    """The summaries behind the ``compaction`` items ctxproxy gave the session's client (the
    Responses API's remote compaction, served by ctxproxy), by the items' ids."""
    return _of_session("served", session)


def tool_outputs_key(session: SessionRef) -> str:
    """Which of the session's tool results were sent compressed, and their compressed text."""
    return _of_session("toolout", session)


def tool_output_original_key(session: SessionRef, ref: str) -> str:
    """A tool result's original text, by its reference (``r`` and hex digits, no ``:``)."""
    return f"{tool_output_originals_prefix(session)}{ref}"


def tool_output_originals_prefix(session: SessionRef) -> str:
    """What the session's tool-output originals' keys start with; ``is_tool_output_original_of``
    tells them from another session's whose value goes on with ``:``."""
    return f"{_of_session('original', session)}:"


def is_tool_output_original_of(session: SessionRef, key: str) -> bool:
    """Whether ``key`` is one of the session's tool-output originals: ``r{hex}`` after its prefix."""
    prefix = tool_output_originals_prefix(session)
    ref = key[len(prefix) :]
    return key.startswith(prefix) and len(ref) > 1 and ref[0] == "r" and all(c in "0123456789abcdef" for c in ref[1:])


# -- a tenant's models ---------------------------------------------------------------------------


def learned_windows_prefix(tenant: str) -> str:
    return tenant_prefix(tenant) + "window:"


def learned_window_key(tenant: str, model: str | None) -> str:
    """What was learned of ``model``'s real window under ``tenant`` (no model: ``""``)."""
    digest = hashlib.sha256((model or "").encode("utf-8", "replace")).hexdigest()[:24]
    return learned_windows_prefix(tenant) + digest


# -- a tenant's traffic --------------------------------------------------------------------------


def tenant_stats_prefix(tenant: str) -> str:
    return tenant_prefix(tenant) + "stats:"


def tenant_stats_key(tenant: str, bucket: int) -> str:
    """The tenant's totals over the time bucket that starts at ``bucket`` (unix seconds)."""
    return f"{tenant_stats_prefix(tenant)}{bucket}"


# -- memory layers -------------------------------------------------------------------------------


def memory_prefix(tenant: str) -> str:
    """The prefix of every memory layer, version entry and writer marker of ``tenant``."""
    return tenant_prefix(tenant) + "mem:"


def user_layers_prefix(tenant: str) -> str:
    """The prefix of every user's layers (and everything else users own)."""
    return memory_prefix(tenant) + "user:"


def user_layer_key(tenant: str, user: str) -> str:
    """``user``'s own layer; also the start of everything else their requests own."""
    return memory_prefix(tenant) + "user:" + _hash(user)


def user_owned_prefix(tenant: str, user: str) -> str:
    """The prefix of ``user``'s session layers, writer markers and version entries (their user
    layer's too)."""
    return user_layer_key(tenant, user) + ":"


def is_user_session_layer_of(tenant: str, key: str, session: str) -> bool:
    """Whether ``key`` is some user's layer of the session whose store id is ``session``."""
    return key.startswith(user_layers_prefix(tenant)) and key.endswith(":session:" + _hash(session))


def user_sessions_prefix(tenant: str, user: str) -> str:
    """The prefix of ``user``'s session layers (and of their version entries)."""
    return user_owned_prefix(tenant, user) + "session:"


def user_session_layer_key(tenant: str, user: str, session: str) -> str:
    """``user``'s layer of the session whose store id is ``session``."""
    return user_sessions_prefix(tenant, user) + _hash(session)


def scope_layer_key(tenant: str, scope: str) -> str:
    return memory_prefix(tenant) + "scope:" + _hash(scope)


def scoped_session_ident(session: str, scope: str) -> str:
    """The id hashed into the session layer of a request that names ``scope`` and no user."""
    return f"{session}\0scope:{scope}"


def session_layer_key(tenant: str, ident: str) -> str:
    """The layer of a session (``ident``: its store id, maybe with its scope) when no user is named."""
    return memory_prefix(tenant) + "session:" + _hash(ident)


def lineage_layer_key(tenant: str, session: str) -> str:
    """The lineage-bound layer of an anonymous session (``session``: its store id)."""
    return memory_prefix(tenant) + "lineage:" + _hash(session)


def writer_markers_prefix(tenant: str, user: str) -> str:
    """The prefix of the markers "``user`` wrote cards to this scope layer"."""
    return user_owned_prefix(tenant, user) + "wrote:"


def writer_marker_key(tenant: str, user: str, scope: str) -> str:
    """Ends in the same hash as ``scope_layer_key(tenant, scope)``, so the layer follows from it."""
    return writer_markers_prefix(tenant, user) + _hash(scope)


def scope_layer_of_marker(tenant: str, marker: str) -> str:
    """The key of the scope layer a writer marker (``writer_marker_key``) points at."""
    return memory_prefix(tenant) + "scope:" + marker.rsplit(":", 1)[1]


def layer_version_key(layer: str) -> str:
    """The small ``{epoch, rev, count}`` entry written with the layer ``layer`` in one step."""
    return layer + _VERSION_SUFFIX


def is_layer_version_key(key: str) -> bool:
    """Whether ``key`` is a version entry (a layer key ends in a hex hash, never in ``:v``)."""
    return key.endswith(_VERSION_SUFFIX)


# -- the backend's own records -------------------------------------------------------------------


def lease_record_key(name: str) -> str:
    """Where a backend keeps the lease on the lock named ``name``, apart from ``name``'s value."""
    return LEASE_PREFIX + name


def probe_key(token: str) -> str:
    return PROBE_PREFIX + token
