"""A request ctxproxy cannot compact safely, forwarded as the client sent it.

ctxproxy is never stricter than the upstream: a request with a role, a block or a field's form
that ctxproxy does not model (``Uncompactable``) is not refused. Its bytes go upstream untouched
— no compaction, no memories, no proxy tools — and the answer is relayed as it came, carrying
``X-Ctx-Forwarded-As-Sent`` (the parameter ctxproxy could not model, e.g. ``messages[3].role``);
the log line says the same (``forwarded_as_sent``), never the value. If the upstream refuses the
prompt as too long, nothing can be compacted: the client gets a context-length error that says
why, in its protocol.
"""

from __future__ import annotations

import re

from aiohttp import web

from ctxproxy.config.models import TenantConfig
from ctxproxy.errors import ContextLengthExceeded, Uncompactable
from ctxproxy.pipeline.turn import Augmented, Turn
from ctxproxy.pipeline.wire import WireAdapter
from ctxproxy.services import LOG_FIELDS
from ctxproxy.strategies.base import Window
from ctxproxy.tools.budget import Budget
from ctxproxy.upstream.overflow import Overflow

__all__ = ["AS_SENT_HEADER", "forward_as_sent"]

AS_SENT_HEADER = "X-Ctx-Forwarded-As-Sent"
_NOT_HEADER_SAFE = re.compile(r"[^A-Za-z0-9_.\[\]-]")
_MAX_PARAM = 120


async def forward_as_sent(
    request: web.Request, tenant: TenantConfig, wire: WireAdapter, turn: Turn, reason: Uncompactable
) -> web.StreamResponse:
    where = _param(reason)
    request[LOG_FIELDS].update(model=turn.model, stream=turn.stream, forwarded_as_sent=where, compacted=False)
    headers = {"X-Ctx-Strategy": tenant.compaction.strategy, AS_SENT_HEADER: where}
    untouched = Augmented(messages=None, tools=None, answers=None, tokens=0, injected=0)
    budget = Budget.for_window(Window(tenant.default_context_window, 0), 0)
    answer = await wire.forward(request, tenant, turn, untouched, headers, budget)
    if isinstance(answer, Overflow):
        raise ContextLengthExceeded(
            "The upstream refused the conversation as too long for the model's context window, and ctxproxy could "
            f"not compact it: it does not model `{where}` of this request, so it forwarded the request as sent. "
            "Shorten the conversation or use a model with a larger window.",
            cause="the upstream refused the prompt as too long; the request was forwarded as sent",
        )
    return answer.response


def _param(reason: Uncompactable) -> str:
    """What the header and the log name: the parameter's path, in characters a header may carry."""
    param = reason.param or "body"
    return _NOT_HEADER_SAFE.sub("?", param)[:_MAX_PARAM]
