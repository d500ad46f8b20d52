"""``run_turn``: one request's journey through the pipeline (see the package docstring)."""

from __future__ import annotations

import time
from functools import partial
from typing import Final, NamedTuple

from aiohttp import web

from ctxproxy.compaction.inputs import CompactionInput, CompactionOutcome, NotCompacted
from ctxproxy.compaction.learned import Learned, Sample, preflight_window
from ctxproxy.compaction.learning import Unread
from ctxproxy.compaction.retry_budget import Refused, retry_budget
from ctxproxy.config.models import TenantConfig
from ctxproxy.errors import BadRequest, ContextLengthExceeded, Uncompactable
from ctxproxy.memory.after_round import RoundRequest, extracts
from ctxproxy.pipeline import tool_outputs
from ctxproxy.pipeline.as_sent import forward_as_sent
from ctxproxy.pipeline.augment import augment
from ctxproxy.pipeline.cache_prefix import Measured, Sent, measure
from ctxproxy.pipeline.headers import ctx_headers
from ctxproxy.pipeline.identify import identify
from ctxproxy.pipeline.model_facts import MODEL_FACTS, TenantModel
from ctxproxy.pipeline.pricing import Costs, PromptCost, forwarded_cached
from ctxproxy.pipeline.turn import Augmented, Turn
from ctxproxy.pipeline.wire import Relayed, WireAdapter
from ctxproxy.services import (
    AFTER_ANSWER,
    COMPACTOR,
    CONFIG,
    HTTP,
    KNOWN,
    LEARNING,
    LOG_FIELDS,
    PROMPTS,
    RECORDER,
    ROUND_MEMORY,
    TOKENS,
    UNKNOWN_MODELS,
    LogFields,
)
from ctxproxy.session.fork import owner_of
from ctxproxy.session.identity import SESSION_HEADER
from ctxproxy.session.records import Observation
from ctxproxy.strategies.base import Window
from ctxproxy.strategies.overrides import overridden
from ctxproxy.tools.budget import Budget
from ctxproxy.upstream.overflow import Overflow
from ctxproxy.vocabulary import prompt_tokens

__all__ = ["SCOPE_HEADER", "USER_HEADER", "run_turn"]

USER_HEADER = "X-Ctx-User"
SCOPE_HEADER = "X-Ctx-Scope"

# What came of an upstream context overflow (the request log's ``overflow_outcome``, and the
# metrics' ``outcome`` label).
OVERFLOW_OUTCOMES: Final = ("recovered", "refused_again", "not_compacted", "disabled", "retry_failed")


class Journey(NamedTuple):
    """What every step of one request shares (a tuple: as immutable as a frozen dataclass, and
    made in a fifth of its time)."""

    request: web.Request
    app: web.Application  # the request's (``request.app`` is a lookup through its route each time)
    tenant: TenantConfig
    wire: WireAdapter
    turn: Turn
    input: CompactionInput
    configured: Window  # the configured window (or the one the client asked for) and the answer's reserve
    window: Window  # what pre-flight compacts to: the configured window narrowed by what was learned
    facts: TenantModel  # the model's, as the tenant's config says (its window, learned name, prices)
    learned: Learned | None
    before: int  # the client's prompt, whole (X-Ctx-Tokens-Before)
    tools: int  # of which the client's tool definitions
    sent: Sent  # the client's prompt, as its cache prefix is measured
    tool_results: bool  # whether the conversation holds tool results (``tool_outputs``)
    fields: LogFields  # the request's log fields (``request[LOG_FIELDS]``)


async def run_turn(request: web.Request, tenant: TenantConfig, wire: WireAdapter, turn: Turn) -> web.StreamResponse:
    if turn.as_sent is not None:
        return await forward_as_sent(request, tenant, wire, turn, turn.as_sent)
    try:
        journey = await _begin(request, _with_request_options(tenant, request), wire, turn)
    except Uncompactable as reason:  # a message ctxproxy cannot model, found while identifying
        return await forward_as_sent(request, tenant, wire, turn, reason)
    _after_round(journey)
    own_error = False
    try:  # the answer, here rather than in a coroutine of its own: one frame less for every await below
        outcome = await journey.app[COMPACTOR].prepare(journey.input)
        _note_compaction(journey.fields, outcome)  # each attempt says it again, as its headers do
        answer, sent = await _attempt(journey, outcome)
        if isinstance(answer, Relayed):
            return answer.response
        return await _recover(journey, outcome, answer, sent)
    except Exception:
        own_error = True  # ctxproxy answers it with an error of its own: forwarded or not, as the metrics count
        raise
    finally:  # noted once the answer is sent, if it was not (``ctxproxy.server.middleware``, as ``LOG_FIELDS``)
        request[AFTER_ANSWER].append(partial(_record, journey, not own_error))


