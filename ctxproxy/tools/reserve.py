"""How many tokens compaction keeps free for ctxproxy's own tools.

Compaction runs before ctxproxy decides whether to offer its tools — that depends on what the
compacted prompt archives and on what the store holds — so the room kept is for the tools it *may*
offer this request: ``recall_page`` when the tenant's strategy archives pages (its options say so,
``StrategyOptions.archives_pages``), ``search_memory`` then or when memory is on; under the names
this request would get, and none when the request declines them (the protocol's ``offer``, which
also gives the definitions their protocol's shape); counted with the request's model, as the
forwarded prompt's count (``X-Ctx-Tokens-After``) counts them. The tools offered in the end are
these or fewer. A Contents Page that names renamed tools grows by as
much as its instruction does: that room is kept too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ctxproxy.config.models import TenantConfig
from ctxproxy.strategies.base import StrategyOptions
from ctxproxy.strategies.paged.contents import INSTRUCTION, instruction
from ctxproxy.tokens import TokenCounter
from ctxproxy.tools.definitions import RECALL_PAGE, SEARCH_MEMORY, ProxyTools

Offer = Callable[[Sequence[str]], ProxyTools | None]
"""The tools of the given internal names this request would be offered (its protocol's ``offer_tools``
bound to its body)."""


def tools_reserve(tenant: TenantConfig, offer: Offer, counter: TokenCounter, model: str | None) -> int:
    """Tokens of the tool definitions ctxproxy may add to this request (and of the Contents Page's
    naming of them); 0 when it will not offer any."""
    if not tenant.tools.enabled:
        return 0
    archives = _archives_pages(tenant)
    possible = [RECALL_PAGE] if archives else []
    if archives or tenant.memory.enabled:
        possible.append(SEARCH_MEMORY)
    if not possible:  # nothing to offer (``offer`` would say so, reading the body's tools first)
        return 0
    tools = offer(possible)
    if tools is None:
        return 0
    reserve = counter.count_tools(tools.definitions, model)
    if archives:
        named = instruction(tools.wire_names.get(RECALL_PAGE), tools.wire_names.get(SEARCH_MEMORY))
        reserve += max(0, counter.count_text(named, model) - counter.count_text(INSTRUCTION, model))
    return reserve


def _archives_pages(tenant: TenantConfig) -> bool:
    options = tenant.compaction.options.get(tenant.compaction.strategy)
    return isinstance(options, StrategyOptions) and options.archives_pages
