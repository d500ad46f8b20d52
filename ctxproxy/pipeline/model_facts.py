"""What a tenant's config says of a model, looked up once per config and model instead of at
every request: its window (``ctxproxy.compaction.windows.known_window``: a match of the
tenant's ``[models]`` patterns, the client's hints, the built-in table), the name what is
learned of it is kept under (``learned_as``) and its prices (``ctxproxy.pipeline.pricing``).

They depend on the tenant's ``[models]`` table, the model's name and the window a header asked
for, nothing else, so they are kept per table (the very object: a request's tenant with its own
strategy options, ``model_copy``, shares its table) and name and hint. A reload makes new tables
and empties the memo (``ConfigHolder.generation``); model names are the client's, so the memo is
bounded (``ENTRIES``; then emptied and filled anew) and a name longer than ``MAX_MODEL_CHARS``
is looked up each time, as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from ctxproxy.compaction.window_hints import WindowHint
from ctxproxy.compaction.windows import known_window, learned_as
from ctxproxy.config import ConfigHolder
from ctxproxy.config.models import ModelConfig, TenantConfig
from ctxproxy.pipeline.pricing import Prices

__all__ = ["MODEL_FACTS", "ModelFacts", "TenantModel"]

ENTRIES = 1024
MAX_MODEL_CHARS = 200


@dataclass(frozen=True, slots=True)
class TenantModel:
    window: int | None  # ``known_window``: None when nothing knows it (the tenant's default applies)
    learned_as: str | None  # ``learned_as``
    prices: Prices  # ``Prices.of``


class ModelFacts:
    def __init__(self, holder: ConfigHolder) -> None:
        self._holder = holder
        self._generation = holder.generation
        # (id of the tenant's ``models``, model, hint) -> the table itself (so its id stays its own) and the facts
        self._memo: dict[tuple[int, str | None, WindowHint | None], tuple[dict[str, ModelConfig], TenantModel]] = {}

    def of(self, tenant: TenantConfig, model: str | None, asked: WindowHint | None) -> TenantModel:
        if self._holder.generation != self._generation:
            self._memo.clear()
            self._generation = self._holder.generation
        table = tenant.models
        key = (id(table), model, asked)
        found = self._memo.get(key)
        if found is not None:
            return found[1]
        facts = looked_up(tenant, model, asked)
        if model is None or len(model) <= MAX_MODEL_CHARS:
            if len(self._memo) >= ENTRIES:
                self._memo.clear()
            self._memo[key] = (table, facts)
        return facts


def looked_up(tenant: TenantConfig, model: str | None, asked: WindowHint | None) -> TenantModel:
    """The facts, looked up (what the memo keeps)."""
    return TenantModel(known_window(model, tenant, asked), learned_as(model, tenant, asked), Prices.of(tenant, model))


MODEL_FACTS = web.AppKey("model_facts", ModelFacts)
