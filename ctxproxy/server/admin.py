"""The admin API: what ctxproxy keeps about a tenant's sessions and users, for operators.

Every route needs ``Authorization: Bearer <[admin] api_key of proxy.toml>``; without a key
configured the admin API is off and every route answers 401 saying so::

    GET    /admin/tenants                                         tenants: strategy, mode, sessions
    GET    /admin/tenants/{tenant}/sessions                       sessions, newest first
    GET    /admin/tenants/{tenant}/sessions/{session}             checkpoints, Contents Page, pages
    DELETE /admin/tenants/{tenant}/sessions/{session}             delete everything kept of a session
    GET    /admin/tenants/{tenant}/sessions/{session}/pages/{n}   one archived page, raw
    GET    /admin/tenants/{tenant}/users/{user}/memories[?q=…]    a user's memories, or a search
    DELETE /admin/tenants/{tenant}/users/{user}/memories/{id}     delete one memory
    DELETE /admin/tenants/{tenant}/users/{user}/memories          delete all of a user's memories
    GET    /admin/tenants/{tenant}/windows                        configured vs learned windows, per model

A windows row says, for each protocol clients speak (``PROTOCOLS``, by the path they post to),
the prior count ratio its adapter gives pre-flight until the model's own is learned, and the
window pre-flight compacts to with it (``protocols``).

``{session}`` is the value of ``X-Ctx-Session``; add ``?source=header`` for a client-chosen
``X-Session-Id`` that looks like a derived one. Nothing here writes except the deletes. Deleting
a session removes its record and history, checkpoints, archived pages, recall counts and
session-layer memories (``ctxproxy.session.forget``), as the inspector's delete button does.

A user's memories are everything their requests wrote (``MemoryStore.user_memories``): their
user layer, their own session layers, and the cards they wrote to scope layers. A delete
removes them from all of those and touches no other user's layer; a card in a shared scope
layer that a teammate wrote too stays theirs (see ``ctxproxy.memory.memories``).

Numbers in the path or the query (``limit``, ``{n}``) are ASCII digits only; anything else is a
400 that names the parameter and the accepted range, never an internal error.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from aiohttp import web

from ctxproxy.compaction.checkpoints import decode_index
from ctxproxy.config.models import TenantConfig
from ctxproxy.errors import BadRequest, NotFound, TenantNotFound, Unauthorized
from ctxproxy.inspector import queries
from ctxproxy.pipeline.turn import Turn
from ctxproxy.pipeline.wire import WireAdapter
from ctxproxy.server.messages import ANTHROPIC_MESSAGES
from ctxproxy.server.request_headers import check_request_headers
from ctxproxy.server.tenancy import bearer_token
from ctxproxy.services import COMPACTOR, CONFIG, LEARNING, MEMORIES, RECORDER, STORE
from ctxproxy.session.identity import SessionKey
from ctxproxy.store.keys import archived_page_key, checkpoints_key
from ctxproxy.strategies.paged.contents import decode_entries
from ctxproxy.wire.openai_chat import OPENAI_CHAT

PREFIX = "/admin/tenants/{tenant}"
_DERIVED = re.compile(r"^s_[0-9a-f]{24}$")
_DIGITS = re.compile(r"[0-9]{1,10}")  # ASCII only: str.isdigit() also accepts "²", which int() refuses
MAX_LIMIT = 1000
MAX_PAGE = 2**31 - 1
# The protocols clients speak to ctxproxy, by the path they post to.
PROTOCOLS: tuple[tuple[str, WireAdapter], ...] = (
    ("/v1/chat/completions", OPENAI_CHAT),
    ("/v1/messages", ANTHROPIC_MESSAGES),
)


def add_admin_routes(app: web.Application) -> None:
    app.router.add_get("/admin/tenants", list_tenants)
    app.router.add_get(PREFIX + "/sessions", list_sessions)
    app.router.add_get(PREFIX + "/sessions/{session}", show_session)
    app.router.add_delete(PREFIX + "/sessions/{session}", delete_session)
    app.router.add_get(PREFIX + "/sessions/{session}/pages/{page}", show_page)
    app.router.add_get(PREFIX + "/users/{user}/memories", list_memories)
    app.router.add_delete(PREFIX + "/users/{user}/memories/{id}", delete_memory)
    app.router.add_delete(PREFIX + "/users/{user}/memories", delete_memories)
    app.router.add_get(PREFIX + "/windows", list_windows)


def require_admin_key(request: web.Request) -> None:
    """Refuse (401) a request without the admin key (``AdminSettings.accepts``, the one check the
    inspector makes too); also what guards ``/metrics`` with ``[server] metrics_auth``."""
    check_request_headers(request.headers)
    admin = request.app[CONFIG].current.settings.admin
    if admin.api_key is None:
        raise Unauthorized(
            "The admin API is off: set [admin] api_key in proxy.toml.",
            code="admin_disabled",
            cause="no [admin] api_key configured",
        )
    if not admin.accepts(bearer_token(request.headers.get("Authorization")) or ""):
        raise Unauthorized(
            "The admin API needs 'Authorization: Bearer <admin key>' ([admin] api_key in proxy.toml).",
            code="invalid_admin_key",
            cause="missing or wrong admin key",
        )


def _tenant(request: web.Request) -> TenantConfig:
    """Check the admin key, then name the tenant (so an unknown tenant is not revealed to a
    caller without the key)."""
    require_admin_key(request)
    config = request.app[CONFIG].current
    name = request.match_info["tenant"]
    tenant = config.tenants.get(name)
    if tenant is None:
        raise TenantNotFound(f"Unknown tenant {name!r}.")
    return tenant


def _integer(raw: str, param: str, what: str, maximum: int) -> int:
    """``raw`` as an integer from 1 to ``maximum``, else a 400 naming ``param`` and the range."""
    value = int(raw) if _DIGITS.fullmatch(raw) else 0
    if not 1 <= value <= maximum:
        shown = raw if len(raw) <= 20 else raw[:20] + "…"
        raise BadRequest(f"{what} must be an integer from 1 to {maximum}, got {shown!r}.", param=param)
    return value


def _limit(request: web.Request, default: int = 100) -> int:
    return _integer(request.query.get("limit", str(default)), "limit", "limit", MAX_LIMIT)


def _session(request: web.Request, tenant: TenantConfig) -> SessionKey:
    value = request.match_info["session"]
    source = request.query.get("source")
    if source not in (None, "header", "derived"):
        raise BadRequest("source must be 'header' or 'derived'.", param="source")
    kind: Literal["header", "derived"] = source or ("derived" if _DERIVED.match(value) else "header")  # type: ignore[assignment]
    return SessionKey(tenant.name, value, kind)


async def list_tenants(request: web.Request) -> web.Response:
    require_admin_key(request)
    tenants = sorted(request.app[CONFIG].current.tenants.values(), key=lambda t: t.name)
    store = request.app[STORE]
    data = [
        {
            "name": t.name,
            "strategy": t.compaction.strategy,
            "mode": t.compaction.mode,
            "sessions": await queries.tenant_sessions(store, t.name),
        }
        for t in tenants
    ]
    return web.json_response({"object": "list", "data": data})


async def list_sessions(request: web.Request) -> web.Response:
    tenant = _tenant(request)
    records = await queries.session_records(request.app[STORE], tenant.name)
    limit = _limit(request)
    return web.json_response({"object": "list", "data": records[:limit], "total": len(records)})


async def show_session(request: web.Request) -> web.Response:
    tenant = _tenant(request)
    key = _session(request, tenant)
    detail = await queries.session_detail(request.app[STORE], request.app[COMPACTOR].kinds, key)
    if detail is None:
        raise NotFound(f"No checkpoints for session {key.value!r} of tenant {tenant.name!r}.")
    return web.json_response(detail)


async def delete_session(request: web.Request) -> web.Response:
    tenant = _tenant(request)
    key = _session(request, tenant)
    if not await request.app[RECORDER].forget(key):
        raise NotFound(f"Tenant {tenant.name!r} has no session {key.value!r}.")
    return web.json_response({"session": key.value, "source": key.source, "deleted": True})


async def show_page(request: web.Request) -> web.Response:
    tenant = _tenant(request)
    key = _session(request, tenant)
    number = _integer(request.match_info["page"], "page", "The page number", MAX_PAGE)
    store = request.app[STORE]
    for checkpoint in sorted(decode_index(await store.get(checkpoints_key(key))), key=lambda c: -c.end):
        for entry in decode_entries(checkpoint.state):
            if entry.page == number:
                page = await store.get(archived_page_key(key, entry.key))
                if isinstance(page, dict):
                    return web.json_response({"page": entry.page, "messages": [entry.start, entry.end], **page})
    raise NotFound(f"Session {key.value!r} has no archived page #{number}.")


async def list_memories(request: web.Request) -> web.Response:
    tenant = _tenant(request)
    user = request.match_info["user"]
    memories = request.app[MEMORIES]
    query = request.query.get("q")
    limit = _limit(request, 50)
    data: list[dict[str, Any]]
    if query:
        hits = await memories.search_user(tenant.name, user, query, limit)
        data = [{**hit.doc.to_json(), "layer": hit.layer, "score": round(hit.score, 4)} for hit in hits]
    else:
        found = await memories.user_memories(tenant.name, user)
        found.sort(key=lambda item: -item[1].created_at)
        data = [{**doc.to_json(), "layer": layer} for layer, doc in found[:limit]]
    for item in data:
        item.pop("vector", None)
    return web.json_response({"object": "list", "data": data})


async def delete_memory(request: web.Request) -> web.Response:
    tenant = _tenant(request)
    user, ident = request.match_info["user"], request.match_info["id"]
    if await request.app[MEMORIES].delete_user_memories(tenant.name, user, [ident]) == 0:
        raise NotFound(f"User {user!r} has no memory {ident!r}.")
    return web.json_response({"id": ident, "deleted": True})


async def delete_memories(request: web.Request) -> web.Response:
    tenant = _tenant(request)
    deleted = await request.app[MEMORIES].delete_user_memories(tenant.name, request.match_info["user"])
    return web.json_response({"deleted": deleted})


async def list_windows(request: web.Request) -> web.Response:
    """Per model with something learned (``ctxproxy.compaction.learned``): the configured window, the
    learned one and count ratio, and the window pre-flight uses, per protocol."""
    tenant = _tenant(request)
    return web.json_response({"object": "list", "data": await request.app[LEARNING].report(tenant, _priors)})


def _priors(model: str) -> dict[str, float | None]:
    """Each protocol's prior count ratio for a request of ``model`` (one naming nothing else)."""
    turn = Turn({"model": model}, b"", [], model or None, stream=False, user=None)
    return {path: adapter.count_ratio(turn) for path, adapter in PROTOCOLS}
