"""Typed configuration. Every model forbids unknown keys, so a typo is an error at start-up.

``ProxySettings`` is ``proxy.toml`` minus its ``[defaults]`` table; ``TenantConfig`` is one
``tenants/<name>.toml`` merged over those defaults. ``[server]``, ``[store]`` and ``[tokens]``
take effect on restart; tenants and ``[defaults]`` are picked up by a reload (SIGHUP).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from yarl import URL

from ctxproxy.cache import DEFAULT_CACHE_MAX_BYTES
from ctxproxy.vocabulary import PLACEMENT_ASSISTANT_NAMED, Placement

MIB = 1024 * 1024


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
    cache_max_bytes: int = Field(
        DEFAULT_CACHE_MAX_BYTES, ge=MIB, description="bytes all in-process caches may hold together"
    )
    metrics: bool = Field(True, strict=True, description="serve GET /metrics (Prometheus text format)")
    metrics_auth: bool = Field(
        False, strict=True, description="GET /metrics needs the admin key ([admin] api_key), as /admin/* does"
    )


class StoreSettings(_Strict):
    backend: Literal["diskcache"] = "diskcache"
    path: str = "data"
    session_ttl_days: float = Field(30.0, gt=0, description="idle sessions expire after this")


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


class ProxySettings(_Strict):
    server: ServerSettings = ServerSettings()
    store: StoreSettings = StoreSettings()
    tokens: TokenSettingsModel = TokenSettingsModel()
    admin: AdminSettings = AdminSettings()


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


class CompactionConfig(_Strict):
    """``[compaction]``. The strategy's own table (``[compaction.cut_point]`` …) is validated by
    the strategy registry and lands in ``options``; the loader fills that field."""

    strategy: str = "none"
    mode: Literal["inline", "background"] = "inline"
    summarizer: Literal["llm", "extractive"] = "llm"
    summary_model: str | None = Field(None, description="default: the request's own model")
    summary_timeout: float = Field(60.0, gt=0)
    summary_max_tokens: int = Field(1200, ge=64)
    summary_context_window: int | None = Field(None, ge=1024, description="default: from [models]")
    summary_placement: Placement = PLACEMENT_ASSISTANT_NAMED
    overflow_retries: int = Field(1, ge=0, le=1, description="retries after an upstream overflow error")
    options: dict[str, Any] = {}


class MemoryConfig(_Strict):
    """``[memory]``: long-term memory cards, their search, and auto-injection (notes 001, 002)."""

    enabled: bool = Field(False, description="extract memory cards with each summary and search them")
    inject: bool = Field(True, description="insert ## Relevant Memories before the newest user message")
    inject_top_k: int = Field(5, ge=1, le=50)
    inject_max_tokens: int = Field(800, ge=50)
    layered: bool = Field(False, description="note 002: User / Scope Memory right after the system prompt")
    embeddings_model: str | None = Field(None, description="fuse BM25 with the upstream's /v1/embeddings")
    embeddings_timeout: float = Field(10.0, gt=0)


class ToolsConfig(_Strict):
    """``[tools]``: proxy-side tools (recall_page, search_memory) answered by ctxproxy itself."""

    enabled: bool = True
    max_rounds: int = Field(3, ge=1, le=10, description="proxy-tool rounds before the model must answer")
    result_max_tokens: int = Field(4000, ge=100, description="largest tool answer given to the model")


class ModelConfig(_Strict):
    """``[models."<glob>"]``: what ctxproxy knows of the models a pattern matches; the first
    pattern that sets a value gives it."""

    context_window: int | None = Field(None, ge=1024)
    input_price_per_mtok: float | None = Field(
        None, ge=0, strict=True, description="USD per million prompt tokens: ctxproxy_saved_usd_total prices savings"
    )

    @model_validator(mode="after")
    def _says_something(self) -> ModelConfig:
        if self.context_window is None and self.input_price_per_mtok is None:
            raise ValueError("set context_window, input_price_per_mtok or both")
        return self


class TenantConfig(_Strict):
    name: str
    api_keys: list[SecretStr] = []
    upstream: UpstreamConfig = UpstreamConfig()
    compaction: CompactionConfig = CompactionConfig()
    memory: MemoryConfig = MemoryConfig()
    tools: ToolsConfig = ToolsConfig()
    models: dict[str, ModelConfig] = {}
    default_context_window: int = Field(128_000, ge=1024, description="for models no pattern matches")
