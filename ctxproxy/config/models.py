"""Typed configuration. Every model forbids unknown keys, so a typo is an error at start-up.

``ProxySettings`` is ``proxy.toml`` minus its ``[defaults]`` table; ``TenantConfig`` is one
``tenants/<name>.toml`` merged over those defaults. ``[server]``, ``[store]`` and ``[tokens]``
take effect on restart; tenants and ``[defaults]`` are picked up by a reload (SIGHUP).
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationInfo, field_validator, model_validator
from yarl import URL

from ctxproxy.cache import DEFAULT_CACHE_MAX_BYTES
from ctxproxy.store import check_options
from ctxproxy.store.keys import DEFAULT_KEY_PREFIX
from ctxproxy.strategies.base import Optimise
from ctxproxy.strategies.hysteresis import summary_budget
from ctxproxy.vocabulary import PLACEMENT_ASSISTANT_NAMED, Placement

MIB = 1024 * 1024
UPSTREAM_DNS_TTL = 300  # [server] upstream_dns_ttl: what aiohttp's client was given (ttl_dns_cache)
MIN_CONTEXT_WINDOW = 1024  # the smallest model window a tenant may configure, in tokens
# [compaction.tool_outputs]: chosen by bench/tool_outputs.py (README: the cheapest pair that leaves
# the newest 4 agent turns whole)
DEFAULT_KEEP_TURNS = 2
DEFAULT_TOOL_OUTPUT_MIN_TOKENS = 1000


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServerSettings(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=1, le=65535)
    max_body_bytes: int = Field(32 * MIB, ge=MIB, description="largest request body accepted")
    log_format: Literal["json", "console"] = "json"
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    shutdown_timeout: float = Field(30.0, gt=0)
    read_timeout: float = Field(
        30.0, gt=0, description="longest wait for a client's next bytes: a request's headers, the rest of its body"
    )
    upstream_dns_ttl: int = Field(
        UPSTREAM_DNS_TTL, ge=0, description="seconds an upstream host's looked-up addresses serve new connections"
    )
    cache_max_bytes: int = Field(
        DEFAULT_CACHE_MAX_BYTES, ge=MIB, description="bytes all in-process caches may hold together"
    )
    metrics: bool = Field(True, strict=True, description="serve GET /metrics (Prometheus text format)")
    metrics_auth: bool = Field(
        False, strict=True, description="GET /metrics needs the admin key ([admin] api_key), as /admin/* does"
    )
    cors_origins: list[str] = Field(
        [], description='browser origins allowed to call the proxy (CORS), e.g. "https://app.example"; "*": any'
    )

    @field_validator("cors_origins")
    @classmethod
    def _origins(cls, value: list[str]) -> list[str]:
        return [_origin(origin) for origin in value]


def _origin(value: str) -> str:
    """``*``, or an origin as browsers send it (lower-case, no default port)."""
    url = URL(value) if value != "*" else None
    if url is None:
        return value
    if url.scheme in ("http", "https") and url.host and url.raw_path in ("", "/") and not url.raw_query_string:
        if not (url.user or url.fragment):
            return str(url.origin())
    raise ValueError(f'each must be an origin such as https://app.example (no path) or "*", got {value!r}')


class StoreSettings(_Strict):
    """``[store]``: ``diskcache`` at ``path`` (one machine), or ``redis`` at ``url`` (replicas share it)."""

    backend: Literal["diskcache", "redis"] = "diskcache"
    path: str = Field("data", description="diskcache: the store's directory")
    url: SecretStr | None = Field(
        None, validate_default=True, description='redis: "redis://[:password@]host:6379/0" (or rediss://, unix://)'
    )
    key_prefix: str = Field(DEFAULT_KEY_PREFIX, description="redis: put before every key, so deployments can share one")
    pool_size: int = Field(32, ge=1, le=10_000, description="redis: most connections open at once")
    timeout: float = Field(2.0, gt=0, description="redis: longest wait for one command (or for a free connection)")
    connect_timeout: float = Field(2.0, gt=0, description="redis: longest wait for a connection to be made")
    session_ttl_days: float = Field(30.0, gt=0, description="idle sessions expire after this")

    @field_validator("url")
    @classmethod
    def _url_fits_backend(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        url = value.get_secret_value() if value is not None else ""
        backend = info.data.get("backend")
        if isinstance(backend, str):
            check_options(backend, url or None)
        return value if url else None

    def open_args(self) -> dict[str, Any]:
        """``ctxproxy.store.open_store``'s arguments (the url with its password)."""
        args = self.model_dump(exclude={"session_ttl_days", "url"})
        return {**args, "url": self.url.get_secret_value() if self.url is not None else None}


class TokenSettingsModel(_Strict):
    allow_download: bool = False
    image_tokens_low: int = Field(85, ge=0)
    image_tokens_high: int = Field(765, ge=0)
    cache_size: int = Field(200_000, ge=1)