def _note_compaction(fields: LogFields, outcome: CompactionOutcome) -> None:
    """Whether (and why: ``compaction_kind``) the request compacted, in its log line."""
    fields["compacted"] = outcome.compacted
    if outcome.kind is not None:
        fields["compaction_kind"] = outcome.kind
    else:
        fields.pop("compaction_kind", None)


async def _begin(request: web.Request, tenant: TenantConfig, wire: WireAdapter, turn: Turn) -> Journey:
    """Identify the conversation, note it, and find its window."""
    app = request.app
    fields = request[LOG_FIELDS]
    counter = app[TOKENS]
    user = _named(turn.user or request.headers.get(USER_HEADER), USER_HEADER)
    scope = _named(request.headers.get(SCOPE_HEADER), SCOPE_HEADER)
    session = request.headers.get(SESSION_HEADER)
    found = identify(wire, turn, tenant.name, session, counter, app[KNOWN], owner_of(user, scope))
    tools = wire.tool_tokens(turn, counter)
    before = prompt_tokens((found.total,), tools)
    fields.update(session=found.key.value, model=turn.model, stream=turn.stream, tokens_before=before)

    asked = wire.window_asked(turn, request.headers)
    if asked is not None:
        fields["window_asked"] = asked.tokens
    facts = app[MODEL_FACTS].of(tenant, turn.model, asked)
    known = facts.window
    if known is None:
        app[UNKNOWN_MODELS].note(tenant, turn.model)
    configured = Window(tenant.default_context_window if known is None else known, wire.answer_reserve(turn))
    model = facts.learned_as
    learned = app[LEARNING].held(tenant, model, configured.context_window)
    if isinstance(learned, Unread):  # this replica's copy is not fresh: the Store is read
        learned = await app[LEARNING].current(tenant, model, configured.context_window)
    window = preflight_window(configured, learned, wire.count_ratio(turn))
    if learned is not None:
        fields.update(learned_window=learned.window, count_ratio=learned.applied_ratio)
    # The client's tool definitions and what ctxproxy adds (memories, its tools) must fit too.
    memories = tenant.memory.injection_reserve(user=user is not None, scope=scope is not None)
    added = tools + memories + wire.proxy_tools_reserve(tenant, turn, counter)
    results = found.tool_at is not None
    added += tool_outputs.reserve(tenant, wire, turn, counter, results)
    req = CompactionInput(
        tenant=tenant,
        key=found.key,
        messages=turn.messages,
        chain=found.chain,
        tokens=found.tokens,
        model=turn.model,
        window=Window(window.context_window, window.reserve_output + added),
        completion=wire.completion,
        headers=request.headers,
        user=user,
        scope=scope,
        previous=found.previous,
        system_at=found.systems,
        total=found.total,
    )
    definitions = wire.tool_definitions(turn)
    sent = Sent(turn.messages, found.chain.digests, found.tokens, definitions, tools, found.total, found.chain.joined)
    return Journey(
        request, app, tenant, wire, turn, req, configured, window, facts, learned, before, tools, sent, results, fields
    )


