"""Proxy-side tools: ctxproxy's own ``recall_page`` and ``search_memory``, answered without the client.

What every protocol's loop shares lives here: ``definitions`` (descriptions, schemas, names, order),
``budget``, ``handlers``, ``progress``, ``round_io``, ``report``, and ``driver``, the loop itself
for every protocol, which brings its shapes as a ``ToolDialect`` (chat completions' is ``loop``;
the Messages API's ``ctxproxy.wire.anthropic.tool_loop``; the Responses API's
``ctxproxy.wire.openai_responses.tool_loop``). The rest is chat completions' shapes.

- ``definitions``: which tools a request is offered, under which non-clashing names, where in ``tools``.
- ``calls``: pure helpers for one round (our calls vs the client's, stripping, next messages, usage).
- ``fragments``: which streamed tool-call fragment belongs to which call, and whose call it is.
- ``stream``: the per-round SSE filter that keeps our calls out of the client's stream.
- ``budget``: how many tokens the next round's tool answers may take, from the model's window.
- ``handlers``: the answers themselves, from the Store (``ToolAnswers``).
- ``progress``: answering a round's calls within the window, counting rounds, ids, the withdrawal.
- ``round_io``: posting a round, relaying streamed rounds into one client stream, failing it.
- ``rounds``: what one request's rounds share, and the conversation they build (next payload, ids).
- ``driver``: the one loop (JSON and streamed), driven by each protocol's ``ToolDialect``.
- ``loop``: chat completions' dialect (``ChatDialect``) and its entry point, ``forward_with_tools``.
- ``stream_relay``: what a chat completions stream is to the loop (``ChatStream``).
- ``report``: what a loop of any protocol tells the client of itself (``X-Ctx-Tool-Rounds``).
"""

from ctxproxy.tools.definitions import RECALL_PAGE, SEARCH_MEMORY, ProxyTools, offer_tools, with_tools
from ctxproxy.tools.loop import ToolExecutor, forward_with_tools

__all__ = [
    "RECALL_PAGE",
    "SEARCH_MEMORY",
    "ProxyTools",
    "ToolExecutor",
    "forward_with_tools",
    "offer_tools",
    "with_tools",
]
