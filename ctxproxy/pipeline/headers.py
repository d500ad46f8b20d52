"""The ``X-Ctx-*`` headers an answer carries: what ctxproxy did to the request."""

from __future__ import annotations

from ctxproxy.compaction.inputs import CompactionOutcome
from ctxproxy.config.models import TenantConfig
from ctxproxy.pipeline.cache_prefix import CACHE_PREFIX_HEADER, CachePrefix
from ctxproxy.pipeline.turn import Augmented

# How many of the client's tool results the request forwards compressed and masked
# (``ctxproxy.pipeline.tool_outputs``): ``compressed=2 masked=14``; absent when none.
TOOL_OUTPUTS_HEADER = "X-Ctx-Tool-Outputs"


def ctx_headers(
    tenant: TenantConfig,
    session: str,
    before: int,
    after: int,
    outcome: CompactionOutcome,
    added: Augmented,
    cache_prefix: CachePrefix,
    *,
    retried: bool = False,
) -> dict[str, str]:
    """``before``/``after``: the prompt's tokens as the client sent it and as forwarded;
    ``cache_prefix``: how much of the forwarded prompt repeats the session's previous one."""
    headers = {
        "X-Ctx-Session": session,
        "X-Ctx-Strategy": tenant.compaction.strategy,
        "X-Ctx-Tokens-Before": str(before),
        "X-Ctx-Tokens-After": str(after),
        CACHE_PREFIX_HEADER: cache_prefix.header,
    }
    if added.tool_outputs is not None:
        counts = added.tool_outputs
        headers[TOOL_OUTPUTS_HEADER] = f"compressed={counts.compressed} masked={counts.masked}"
    if added.injected:
        headers["X-Ctx-Memories"] = str(added.injected)
    if outcome.checkpoint is not None:
        # The first k messages are represented by the summary (their system messages still go verbatim).
        headers["X-Ctx-Summarized"] = str(outcome.checkpoint.end)
    if outcome.compacted:
        headers["X-Ctx-Compacted"] = "1"
    if outcome.branches:
        headers["X-Ctx-Branch-Summaries"] = str(outcome.branches)
    if retried:
        headers["X-Ctx-Retried"] = "1"
    return headers