async def _attempt(
    journey: Journey, outcome: CompactionOutcome, *, retried: bool = False
) -> tuple[Relayed | Overflow, int]:
    """Augment what ``outcome`` forwards, forward it, and learn from the answer: what it says of
    the prompt's size, or the overflow it reports. Also the tokens sent."""
    request, app, tenant, turn, fields = journey.request, journey.app, journey.tenant, journey.turn, journey.fields
    outputs = await tool_outputs.prepare(request, tenant, journey.wire, turn, journey.input.key, journey.tool_results)
    retrieval = outputs.retrieval if outputs is not None else None
    added = await augment(request, tenant, journey.wire, turn, journey.input, outcome, retrieval)
    if outputs is not None and outputs.plan.contents:
        added = tool_outputs.apply(outputs, added, turn, app[TOKENS])
        _note_tool_outputs(fields, added)
    sent = added.tokens + journey.tools
    previous = app[PROMPTS].last(journey.input.key.store_id)
    measured = measure(previous, journey.sent, added, app[TOKENS], turn.model)
    headers = ctx_headers(
        tenant, journey.input.key.value, journey.before, sent, outcome, added, measured.forwarded, retried=retried
    )
    fields.update(tokens_after=sent, memories=added.injected)  # as the headers say
    _note_compaction(fields, outcome)
    fields.update(cache_prefix_tokens=measured.forwarded.tokens)
    answer = await journey.wire.forward(request, tenant, turn, added, headers, Budget.for_window(journey.window, sent))
    if isinstance(answer, Relayed):
        _account(journey, measured, answer, sent)
    if added.answers is not None and added.answers.calls:
        fields["tool_calls"] = dict(added.answers.calls)
    learning = app[LEARNING]
    configured = journey.configured
    model = journey.facts.learned_as  # what learning keeps this request's facts under
    if isinstance(answer, Overflow):
        await learning.overflow(
            tenant, model, configured.context_window, answer.numbers, sent, configured.reserve_output
        )
    elif answer.prompt_tokens is not None and not answer.prompt_tokens_partial:
        await learning.usage(tenant, model, configured.context_window, Sample(sent, answer.prompt_tokens))
    return answer, sent


def _note_tool_outputs(fields: LogFields, added: Augmented) -> None:
    """The tool results forwarded compressed and masked, in the request's log line (and metrics)."""
    counts = added.tool_outputs
    if counts is not None:
        fields.update(
            tool_outputs_compressed=counts.compressed,
            tool_outputs_masked=counts.masked,
            tool_outputs_fresh=counts.fresh,
            tool_outputs_saved=counts.saved,
        )


def _account(journey: Journey, measured: Measured, answer: Relayed, sent: int) -> None:
    """A forwarded prompt the upstream answered: the session's prints remember it (the next
    request's cache prefix is measured against it), and its cost is priced (``pricing``) into the
    log fields, from which the metrics and the session's record read it."""
    if answer.response.status >= 400:  # refused: nothing was processed, nothing cached
        return
    journey.app[PROMPTS].remember(journey.input.key.store_id, measured.prints)
    reported = None
    if answer.prompt_tokens is not None and answer.cached_tokens is not None:
        reported = (answer.prompt_tokens, answer.cached_tokens)
    cached, source = forwarded_cached(sent, measured.forwarded.tokens, reported)
    forwarded = PromptCost(sent, cached)
    as_sent = forwarded if measured.unchanged else PromptCost(journey.before, measured.sent.tokens)
    costs = Costs(journey.facts.prices, as_sent, forwarded, source)
    journey.fields.update(costs.fields())


async def _recover(journey: Journey, outcome: CompactionOutcome, overflow: Overflow, sent: int) -> web.StreamResponse:
    """The upstream counts more tokens than we do: compact harder, keep it, retry once."""
    tenant, fields = journey.tenant, journey.fields
    fields["overflow"] = True
    if tenant.compaction.overflow_retries == 0:
        fields["overflow_outcome"] = "disabled"
        raise ContextLengthExceeded(
            f"The upstream refused the conversation ({sent} tokens by ctxproxy's count) as too long for the model's "
            "context window, and ctxproxy did not compact it and retry because [compaction] overflow_retries is 0. "
            "Set overflow_retries = 1, shorten the conversation, or use a model with a larger window.",
            cause="the upstream refused the prompt as too long; overflow_retries is 0",
        )
    refused = Refused(journey.input.window, journey.window.reserve_output, outcome.tokens_after, sent)
    learned = None if journey.learned is None else journey.learned.applied_ratio
    known = journey.wire.count_ratio(journey.turn) if learned is None else learned
    budget = retry_budget(refused, overflow.numbers, known)
    fields.update(overflow_limit=overflow.numbers.limit, overflow_prompt=overflow.numbers.prompt, retry_budget=budget)
    recovered = await journey.app[COMPACTOR].recover(journey.input, outcome, budget)
    if isinstance(recovered, NotCompacted):
        fields["overflow_outcome"] = "not_compacted"
        raise ContextLengthExceeded(
            f"The upstream refused the conversation ({sent} tokens by ctxproxy's count) as too long for the model's "
            f"context window, and ctxproxy could not compact it further: {recovered.reason}. "
            "Shorten the newest messages or use a model with a larger window.",
            cause=f"the upstream refused the prompt as too long; not compacted further: {recovered.reason}",
        )
    fields.update(retried=True, overflow_outcome="retry_failed")  # until the retry is answered
    answer, retried = await _attempt(journey, recovered, retried=True)
    if isinstance(answer, Overflow):
        fields["overflow_outcome"] = "refused_again"
        raise ContextLengthExceeded(
            f"The conversation does not fit the model's context window: the upstream refused {sent} tokens, and "
            f"again after ctxproxy compacted them to {retried} and retried once. Shorten "
            "the newest messages or use a model with a larger window.",
            cause="the upstream refused the prompt as too long, again after compacting and retrying",
        )
    fields["overflow_outcome"] = "recovered"
    return answer.response