class AdminSettings(_Strict):
    """``[admin]``: the admin API (``/admin/...``) answers only requests bearing this key; without
    one configured, the admin API is off."""

    api_key: SecretStr | None = None

    @field_validator("api_key", mode="before")
    @classmethod
    def _empty_is_none(cls, value: object) -> object:
        return None if value == "" else value

    def accepts(self, given: str) -> bool:
        """Whether ``given`` is the admin key (compared in constant time; never, without one)."""
        if self.api_key is None:
            return False
        # surrogatepass: a header aiohttp could not decode as UTF-8 still compares (as unequal)
        expected = self.api_key.get_secret_value().encode()
        return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected)

    def derived_secret(self, purpose: str) -> bytes | None:
        """A secret for ``purpose`` derived from the admin key (None without one): what signs
        the inspector's cookies, so the key itself never leaves the process."""
        if self.api_key is None:
            return None
        return hmac.new(self.api_key.get_secret_value().encode(), purpose.encode(), hashlib.sha256).digest()


class PluginSettings(_Strict):
    """``[plugins]`` (``ctxproxy.plugins``): which installed plugins load, and how long a hook may take."""

    enabled: list[str] | None = Field(None, description="plugin (entry point) names to load; default: every one")
    hook_timeout: float = Field(2.0, gt=0, le=60, description="seconds a hook call may take; then it is ignored")


class ProxySettings(_Strict):
    server: ServerSettings = ServerSettings()
    store: StoreSettings = StoreSettings()
    tokens: TokenSettingsModel = TokenSettingsModel()
    admin: AdminSettings = AdminSettings()
    plugins: PluginSettings = PluginSettings()


class UpstreamConfig(_Strict):
    base_url: str = "https://api.openai.com/v1"
    api_key: SecretStr | None = None
    connect_timeout: float = Field(10.0, gt=0)
    read_timeout: float = Field(600.0, gt=0)
    headers: dict[str, str] = {}
    learned_window_days: float = Field(
        7.0, ge=0, description="forget a window or count ratio learned from this upstream after this; 0: never learn"
    )
    stream_usage: bool = Field(
        True,
        description="ask streams for their usage (stream_options.include_usage) to calibrate counting; "
        "the usage chunk is taken out again when the client did not ask for it",
    )
    responses_compaction: Literal["auto", "serve", "relay"] = Field(
        "auto",
        description="the Responses API's remote compaction (a compaction_trigger item, POST /responses/compact): "
        "serve it with ctxproxy's summariser, relay it to the upstream, or auto: relay to api.openai.com, "
        "serve for every other upstream",
    )

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        url = URL(value)
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"must be an http(s) URL such as https://api.openai.com/v1, got {value!r}")
        return value.rstrip("/")

    @field_validator("api_key", mode="before")
    @classmethod
    def _empty_is_none(cls, value: object) -> object:
        return None if value == "" else value


class ToolOutputsConfig(_Strict):
    """``[compaction.tool_outputs]``: fresh tool results compressed by their kind, old ones masked,
    every original retrievable (``ctxproxy.tool_outputs``). ``enabled`` left unset takes the
    strategy's default (the loader fills it in): on, but for a strategy that promises the
    client's own bytes (``none``)."""

    enabled: bool = Field(False, description="compress fresh tool results, mask old ones (default: the strategy's)")
    min_tokens: int = Field(
        DEFAULT_TOOL_OUTPUT_MIN_TOKENS, ge=1, description="a fresh result smaller than this is sent as it is"
    )
    keep_turns: int = Field(
        DEFAULT_KEEP_TURNS,
        ge=0,
        description="results of turns older than the newest keep_turns are masked, in steps of it; 0: none",
    )
    keep_tools: list[str] = Field([], description="tools whose results are never compressed or masked")


class CompactionConfig(_Strict):
    """``[compaction]``. The strategy's own table (``[compaction.cut_point]`` …) is validated by
    the strategy registry and lands in ``options``; the loader fills that field. The loader also
    checks that ``strategy`` and ``summarizer`` name a built-in or a loaded plugin.

    ``optimise``: "cost" compacts rarely and far, so the provider's prompt cache keeps hitting
    between compactions; "tokens", for an upstream without a prompt cache, compacts as often as
    each strategy's note says (``ctxproxy.strategies.hysteresis``)."""

    strategy: str = "none"
    optimise: Optimise = Field("cost", description='"cost" (a provider prompt cache: compact rarely) or "tokens"')
    mode: Literal["inline", "background"] = "inline"
    summarizer: str = Field("llm", description='"llm", "extractive", or a plugin summariser\'s name')
    summary_model: str | None = Field(None, description="default: the request's own model")
    summary_timeout: float = Field(60.0, gt=0)
    summary_max_tokens: int | None = Field(
        None, ge=64, description="a summary's budget (default: 15 % of the request's budget, 64 to 1200)"
    )
    summary_context_window: int | None = Field(None, ge=MIN_CONTEXT_WINDOW, description="default: from [models]")
    summary_placement: Placement = PLACEMENT_ASSISTANT_NAMED
    overflow_retries: int = Field(1, ge=0, le=1, description="retries after an upstream overflow error")
    branch_summary_max_tokens: int = Field(
        400, ge=0, description="a fork's summary of the branch it left (note 003), 0 for none; else at least 64"
    )
    branch_summary_min_tokens: int = Field(100, ge=0, description="a left branch smaller than this is not summarised")
    tool_outputs: ToolOutputsConfig = ToolOutputsConfig()
    options: dict[str, Any] = {}

    @field_validator("branch_summary_max_tokens")
    @classmethod
    def _branch_budget(cls, value: int) -> int:
        if 0 < value < 64:
            raise ValueError("must be 0 (no branch summaries) or at least 64")
        return value

    def summary_budget(self, budget: int) -> int:
        """The most a summary's text may take in a request whose prompt may take ``budget``."""
        return summary_budget(self.summary_max_tokens, budget)


