"""Deleting a session: everything the Store keeps of one conversation, in one atomic step.

That is its record and history, its checkpoint index (with the Contents Page), a pending
background compaction, its archived pages and their recall counts, the summaries behind the
compaction items ctxproxy served it (Responses API), and its session-layer
memories with their version entries: the layer of each user who wrote in it (found by a scan of
the users' layers, so none is missed), the layer of requests without a user, the layer of each
scope its record names, and an anonymous conversation's lineage-bound layer. A user's own
layer, and scope layers, are not the session's: they stay (the admin API deletes a user's
memories). A compaction lease is left to expire.
"""

from __future__ import annotations

from collections.abc import Iterable

from ctxproxy.session.identity import SessionKey
from ctxproxy.session.records import record_names
from ctxproxy.store import JSONValue, Store, UpdateFn
from ctxproxy.store.keys import (
    archived_pages_prefix,
    checkpoints_key,
    compaction_pending_key,
    is_archived_page_of,
    is_tool_output_original_of,
    is_user_session_layer_of,
    layer_version_key,
    lineage_layer_key,
    page_recalls_key,
    scoped_session_ident,
    served_compactions_key,
    session_history_key,
    session_layer_key,
    session_record_key,
    tool_output_originals_prefix,
    tool_outputs_key,
    user_layers_prefix,
    user_session_layer_key,
)


def session_memory_layers(key: SessionKey, users: Iterable[str], scopes: Iterable[str]) -> list[str]:
    """The keys of the session's memory layers for the given users and scopes (and of the
    layers every session may have: without a user, and lineage-bound)."""
    store_id, tenant = key.store_id, key.tenant
    return [
        *(user_session_layer_key(tenant, user, store_id) for user in users),
        session_layer_key(tenant, store_id),
        *(session_layer_key(tenant, scoped_session_ident(store_id, scope)) for scope in scopes),
        lineage_layer_key(tenant, store_id),
    ]


async def session_keys(store: Store, key: SessionKey) -> list[str]:
    """Every key the Store may hold for the session (some of them absent)."""
    record = await store.get(session_record_key(key))
    pages = [k for k in await store.keys(archived_pages_prefix(key)) if is_archived_page_of(key, k)]
    originals = [k for k in await store.keys(tool_output_originals_prefix(key)) if is_tool_output_original_of(key, k)]
    owned = [
        k
        for k in await store.keys(user_layers_prefix(key.tenant))
        if is_user_session_layer_of(key.tenant, k, key.store_id)
    ]
    layers = [*session_memory_layers(key, (), record_names(record, "scopes")), *owned]
    return [
        session_record_key(key),
        session_history_key(key),
        checkpoints_key(key),
        compaction_pending_key(key),
        page_recalls_key(key),
        served_compactions_key(key),
        tool_outputs_key(key),
        *pages,
        *originals,
        *layers,
        *(layer_version_key(layer) for layer in layers),
    ]


async def forget_session(store: Store, key: SessionKey) -> bool:
    """Delete the session's keys in one ``update_many``; True if any of them existed."""
    found: list[str] = []

    def gone(name: str) -> UpdateFn:
        def fn(current: JSONValue | None) -> None:
            if current is not None:
                found.append(name)

        return fn

    await store.update_many({name: gone(name) for name in dict.fromkeys(await session_keys(store, key))})
    return bool(found)