def _record(journey: Journey, reached_upstream: bool) -> None:
    """Note the request in its session's record and history, batched off the request path
    (``ctxproxy.session.recorder``): what it sent and forwarded, as its log line says, and
    whether it ``reached_upstream`` (else its tokens are not counted as forwarded)."""
    app, input_, fields = journey.app, journey.input, journey.fields
    seen = Observation(
        time.time(),
        len(input_.messages),
        journey.before,
        input_.chain.head.hex(),
        input_.model,
        forwarded=fields.get("tokens_after"),
        compacted=fields.get("compacted") is True,
        retried=fields.get("retried") is True,
        user=input_.user,
        scope=input_.scope,
        billed=_pair(fields, "billed_before", "billed_after", 1),
        nano_usd=_pair(fields, "usd_before", "usd_after", 1e9),
        protocol="/v1" + journey.wire.completion.path,
        kind=fields.get("compaction_kind"),
        reached_upstream=reached_upstream,
    )
    ttl = app[CONFIG].current.settings.store.session_ttl_days * 86400
    app[RECORDER].observe(input_.key, seen, ttl)


def _pair(fields: LogFields, first: str, second: str, scale: float) -> tuple[int, int] | None:
    """Two of the request's priced figures (``pricing.Costs.fields``), scaled to integers; None
    when the request was not priced."""
    a, b = fields.get(first), fields.get(second)
    if not isinstance(a, int | float) or not isinstance(b, int | float):
        return None
    return round(a * scale), round(b * scale)


def _with_request_options(tenant: TenantConfig, request: web.Request) -> TenantConfig:
    """The tenant as this request compacts: its strategy's options with what the request's
    headers set for itself (``ctxproxy.strategies.overrides``; a bad value is a 400)."""
    compaction = tenant.compaction
    options = compaction.options.get(compaction.strategy)
    if options is None:
        return tenant
    changed = overridden(options, request.headers)
    if changed is options:
        return tenant
    return tenant.model_copy(
        update={
            "compaction": compaction.model_copy(
                update={"options": {**compaction.options, compaction.strategy: changed}}
            )
        }
    )


def _after_round(journey: Journey) -> None:
    """Note 002: the round this request completed becomes user and scope memories, off the
    request path (``ctxproxy.memory.after_round``, which decides whether there is one)."""
    req, app = journey.input, journey.app
    if not extracts(req.tenant, req.user, req.scope):
        return
    found = RoundRequest(
        req.tenant,
        req.memory_scope,
        req.messages,
        req.chain,
        req.key.value,
        req.authorization,
        req.completions(app[HTTP]),
        req.summary_model,
    )
    app[ROUND_MEMORY].after(found)


def _named(value: str | None, header: str) -> str | None:
    """A user or scope name; long ones are refused (they become store keys' hashes, but a
    megabyte header is a mistake worth reporting)."""
    if value is None or value == "":
        return None
    if len(value) > 256:
        raise BadRequest(f"{header} (or the body's `user`) must be at most 256 characters.", param=header)
    return value