class MemoryConfig(_Strict):
    """``[memory]``: long-term memory cards, their search, and auto-injection (notes 001, 002).

    ``enabled`` and ``layered`` left unset take the strategy's defaults (``StrategyTraits``; the
    loader fills them in): memory is on for the strategies whose notes ship it, layered for
    ``rounds``. The ``False`` below is what a tenant built without the loader gets."""

    enabled: bool = Field(False, description="memory cards, their search and injection (default: the strategy's)")
    inject: bool = Field(True, description="inject the memories that match the newest user message")
    inject_top_k: int = Field(5, ge=1, le=50)
    inject_max_tokens: int = Field(800, ge=50)
    layered: bool = Field(
        False,
        description="note 002 (default: the strategy's): User and Scope Memory extracted every round and sent "
        "first, each in its own block; the session's memory written only at compression",
    )
    user_top_k: int = Field(5, ge=0, le=50, description="layered: memories in the ## User Memory block")
    user_max_tokens: int = Field(400, ge=50, description="layered: the ## User Memory block's budget")
    scope_top_k: int = Field(5, ge=0, le=50, description="layered: memories in the ## Scope Memory block")
    scope_max_tokens: int = Field(800, ge=50, description="layered: the ## Scope Memory block's budget")
    embeddings_model: str | None = Field(None, description="fuse BM25 with the upstream's /v1/embeddings")
    embeddings_timeout: float = Field(10.0, gt=0)

    def injection_reserve(self, *, user: bool, scope: bool) -> int:
        """Tokens the injected memories of a request may take (kept free in the window): the
        ``## Relevant Memories`` budget, or with ``layered`` the budgets of the request's layers
        (``user``: it names a user, ``scope``: a scope)."""
        if not (self.enabled and self.inject):
            return 0
        if not self.layered:
            return self.inject_max_tokens
        return (self.user_max_tokens if user and self.user_top_k else 0) + (
            self.scope_max_tokens if scope and self.scope_top_k else 0
        )


class ToolsConfig(_Strict):
    """``[tools]``: proxy-side tools (recall_page, search_memory) answered by ctxproxy itself."""

    enabled: bool = True
    max_rounds: int = Field(3, ge=1, le=10, description="proxy-tool rounds before the model must answer")
    result_max_tokens: int = Field(4000, ge=100, description="largest tool answer given to the model")


DEFAULT_CACHE_DISCOUNT = 0.1  # what providers charge for a prompt's cached prefix, as a share of the full price


class ModelConfig(_Strict):
    """``[models."<glob>"]``: what ctxproxy knows of the models a pattern matches; the first
    pattern that sets a value gives it."""

    context_window: int | None = Field(None, ge=MIN_CONTEXT_WINDOW)
    input_price_per_mtok: float | None = Field(
        None, ge=0, strict=True, description="USD per million prompt tokens: ctxproxy_saved_usd prices savings"
    )
    cached_input_price_per_mtok: float | None = Field(
        None, ge=0, strict=True, description="USD per million cached prompt tokens (default: price × cache_discount)"
    )
    cache_discount: float | None = Field(
        None, ge=0, le=1, strict=True, description=f"cached price / full price (default {DEFAULT_CACHE_DISCOUNT})"
    )

    @model_validator(mode="after")
    def _says_something(self) -> ModelConfig:
        if all(getattr(self, key) is None for key in type(self).model_fields):
            raise ValueError(f"set at least one of {', '.join(type(self).model_fields)}")
        return self


class TenantConfig(_Strict):
    name: str
    api_keys: list[SecretStr] = []
    upstream: UpstreamConfig = UpstreamConfig()
    compaction: CompactionConfig = CompactionConfig()
    memory: MemoryConfig = MemoryConfig()
    tools: ToolsConfig = ToolsConfig()
    models: dict[str, ModelConfig] = {}
    default_context_window: int = Field(128_000, ge=MIN_CONTEXT_WINDOW, description="for models no pattern matches")
