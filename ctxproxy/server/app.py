"""The aiohttp application: routes, middleware, and the shared objects' lifetimes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from aiohttp import web

from ctxproxy.background import BackgroundTasks
from ctxproxy.cache import CachePool
from ctxproxy.compaction.engine import Compactor
from ctxproxy.compaction.learning import WindowLearning
from ctxproxy.compaction.windows import UnknownModels
from ctxproxy.config import ConfigHolder
from ctxproxy.config.models import StoreSettings
from ctxproxy.inspector.routes import add_inspector_routes
from ctxproxy.memory.after_round import RoundMemory
from ctxproxy.memory.memories import MemoryStore
from ctxproxy.memory.pins import SessionPins
from ctxproxy.memory.readable_memo import ReadableMemo
from ctxproxy.memory.search_memo import SearchMemo
from ctxproxy.memory.writer import MemoryWriter
from ctxproxy.metrics import METRICS, CountingStore, Metrics, add_metrics_route
from ctxproxy.pipeline.model_facts import MODEL_FACTS, ModelFacts
from ctxproxy.plugins import log_plugins
from ctxproxy.server.admin import add_admin_routes, require_admin_key
from ctxproxy.server.announce import announce_stopped, announce_tenants
from ctxproxy.server.chat import chat_completions
from ctxproxy.server.cors import add_cors
from ctxproxy.server.doubled_v1 import doubled_v1
from ctxproxy.server.gemini import add_gemini_routes
from ctxproxy.server.health import healthz, readyz
from ctxproxy.server.messages import messages
from ctxproxy.server.middleware import add_request_id, request_context
from ctxproxy.server.passthrough import passthrough
from ctxproxy.server.probes import add_probe_routes
from ctxproxy.server.responses import compact, responses, responses_socket
from ctxproxy.services import (
    CACHES,
    COMPACTOR,
    CONFIG,
    HTTP,
    KNOWN,
    LEARNING,
    MEMORIES,
    PLUGINS,
    PROMPTS,
    RECORDER,
    ROUND_MEMORY,
    SESSION_PINS,
    STORE,
    TASKS,
    TOKENS,
    UNKNOWN_MODELS,
)
from ctxproxy.session.known import KnownConversations
from ctxproxy.session.prompt_prints import PromptPrints
from ctxproxy.session.recorder import SessionRecorder
from ctxproxy.store import Store, StoreError, open_store
from ctxproxy.tokens import TokenCounter, TokenSettings
from ctxproxy.upstream.client import open_session
from ctxproxy.wire.incremental import BODIES, RawBodies


def create_app(holder: ConfigHolder) -> web.Application:
    settings = holder.current.settings
    app = web.Application(middlewares=[request_context], client_max_size=settings.server.max_body_bytes)
    app[CONFIG] = holder
    app[MODEL_FACTS] = ModelFacts(holder)
    app.on_response_prepare.append(add_request_id)
    add_cors(app, settings.server.cors_origins)
    app.cleanup_ctx.append(_resources)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    if settings.server.metrics:
        add_metrics_route(app, Metrics(holder), require_admin_key)
    add_admin_routes(app)
    add_inspector_routes(app)
    add_probe_routes(app)
    for prefix in ("", "/t/{tenant}"):
        # Also without /v1: some clients are configured with a base URL that lacks it.
        for path in (prefix + "/v1/chat/completions", prefix + "/chat/completions"):
            app.router.add_post(path, chat_completions)
            app.router.add_route("*", path, _post_only)
        app.router.add_post(prefix + "/v1/messages", messages)
        app.router.add_post(prefix + "/v1/responses", responses)
        app.router.add_get(prefix + "/v1/responses", responses_socket)
        app.router.add_post(prefix + "/v1/responses/compact", compact)
        add_gemini_routes(app, prefix)
        app.router.add_route("*", prefix + "/v1/v1/{tail:.*}", doubled_v1)  # before the relay: it would match too
        app.router.add_route("*", prefix + "/v1/{tail:.*}", passthrough)
    return app


async def _post_only(request: web.Request) -> web.StreamResponse:
    """The chat path is ctxproxy's own endpoint: other methods are refused, not relayed."""
    raise web.HTTPMethodNotAllowed(request.method, ["POST"])


async def _resources(app: web.Application) -> AsyncIterator[None]:
    holder = app[CONFIG]
    settings = holder.current.settings
    metrics = app.get(METRICS)
    caches = app[CACHES] = CachePool(settings.server.cache_max_bytes)
    token_counts = caches.lru("token_counts", max_entries=settings.tokens.cache_size)
    app[TOKENS] = TokenCounter(TokenSettings(**settings.tokens.model_dump()), token_counts)
    store = await _open_store(settings.store)
    app[STORE] = store if metrics is None else CountingStore(store, metrics.store_error)
    app[HTTP] = await open_session(settings.server.upstream_dns_ttl)
    app[TASKS] = BackgroundTasks()
    readers, searches = ReadableMemo(caches.lru("memory_readers")), SearchMemo(caches.lru("memory_searches"))
    app[MEMORIES] = MemoryStore(app[STORE], cache=caches.lru("memory_indexes"), readers=readers, searches=searches)
    plugins = app[PLUGINS] = app[CONFIG].current.plugins
    log_plugins(plugins)
    writer = MemoryWriter(app[MEMORIES], app[HTTP])
    app[ROUND_MEMORY] = RoundMemory(writer, app[TASKS], caches.lru("memory_rounds"))
    app[SESSION_PINS] = SessionPins(caches.lru("memory_pins"))
    app[COMPACTOR] = Compactor(
        app[STORE], app[TASKS], app[TOKENS], app[HTTP], plugins.strategies, app[MEMORIES], caches, plugins, metrics
    )
    app[RECORDER] = SessionRecorder(app[STORE])
    app[KNOWN] = KnownConversations(caches.lru("known_conversations"))
    app[BODIES] = RawBodies(caches.lru("raw_bodies"))
    app[PROMPTS] = PromptPrints(caches.lru("prompt_prints"))
    app[UNKNOWN_MODELS] = UnknownModels(caches.lru("unknown_models"))
    app[LEARNING] = WindowLearning(app[STORE], caches.lru("learned_windows"))
    recording = asyncio.create_task(app[RECORDER].run(), name="session_recorder")
    announce_tenants(holder.current)
    try:
        yield
    finally:
        await app[TASKS].drain(timeout=settings.server.shutdown_timeout)
        recording.cancel()
        await asyncio.gather(recording, return_exceptions=True)  # its last flush runs on the way out
        await app[HTTP].close()
        await app[STORE].close()
        announce_stopped(holder.generation)


async def _open_store(settings: StoreSettings) -> Store:
    """The configured store, once it takes writes: a proxy that could not keep any state (a Redis
    that is down, a read-only directory) refuses to start (``StoreError``) rather than serve."""
    store = open_store(**settings.open_args())
    try:
        await store.check_writable()
    except StoreError:
        await store.close()
        raise
    return store
