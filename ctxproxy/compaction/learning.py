"""Keeping what was learned about each tenant's models (``ctxproxy.compaction.learned``) in the Store.

One record per tenant and model (``ctxproxy.store.keys.learned_window_key``; a model a header
asked a larger window for is recorded under its name with that window as a suffix,
``claude-opus-4-8[1m]``: ``ctxproxy.compaction.windows.learned_as``), written with
the Store's atomic ``update`` (so two replicas learning at once both count) and expiring
``[upstream] learned_window_days`` after its last write. Each replica keeps a copy of the records
it uses for :data:`REFRESH` seconds (in its byte-bounded cache), so pre-flight costs no Store
read per request, and writes only what matters (:func:`_worth_writing`): a window, the first
ratio, a ratio that moved by more than :data:`RATIO_STEP`. A learned window is written at once,
so every replica and session reads it on its next refresh, and this replica immediately.

Learning never fails a request: a Store that cannot be read or written is logged
(``window.learning_failed``) and the request goes on with what this replica knows.
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Final, NamedTuple

import structlog

from ctxproxy.cache import ByteLRU, json_size
from ctxproxy.compaction.learned import Learned, Sample, overflow_learned, preflight_window, usage_learned
from ctxproxy.compaction.windows import context_window
from ctxproxy.config.models import TenantConfig
from ctxproxy.store import JSONValue, Store, StoreError, warn_store_failure
from ctxproxy.store.keys import learned_window_key, learned_windows_prefix
from ctxproxy.strategies.base import Window
from ctxproxy.upstream.overflow_numbers import OverflowNumbers

__all__ = ["UNREAD", "Unread", "WindowLearning"]

log = structlog.get_logger(__name__)
REFRESH = 5.0  # seconds a replica uses its copy of a record before reading the Store again
RATIO_STEP = 0.01  # a ratio that moved less than this (relative) since it was stored stays local
MODEL_CHARS = 200  # of the model's name kept in the record, for display
NAMES = 256  # (tenant, model, window, upstream) whose record key and basis a replica keeps hashed
# Per protocol (a name the caller chooses), the count ratio its pre-flight assumes for a model
# until that model's own is learned (``preflight_window``'s ``prior``).
Priors = Callable[[str], Mapping[str, float | None]]


def basis_of(tenant: TenantConfig, configured: int) -> str:
    """What a record was learned under: the configured window and the upstream's URL."""
    return hashlib.sha256(f"{configured}|{tenant.upstream.base_url}".encode()).hexdigest()[:16]


class _Held(NamedTuple):
    record: Learned | None  # what this replica uses (the stored record plus unwritten samples)
    stored: Learned | None  # as last read from or written to the Store
    at: float  # when it was read from the Store


class _Found(NamedTuple):
    """A record looked up to learn from: its key and basis, when, and what it held then."""

    key: str
    basis: str
    now: float
    ttl: float
    held: _Held
    base: Learned  # what still holds of it, or a new record


class Unread:
    """``WindowLearning.held``'s answer when this replica's copy of a record is stale or missing."""


UNREAD: Final = Unread()


