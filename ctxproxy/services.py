"""Typed keys for the objects an app shares between requests (opened in the app's ``cleanup_ctx``): the
services the pipeline, the wire adapters and the HTTP handlers use."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web

from ctxproxy.background import BackgroundTasks
from ctxproxy.cache import CachePool
from ctxproxy.compaction.engine import Compactor
from ctxproxy.compaction.learning import WindowLearning
from ctxproxy.compaction.windows import UnknownModels
from ctxproxy.config import ConfigHolder
from ctxproxy.errors import ProxyError
from ctxproxy.memory.after_round import RoundMemory
from ctxproxy.memory.memories import MemoryStore
from ctxproxy.memory.pins import SessionPins
from ctxproxy.plugins import Plugins
from ctxproxy.session.known import KnownConversations
from ctxproxy.session.prompt_prints import PromptPrints
from ctxproxy.session.recorder import SessionRecorder
from ctxproxy.store import Store
from ctxproxy.tokens import TokenCounter
from ctxproxy.upstream.client import UpstreamHttp

CONFIG = web.AppKey("config", ConfigHolder)
STORE = web.AppKey("store", Store)
HTTP = web.AppKey("http", UpstreamHttp)
TOKENS = web.AppKey("tokens", TokenCounter)
TASKS = web.AppKey("tasks", BackgroundTasks)
COMPACTOR = web.AppKey("compactor", Compactor)
MEMORIES = web.AppKey("memories", MemoryStore)
ROUND_MEMORY = web.AppKey("round_memory", RoundMemory)
SESSION_PINS = web.AppKey("session_pins", SessionPins)  # what ctxproxy added to a session's prompt
RECORDER = web.AppKey("recorder", SessionRecorder)
KNOWN = web.AppKey("known", KnownConversations)
PROMPTS = web.AppKey("prompts", PromptPrints)  # each session's last prompt prints (X-Ctx-Cache-Prefix)
LEARNING = web.AppKey("learning", WindowLearning)
UNKNOWN_MODELS = web.AppKey("unknown_models", UnknownModels)
CACHES = web.AppKey("caches", CachePool)
PLUGINS = web.AppKey("plugins", Plugins)  # loaded once, with the config the app started with

# Per-request: the fields of the one log line written when the request ends.
LogFields = dict[str, Any]
LOG_FIELDS = web.RequestKey("log_fields", LogFields)
# Per-request: how an error is answered in the protocol the request speaks (default: OpenAI's shape).
ErrorResponse = Callable[[ProxyError, web.Request], web.Response]
ERROR_RESPONSE: web.RequestKey[ErrorResponse] = web.RequestKey("error_response")
REQUEST_ID = web.RequestKey("request_id", str)
# What a request does once its answer is sent (``ctxproxy.server.middleware``): calls that await nothing.
AFTER_ANSWER: web.RequestKey[list[Callable[[], None]]] = web.RequestKey("after_answer")
