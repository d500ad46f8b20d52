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
from ctxproxy.inspector.routes import add_inspector_routes
from ctxproxy.memory.after_round import RoundMemory
from ctxproxy.memory.memories import MemoryStore
from ctxproxy.memory.pins import LayerPins
from ctxproxy.memory.writer import MemoryWriter
from ctxproxy.server.admin import add_admin_routes
from ctxproxy.server.chat import chat_completions
from ctxproxy.server.cors import add_cors
from ctxproxy.server.health import healthz, readyz
from ctxproxy.server.messages import messages
from ctxproxy.server.middleware import add_request_id, request_context
from ctxproxy.server.passthrough import passthrough
from ctxproxy.services import (
    CACHES,
    COMPACTOR,
    CONFIG,
    HTTP,
    KNOWN,
    LAYER_PINS,
    LEARNING,
    MEMORIES,
    RECORDER,
    ROUND_MEMORY,
    STORE,
    TASKS,
    TOKENS,
    UNKNOWN_MODELS,
)
from ctxproxy.session.known import KnownConversations
from ctxproxy.session.recorder import SessionRecorder
from ctxproxy.store import open_store
from ctxproxy.strategies.registry import builtin_registry
from ctxproxy.tokens import TokenCounter, TokenSettings
from ctxproxy.upstream.client import open_session


def create_app(holder: ConfigHolder) -> web.Application:
    settings = holder.current.settings
    app = web.Application(middlewares=[request_context], client_max_size=settings.server.max_body_bytes)
    app[CONFIG] = holder
    app.on_response_prepare.append(add_request_id)
    add_cors(app, settings.server.cors_origins)
    app.cleanup_ctx.append(_resources)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    add_admin_routes(app)
    add_inspector_routes(app)
    for prefix in ("", "/t/{tenant}"):
        # Also without /v1: some clients are configured with a base URL that lacks it.
        for path in (prefix + "/v1/chat/completions", prefix + "/chat/completions"):
            app.router.add_post(path, chat_completions)
            app.router.add_route("*", path, _post_only)
        app.router.add_post(prefix + "/v1/messages", messages)
        app.router.add_route("*", prefix + "/v1/{tail:.*}", passthrough)
    return app


async def _post_only(request: web.Request) -> web.StreamResponse:
    """The chat path is ctxproxy's own endpoint: other methods are refused, not relayed."""
    raise web.HTTPMethodNotAllowed(request.method, ["POST"])


async def _resources(app: web.Application) -> AsyncIterator[None]:
    settings = app[CONFIG].current.settings
    caches = app[CACHES] = CachePool(settings.server.cache_max_bytes)
    token_counts = caches.lru("token_counts", max_entries=settings.tokens.cache_size)
    app[TOKENS] = TokenCounter(TokenSettings(**settings.tokens.model_dump()), token_counts)
    app[STORE] = open_store(settings.store.backend, settings.store.path)
    app[HTTP] = await open_session()
    app[TASKS] = BackgroundTasks()
    app[MEMORIES] = MemoryStore(app[STORE], cache=caches.lru("memory_indexes"))
    writer = MemoryWriter(app[MEMORIES], app[HTTP])
    app[ROUND_MEMORY] = RoundMemory(writer, app[TASKS], caches.lru("memory_rounds"))
    app[LAYER_PINS] = LayerPins(caches.lru("memory_pins"))
    app[COMPACTOR] = Compactor(
        app[STORE], app[TASKS], app[TOKENS], app[HTTP], builtin_registry(), app[MEMORIES], caches
    )
    app[RECORDER] = SessionRecorder(app[STORE])
    app[KNOWN] = KnownConversations(caches.lru("known_conversations"))
    app[UNKNOWN_MODELS] = UnknownModels(caches.lru("unknown_models"))
    app[LEARNING] = WindowLearning(app[STORE], caches.lru("learned_windows"))
    recording = asyncio.create_task(app[RECORDER].run(), name="session_recorder")
    try:
        yield
    finally:
        await app[TASKS].drain(timeout=settings.server.shutdown_timeout)
        recording.cancel()
        await asyncio.gather(recording, return_exceptions=True)  # its last flush runs on the way out
        await app[HTTP].close()
        await app[STORE].close()