class WindowLearning:
    def __init__(self, store: Store, cache: ByteLRU[str, _Held], clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._held = cache
        self._clock = clock
        # Each request reads its model's record and learns from its answer: the record's key and
        # basis are two hashes, kept for the few names a replica serves (``NAMES``, then anew).
        self._names: dict[tuple[str, str | None, int, str], tuple[str, str]] = {}

    async def current(self, tenant: TenantConfig, model: str | None, configured: int) -> Learned | None:
        """What still holds for ``model`` of ``tenant`` with ``configured`` as its window."""
        ttl = _ttl(tenant)
        if ttl is None:
            return None
        key, basis = self._named(tenant, model, configured)
        held = self._held_fresh(key) or await self._read(key, tenant)
        return _usable(held.record, basis, self._clock(), ttl)

    def held(self, tenant: TenantConfig, model: str | None, configured: int) -> Learned | None | Unread:
        """``current`` from this replica's copy while it is fresh, without a coroutine (a request
        asks at every turn); ``UNREAD`` when it is not: then ``current`` reads the Store."""
        ttl = _ttl(tenant)
        if ttl is None:
            return None
        key, basis = self._named(tenant, model, configured)
        held = self._held_fresh(key)
        return UNREAD if held is None else _usable(held.record, basis, self._clock(), ttl)

    def _named(self, tenant: TenantConfig, model: str | None, configured: int) -> tuple[str, str]:
        """The record's key (``learned_window_key``) and ``basis_of`` for ``model`` of ``tenant``."""
        name = (tenant.name, model, configured, tenant.upstream.base_url)
        found = self._names.get(name)
        if found is None:
            found = (learned_window_key(tenant.name, model), basis_of(tenant, configured))
            if model is None or len(model) <= MODEL_CHARS:  # a name that long is not kept
                if len(self._names) >= NAMES:
                    self._names.clear()
                self._names[name] = found
        return found

    async def overflow(
        self,
        tenant: TenantConfig,
        model: str | None,
        configured: int,
        numbers: OverflowNumbers,
        sent: int,
        answer: int,
    ) -> None:
        """The upstream refused ``sent`` tokens (ctxproxy's count) as too long, stating ``numbers``."""
        now = self._clock()
        await self._learn(
            tenant,
            model,
            configured,
            lambda rec: overflow_learned(rec, numbers.limit, numbers.prompt, sent, answer, configured, now),
        )

    async def usage(self, tenant: TenantConfig, model: str | None, configured: int, sample: Sample) -> None:
        """An answer's ``usage.prompt_tokens`` (``sample.upstream``) for ``sample.ours`` tokens sent."""
        ttl = _ttl(tenant)
        # The record is looked up once for the check and the learning (it was twice: the same
        # record, as nothing between the two awaits anything).
        found = await self._base(tenant, model, configured, ttl) if ttl is not None else None
        known = found.base if found is not None else Learned(_name(model), "")
        truncated = known.is_truncation(sample)  # asked once of this record (it was three times)
        if truncated and not known.truncation_logged:
            log.warning(
                "upstream.silent_truncation",
                tenant=tenant.name,
                model=_name(model),
                sent_tokens=sample.ours,
                prompt_tokens=sample.upstream,
                fix="raise the server's context size (Ollama: num_ctx) or set the model's context_window",
            )
        if found is None:
            return
        now = found.now

        def learn(rec: Learned) -> Learned:
            cut = truncated if rec is known else rec.is_truncation(sample)  # the Store's may differ
            learned = usage_learned(rec, sample, configured, now, cut)
            return replace(learned, truncation_logged=True) if cut else learned

        new = learn(found.base)
        if not self._kept(found, new):  # a coroutine only when it writes
            await self._write(tenant, model, found, learn, new)

    async def report(self, tenant: TenantConfig, priors: Priors | None = None) -> list[dict[str, Any]]:
        """Configured vs learned, per model of ``tenant`` with something learned that still holds
        (for the admin API and ``config check``); reads the Store, not this replica's copies.
        ``priors``: for a model, each protocol's prior ratio; a row then says what pre-flight
        uses for each of them (``protocols``)."""
        ttl = _ttl(tenant)
        if ttl is None:
            return []
        now = self._clock()
        rows = []
        for key in await self._store.keys(learned_windows_prefix(tenant.name)):
            record = Learned.from_json(await self._store.get(key))
            if record is None:
                continue
            configured = context_window(record.model or None, tenant)
            current = record.current(basis_of(tenant, configured), now, ttl)
            if current is not None:
                rows.append(_row(current, configured, priors(current.model) if priors else {}))
        return sorted(rows, key=lambda row: str(row["model"]))

    async def _learn(
        self, tenant: TenantConfig, model: str | None, configured: int, change: Callable[[Learned], Learned]
    ) -> None:
        ttl = _ttl(tenant)
        if ttl is not None:
            await self._change(tenant, model, await self._base(tenant, model, configured, ttl), change)

    async def _base(self, tenant: TenantConfig, model: str | None, configured: int, ttl: float) -> _Found:
        key, basis = self._named(tenant, model, configured)
        now = self._clock()
        held = self._held_fresh(key)
        if held is None:
            held = await self._read(key, tenant)
        base = _usable(held.record, basis, now, ttl) or Learned(_name(model), basis)
        return _Found(key, basis, now, ttl, held, base)

    async def _change(
        self, tenant: TenantConfig, model: str | None, found: _Found, change: Callable[[Learned], Learned]
    ) -> None:
        new = change(found.base)
        if not self._kept(found, new):
            await self._write(tenant, model, found, change, new)

    def _kept(self, found: _Found, new: Learned) -> bool:
        """Whether ``new``, what a change made of ``found``'s record, needs no write: nothing
        changed, or this replica keeps the change to itself (``_worth_writing``)."""
        if new == found.base:
            return True
        held = found.held
        if _worth_writing(_usable(held.stored, found.basis, found.now, found.ttl), new):
            return False
        self._keep(found.key, _Held(new, held.stored, held.at))
        return True

    async def _write(
        self, tenant: TenantConfig, model: str | None, found: _Found, change: Callable[[Learned], Learned], new: Learned
    ) -> None:
        """``change`` applied to the stored record, atomically; ``new``: what it made of ours."""
        key, basis, now, ttl, held = found.key, found.basis, found.now, found.ttl, found.held

        def apply(value: JSONValue) -> JSONValue:
            stored = _usable(Learned.from_json(value), basis, now, ttl) or Learned(_name(model), basis)
            return change(stored).to_json()

        try:
            written = Learned.from_json(await self._store.update(key, apply, ttl=ttl))
        except StoreError as exc:
            warn_store_failure(log, exc, "window.learning_failed", tenant=tenant.name, error=type(exc).__name__)
            self._keep(key, _Held(new, held.stored, held.at))
            return
        self._keep(key, _Held(written, written, now))

    def _held_fresh(self, key: str) -> _Held | None:
        """This replica's copy of the record while it is fresh (``REFRESH``), else None."""
        held = self._held.get(key)
        return held if held is not None and self._clock() - held.at < REFRESH else None

    async def _read(self, key: str, tenant: TenantConfig) -> _Held:
        """The record as the Store holds it now, kept as this replica's copy."""
        now = self._clock()
        held = self._held.get(key)
        try:
            stored = Learned.from_json(await self._store.get(key))
        except StoreError as exc:
            warn_store_failure(log, exc, "window.learning_failed", tenant=tenant.name, error=type(exc).__name__)
            stored = held.stored if held is not None else None
        # Samples this replica did not write yet are dropped: the stored mean is the shared one.
        fresh = _Held(stored, stored, now)
        self._keep(key, fresh)
        return fresh

    def _keep(self, key: str, held: _Held) -> None:
        size = sys.getsizeof(key)
        if held.record is not None:
            size += _record_bytes(held.record)
        if held.stored is not None:
            size += _record_bytes(held.stored)
        self._held.put(key, held, size)


def _row(learned: Learned, configured: int, priors: Mapping[str, float | None]) -> dict[str, Any]:
    window = Window(configured)
    return {
        "model": learned.model,
        "configured_window": configured,
        "learned_window": learned.window,
        "window_source": learned.window_source,
        "window_learned_at": _iso(learned.window_at),
        "count_ratio": None if learned.ratio is None else round(learned.ratio, 4),
        "applied_ratio": None if learned.applied_ratio is None else round(learned.applied_ratio, 4),
        "samples": learned.samples,
        "ratio_learned_at": _iso(learned.ratio_at),
        # What pre-flight compacts a request without max_tokens to, in ctxproxy's tokens: without
        # a protocol's prior ratio, and for each protocol with its own.
        "preflight_window": preflight_window(window, learned).context_window,
        "protocols": {
            name: {"prior_ratio": prior, "preflight_window": preflight_window(window, learned, prior).context_window}
            for name, prior in priors.items()
        },
    }


def _iso(at: float | None) -> str | None:
    return None if at is None else datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")


def _record_bytes(record: Learned) -> int:
    """What a record held costs: its model's name and the rest, which is the same for every record
    (every field set, in its widest form), measured once. Not its JSON form's ``json_size``: that
    is a deep copy, and this runs at every answer that reports usage."""
    return _RECORD_BYTES + sys.getsizeof(record.model)


_WIDEST = Learned("", "0" * 16, 2**40, 1e9, "overflow_without_numbers", 1.0, 1.0, 2**40, 1e9, True)
_RECORD_BYTES = json_size(_WIDEST.to_json()) - sys.getsizeof("")


def _ttl(tenant: TenantConfig) -> float | None:
    days = tenant.upstream.learned_window_days
    return days * 86400 if days > 0 else None


def _usable(record: Learned | None, basis: str, now: float, ttl: float) -> Learned | None:
    if record is None:
        return None
    return record.current(basis, now, ttl)


def _name(model: str | None) -> str:
    return (model or "")[:MODEL_CHARS]


def _worth_writing(stored: Learned | None, new: Learned) -> bool:
    """Whether ``new`` differs from the stored record by something other replicas should know."""
    if stored is None:
        return True
    if new.window != stored.window or new.truncation_logged != stored.truncation_logged:
        return True
    if new.ratio is None or stored.ratio is None:
        return new.ratio != stored.ratio
    moved = abs((new.applied_ratio or 0.0) - (stored.applied_ratio or 0.0))
    return moved > RATIO_STEP * stored.ratio
