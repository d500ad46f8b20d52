"""The compaction engine's request path: load the session's checkpoints, find the branch
summaries the request gets and make one when it forks (``ctxproxy.compaction.branches``), prepare
(pure, ``ctxproxy.compaction.prepare``) with the room those take, run the plan inline or in the
background (single flight, ``ctxproxy.compaction.single_flight``; execution,
``ctxproxy.compaction.runner``), and assemble what is forwarded; after an upstream overflow,
compact harder (``recover``).

Whatever the strategy, a prompt that would not fit the window is compacted first with the
emergency plan (pre-flight). The checkpoint's block kind may show it differently in this request
(``BlockKind.viewer``: ``paged`` restores the pages the model recalled after its Contents Page);
what it shows never makes the prompt overflow where the stored checkpoint would not, and a
failing Store read costs only that. A failing store never stops a compaction, and a checkpoint that
cannot be saved is still forwarded (kept in memory for this request). A failing summariser
falls back to the extractive one. Neither fails the request.

Plugins' hooks (``ctxproxy.compaction.hooks``) hear of each compaction (the runner) and of each
request that forked (``before_fork``, with the branch summaries, once the session's checkpoints
are loaded), which may veto or supply its branch summary.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import replace

import structlog

from ctxproxy.background import BackgroundTasks
from ctxproxy.cache import ByteLRU, CachePool
from ctxproxy.compaction.assemble import assemble, with_branches
from ctxproxy.compaction.branches import BranchSummaries, stored_for
from ctxproxy.compaction.checkpoints import with_refusal
from ctxproxy.compaction.hooks import ForkWatch
from ctxproxy.compaction.inputs import CompactionInput, CompactionOutcome, NotCompacted
from ctxproxy.compaction.keeper import Keeper
from ctxproxy.compaction.observer import CompactionObserver
from ctxproxy.compaction.pairs_memo import ToolPairsMemo
from ctxproxy.compaction.prepare import Planning, compact_inline, prepare_compaction
from ctxproxy.compaction.runner import Runner
from ctxproxy.compaction.single_flight import SingleFlight
from ctxproxy.compaction.views import SessionViews
from ctxproxy.config.models import CompactionConfig
from ctxproxy.memory.memories import MemoryStore
from ctxproxy.plugins import Plugins
from ctxproxy.session import SessionKey
from ctxproxy.store import Store, StoreError, warn_store_failure
from ctxproxy.store.keys import checkpoints_key
from ctxproxy.strategies.base import Checkpoint, Conversation, Window
from ctxproxy.strategies.boundaries import leading_system_count
from ctxproxy.strategies.execution import Shown
from ctxproxy.strategies.kinds import BlockKinds
from ctxproxy.strategies.registry import StrategyRegistry, builtin_registry
from ctxproxy.summarize.base import Summarizer
from ctxproxy.tokens import TokenCounter
from ctxproxy.upstream.client import UpstreamHttp
from ctxproxy.vocabulary import prompt_tokens

log = structlog.get_logger(__name__)
PLANNINGS = 64  # tenants' (strategy, options) whose built-in planning a Compactor keeps, then anew


class RecentKeys:
    """A bounded set of session keys, least recently added dropped first (a per-process hint)."""

    def __init__(self, cache: ByteLRU[str, bool] | None = None) -> None:
        self._keys = cache if cache is not None else CachePool().lru("session_keys")

    def add(self, key: SessionKey) -> None:
        self._keys.put(key.store_id, True, sys.getsizeof(key.store_id))

    def seen(self, key: SessionKey) -> bool:
        return key.store_id in self._keys


class Plannings:
    """``Planning.of(registry, config)``, built once per options object for a built-in strategy:
    those keep nothing but their frozen options (their ``__init__`` sets ``self.options`` alone),
    so one serves every request. A plugin's strategy may keep state per request: it is built anew
    each time, as before."""

    def __init__(self, registry: StrategyRegistry) -> None:
        self._registry = registry
        self._immutable = frozenset(builtin_registry().values())
        self._held: dict[tuple[str, int], tuple[object, Planning]] = {}

    def of(self, config: CompactionConfig) -> Planning:
        options = config.options[config.strategy]
        name = (config.strategy, id(options))
        held = self._held.get(name)
        if held is not None and held[0] is options:
            return held[1]
        planning = Planning.of(self._registry, config)
        if type(planning.strategy) in self._immutable:
            if len(self._held) >= PLANNINGS:
                self._held.clear()
            self._held[name] = (options, planning)  # ``options`` held: its id is not reused meanwhile
        return planning


class Compactor:
    def __init__(
        self,
        store: Store,
        tasks: BackgroundTasks,
        counter: TokenCounter,
        http: UpstreamHttp,
        registry: StrategyRegistry,
        memories: MemoryStore,
        caches: CachePool | None = None,
        plugins: Plugins | None = None,
        observer: CompactionObserver | None = None,
    ) -> None:
        """``plugins``: the hooks to call and the summarisers a tenant may name (none by default);
        ``observer`` hears of every compaction (``ctxproxy.compaction.observer``)."""
        caches = caches if caches is not None else CachePool()
        plugins = plugins if plugins is not None else Plugins(registry)
        self._store = store
        self._tasks = tasks
        self._registry = registry
        read = caches.lru("checkpoints")  # what is read and scanned, kept between a session's requests
        self._views = SessionViews(store, counter, registry.kinds, read)
        self._pairs = ToolPairsMemo(read)
        keeper = Keeper(store, memories, counter, http)
        self._runner = Runner(store, keeper, counter, http, self._views, caches, plugins, tasks, observer)
        forks = ForkWatch(plugins.hooks, registry.kinds, counter, caches.lru("forks_told"))
        self._flight = SingleFlight(store, tasks, counter, self._views, self._runner, registry)
        self._branches = BranchSummaries(store, tasks, counter, self._views, self._runner, forks)
        # Sessions of strategies that compact only to fit (`none`) which got a checkpoint or met an
        # overflow: only they need a store read while their prompts fit the window.
        self._rescued = RecentKeys(caches.lru("session_keys"))
        self._plannings = Plannings(registry)

    @property
    def kinds(self) -> BlockKinds:
        """The block kinds of the registered strategies: how a checkpoint reads and what it offers."""
        return self._views.kinds

    def summarizer(self, req: CompactionInput) -> Summarizer:
        """The tenant's summariser for ``req``, as its compactions use it (a wire protocol that
        serves a compaction of its own, the Responses API's, summarises with it too)."""
        return self._runner.summarizer(req)

    async def prepare(self, req: CompactionInput, now: float | None = None) -> CompactionOutcome:
        """Compact per the tenant's strategy; whatever the strategy, a prompt that would not fit
        the window is compacted first with the emergency plan (pre-flight)."""
        now = time.time() if now is None else now
        config = req.tenant.compaction
        planning = self._plannings.of(config)
        only_to_fit = planning.compacts_only_to_fit
        plain = CompactionOutcome(None, prompt_tokens(req.tokens if req.total is None else (req.total,)), None)
        if only_to_fit and plain.tokens_after <= req.window.budget and not self._rescued.seen(req.key):
            return plain  # the client's bytes, without a store read
        index = await self._views.load(req.key)
        narrowed = index.window(req.window, req.model)
        if narrowed is not req.window:  # narrowed below a window the upstream refused
            req = req._replace(window=narrowed)
        branches = await self._branches.for_request(req, index, planning.summarises_branches)
        req = self._room_for(req, branches)
        head = leading_system_count(req.messages)
        matched = index.best(req.chain)
        conv = self._views.conversation(req, head, matched, plain.tokens_after)
        prepared = prepare_compaction(conv, matched, planning, now)
        current, plan, compacted = prepared.checkpoint, prepared.plan, False
        if plan is not None:
            if config.mode == "background" and prepared.fits:
                self._tasks.spawn(self._flight.compact(req, planning, plan, current, wait=False), name="compaction")
            else:
                done = await compact_inline(
                    plan,
                    prepared,
                    planning,
                    lambda checkpoint: self._views.conversation(req, head, checkpoint, plain.tokens_after),
                    lambda todo, base, wait: self._flight.compact_shielded(req, planning, todo, base, wait=wait),
                )
                current, conv, compacted = done.checkpoint, done.conv, done.by_us
            if only_to_fit:
                self._rescued.add(req.key)
        outcome = self._outcome(req, conv, current, compacted, branches, await self._show(req, conv, current))
        return outcome._replace(kind=planning.kind_of(plan)) if outcome.compacted and plan is not None else outcome

    async def recover(
        self, req: CompactionInput, sent: CompactionOutcome, budget: int
    ) -> CompactionOutcome | NotCompacted:
        """After the upstream refused what ``prepare`` made (``sent``) as too long: remember that
        for the session, compact harder, until the messages take at most ``budget`` tokens
        (``ctxproxy.compaction.retry_budget``), and save it."""
        await self._note_refusal(req, sent.tokens_after + req.window.reserve_output)
        self._rescued.add(req.key)
        head = leading_system_count(req.messages)
        index = await self._views.load(req.key)
        current = index.best(req.chain)
        planning = Planning.for_overflow(self._registry, req.tenant.compaction)
        branches = stored_for(index, req, Planning.of(self._registry, req.tenant.compaction).summarises_branches)
        room = budget - self._views.branch_tokens(req, branches)
        squeezed = req._replace(window=Window(room + req.window.reserve_output, req.window.reserve_output))
        prepared = prepare_compaction(self._views.conversation(squeezed, head, current), current, planning, time.time())
        if prepared.plan is None:
            return NotCompacted("nothing but the newest turn is left to compact")
        made, by_us = await self._flight.compact_shielded(squeezed, planning, prepared.plan, current, wait=True)
        if made is None:
            return NotCompacted(
                "compacting it failed or a plugin vetoed it (the proxy logged why: compaction.failed, "
                "compaction.store_unavailable or compaction.vetoed)"
            )
        outcome = self._outcome(req, self._views.conversation(req, head, made), made, by_us, branches)
        if outcome.messages is None:
            return NotCompacted("compacting it would separate a tool call from its result")
        return outcome._replace(kind="recovery") if outcome.compacted else outcome

    async def _note_refusal(self, req: CompactionInput, tokens: int) -> None:
        try:
            await self._store.update(checkpoints_key(req.key), lambda index: with_refusal(index, req.model, tokens))
        except StoreError as exc:
            warn_store_failure(log, exc, "compaction.store_unavailable", session=req.key.value, error=str(exc))

    def _room_for(self, req: CompactionInput, branches: Sequence[Checkpoint]) -> CompactionInput:
        """``req`` with the room its branch summaries take out of the window."""
        if not branches:
            return req
        taken = self._views.branch_tokens(req, branches)
        return req._replace(window=replace(req.window, reserve_output=req.window.reserve_output + taken))

    async def _show(self, req: CompactionInput, conv: Conversation, current: Checkpoint | None) -> Shown | None:
        """How ``current``'s kind shows it in this request; None: as stored (also when the
        viewer's Store read fails: that costs what it would have shown, never the request)."""
        viewer = self._views.kinds.of(current.blocks).viewer if current is not None else None
        if viewer is None or current is None:
            return None
        try:
            return await viewer(conv, current, self._runner.host(req))
        except StoreError as exc:
            warn_store_failure(log, exc, "checkpoint.show_failed", session=req.key.value, error=str(exc))
            return None

    def _outcome(
        self,
        req: CompactionInput,
        conv: Conversation,
        current: Checkpoint | None,
        compacted: bool,
        branches: Sequence[Checkpoint] = (),
        shown: Shown | None = None,
    ) -> CompactionOutcome:
        """What to forward with ``current`` and ``branches``; ``conv`` is the conversation as seen
        with it. As ``shown`` when given, unless that would overflow where the stored checkpoint
        does not."""
        plain = CompactionOutcome(None, conv.forwarded_tokens(None), None)
        if current is None and not branches:
            return plain
        taken = self._views.branch_tokens(req, branches)  # within the room ``_room_for`` made
        stored = self._assembled(req, conv, current, compacted, branches, taken)
        if stored is None:
            return plain
        if shown is None:
            return stored
        seen = self._views.conversation(req, conv.head, shown.checkpoint)
        restored = self._assembled(req, seen, shown.checkpoint, compacted, branches, taken, shown.restored)
        if restored is None or restored.tokens_after > max(conv.window.budget + taken, stored.tokens_after):
            return stored
        return restored

    def _assembled(
        self,
        req: CompactionInput,
        conv: Conversation,
        current: Checkpoint | None,
        compacted: bool,
        branches: Sequence[Checkpoint],
        branch_tokens: int,
        restored: tuple[int, ...] = (),
    ) -> CompactionOutcome | None:
        """``current`` with ``restored`` (indices of request messages) after its summary message
        and ``branches`` (taking ``branch_tokens``) inserted; None when that would break a tool
        call's pairing (logged)."""
        placement = req.tenant.compaction.summary_placement
        again = [req.messages[i] for i in restored]
        kinds = self._views.kinds
        forwarded = assemble(req.messages, conv.head, current, placement, kinds, again, req.system_at)
        forwarded = with_branches(forwarded, req.messages, conv.head, current, branches, kinds, len(again))
        if self._pairs.breaks(req.key.store_id, req.messages, forwarded):
            end = current.end if current is not None else None
            log.error("compaction.refused_invalid_tool_pairs", session=req.key.value, end=end)
            return None
        tokens = conv.forwarded_tokens(current) + sum(req.tokens[i] for i in restored) + branch_tokens
        return CompactionOutcome(forwarded, tokens, current, compacted, len(branches))
