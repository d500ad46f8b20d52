"""What every round of one request's proxy-tool loop shares, for the protocols whose rounds send a
round's items back (``ItemLoop``: Messages, Responses, Gemini; their ``…Rounds`` build the
conversation): the request, its tenant's upstream, our tools, how their calls are answered, the
round limit — and where every round is posted. A protocol gives only what differs: the path, the
header its key goes in and, when they are not the request's own, the headers and query.

``ItemLoopRounds`` is what the conversations those loops build have in common: what the answered
rounds showed the client, the usage summed over the rounds and round 1's own (the prompt the
pipeline counted). A protocol's rounds bring how a round is answered and its answers withdrawn.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from ctxproxy.config.models import TenantConfig
from ctxproxy.services import HTTP
from ctxproxy.tools.budget import Budget, Counting
from ctxproxy.tools.calls import add_usage
from ctxproxy.tools.definitions import ProxyTools
from ctxproxy.tools.progress import Answering, Progress, ToolExecutor
from ctxproxy.upstream.headers import BEARER, KeyHeader
from ctxproxy.upstream.http1 import UpstreamResponse
from ctxproxy.upstream.port import ClientHeaders, UpstreamPort

__all__ = ["ItemLoop", "ItemLoopRounds"]


@dataclass(frozen=True)
class ItemLoop:
    """What every round of one request shares (``ctxproxy.tools.driver.RoundLoop``)."""

    request: web.Request
    port: UpstreamPort  # with the protocol's key header
    tools: ProxyTools
    answering: Answering
    max_rounds: int
    path: str
    headers: ClientHeaders
    query: str

    @classmethod
    def open(
        cls,
        request: web.Request,
        tenant: TenantConfig,
        tools: ProxyTools,
        execute: ToolExecutor,
        counting: Counting,
        path: str,
        *,
        key_header: KeyHeader = BEARER,
        headers: ClientHeaders | None = None,
        query: str | None = None,
    ) -> ItemLoop:
        """The loop of one request: its tenant's upstream and ``[tools]`` limits, our ``tools`` as
        offered, their answers from ``execute``; ``counting`` measures a fragment of the protocol's
        conversation as the pipeline counts one. Every round goes to ``path`` with the key in
        ``key_header``, and with ``headers`` and ``query``, else the request's own."""
        port = UpstreamPort(request.app[HTTP], tenant.upstream, key_header=key_header)
        answering = Answering(execute, counting, tenant.tools.result_max_tokens)
        headers = request.headers if headers is None else headers
        query = request.rel_url.raw_query_string if query is None else query
        return cls(request, port, tools, answering, tenant.tools.max_rounds, path, headers, query)

    def post(self, payload: Mapping[str, Any]) -> AbstractAsyncContextManager[UpstreamResponse]:
        """Post one round as the request was posted; the response is closed when the block ends."""
        return self.port.post(self.path, orjson.dumps(payload), self.headers, raw_query=self.query)


class ItemLoopRounds(Progress):
    """The conversation one request's ``ItemLoop`` builds, as far as every protocol's is alike."""

    def __init__(self, loop: ItemLoop, payload: dict[str, Any], budget: Budget, ids: frozenset[str]) -> None:
        super().__init__(loop.max_rounds, budget, payload, ids)
        self._loop = loop
        self.earlier: list[Any] = []  # what the answered rounds showed the client, in order
        self.usage: dict[str, Any] | None = None  # summed over the rounds so far
        self.first_usage: Mapping[str, Any] | None = None  # round 1's: the prompt the pipeline counted

    def add_usage(self, usage: Mapping[str, Any] | None) -> None:
        """One round's usage object, as its protocol reports it."""
        if not isinstance(usage, Mapping):
            return
        if self.rounds == 0:
            self.first_usage = usage
        self.usage = add_usage(self.usage, usage)
