"""The I/O half of restoring recalled pages: the viewer of ``paged``'s Contents Page.

It reads the session's recall statistics from the Store through the host the engine lends it
(``ctxproxy.strategies.execution``) and leaves the rest to ``restore.plan_restoration`` (pure).
A failing Store read raises ``StoreError`` to the engine, which forwards the stored checkpoint:
it costs the restoration and the fresh statistics, never the request.
"""

from __future__ import annotations

from dataclasses import replace

from ctxproxy.strategies.base import Checkpoint, Conversation
from ctxproxy.strategies.execution import ExecutionHost, Shown
from ctxproxy.strategies.paged.base import PagedOptions
from ctxproxy.strategies.paged.contents import archive_index, decode_stats
from ctxproxy.strategies.paged.restore import plan_restoration


async def show_contents(conv: Conversation, checkpoint: Checkpoint, host: ExecutionHost) -> Shown | None:
    """The Contents Page with its statistics as of now, and the recalled pages restored after it."""
    options = host.options
    index = checkpoint.decoded(archive_index)
    if not isinstance(options, PagedOptions) or not index.entries:
        return None  # the tenant left paged (its old Contents Page is forwarded as stored), or nothing archived
    stats = index.stats(decode_stats(await host.store.get(host.recall_key())))
    planned = plan_restoration(conv, checkpoint, stats, options, host.count_text)
    if planned is None:
        return None
    block = replace(checkpoint.blocks[0], text=planned.text)
    return Shown(replace(checkpoint, blocks=(block,)), planned.messages)
