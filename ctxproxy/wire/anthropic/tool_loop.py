"""The proxy-tool loop for Messages clients: forward with ctxproxy's tools, answer its calls, ask again.

Round 1 is the forwarded body with our tools after the client's (``tools.offer_tools``). While an
answer stops for ``tool_use`` and every ``tool_use`` block in it is ours, ctxproxy answers the calls
(the request's ``ToolExecutor``, within the window: ``ctxproxy.tools.progress.Answering``), appends
the assistant message as the model made it and one user message of ``tool_result`` blocks, and
posts again — at most ``[tools] max_rounds`` tool rounds; the round after the last carries
``tool_choice: {"type": "none"}`` so the model answers in text (``tool_rounds``). Every round goes
through the ``UpstreamPort`` with the Messages API's key header, with the client's query and headers.

The client gets one message: what every earlier round showed (its blocks but our ``tool_use``:
text, thinking), then the final answer's content without our calls, the final ``stop_reason``, and
the usage summed over every round (``tool_blocks.final_message``), and (JSON answers only,
``ctxproxy.tools.report``) ``X-Ctx-Tool-Rounds`` saying how many rounds were answered. A turn that
calls the client's tools and ours is the client's: ours are stripped, unanswered, and its calls
reach it unchanged — its next request (its calls, then its results) is a valid conversation, and the model can call
ours again then (as ``ctxproxy.tools.loop`` explains for chat completions). An answer with no call of
ours reaches the client as the upstream's own bytes.

Streamed (``tool_relay``): every round is relayed into one client stream as it is generated, our
``tool_use`` blocks taken out and the content blocks numbered from 0 across the rounds.

Errors: an overflow of round 1 (an HTTP error, or an ``error`` event before the stream's first
content: ``ctxproxy.upstream.opening``) returns ``Overflow`` with nothing sent, so the pipeline
compacts and retries. An overflow of a later round (the same two kinds) is retried once with every
answer the loop gave replaced by ``NO_ROOM`` (``Progress.withdraw``) and ``tool_choice`` none; if
that overflows too, the client gets an ``invalid_request_error`` (JSON, or an ``error`` event once
its stream has started). Any other upstream error is relayed as it came (in a stream: as an
``error`` event). A failing executor does not end the request: the model is told.

The answer's usage, summed, says nothing of one prompt; round 1's does, and is what the pipeline
learns the prompt's size from (``forward.relayed``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from ctxproxy.pipeline.wire import Relayed
from ctxproxy.services import LOG_FIELDS
from ctxproxy.tools.budget import Budget
from ctxproxy.tools.calls import json_object
from ctxproxy.tools.progress import log_done
from ctxproxy.tools.report import with_tool_rounds
from ctxproxy.tools.round_io import json_round
from ctxproxy.upstream.overflow import Overflow
from ctxproxy.upstream.relay import relay_body
from ctxproxy.wire.anthropic.forward import relayed
from ctxproxy.wire.anthropic.tool_blocks import final_message, split_uses
from ctxproxy.wire.anthropic.tool_relay import stream_rounds
from ctxproxy.wire.anthropic.tool_rounds import MessageRounds, MessagesLoop

__all__ = ["forward_with_tools"]


async def forward_with_tools(
    loop: MessagesLoop, body: dict[str, Any], stream: bool, ctx_headers: Mapping[str, str], budget: Budget
) -> Relayed | Overflow:
    """Forward ``body`` (compacted, our tools in its ``tools``) and answer our calls; see the module.

    ``budget``: the model's window and the forwarded prompt's tokens."""
    rounds = MessageRounds(loop, body, budget)
    if stream:
        return await stream_rounds(loop, rounds, ctx_headers)
    return await _json(loop, rounds, ctx_headers)


async def _json(loop: MessagesLoop, rounds: MessageRounds, ctx_headers: Mapping[str, str]) -> Relayed | Overflow:
    while True:
        answered = await json_round(loop.post, loop.port, rounds)
        if isinstance(answered, Overflow):
            return answered
        up, raw = answered
        if rounds.rounds == 0:
            loop.request[LOG_FIELDS]["upstream_status"] = up.status
        answer = json_object(raw) if up.status == 200 else None
        content = answer.get("content") if answer is not None else None
        if answer is None or not isinstance(content, list):  # an error, or not a message: nothing of ours
            log_done(rounds.rounds, False, f"upstream_{up.status}" if up.status != 200 else "not_a_message")
            return Relayed(await relay_body(up, raw, with_tool_rounds(ctx_headers, rounds.rounds)))
        rounds.add_usage(answer.get("usage"))
        calls, client_calls = split_uses(content, loop.tools)
        if rounds.wants(calls, client_calls, answer.get("stop_reason")):
            await rounds.answer(content, calls)
            continue
        log_done(rounds.rounds, False, "answered")
        if rounds.rounds == 0 and not calls:
            return relayed(await relay_body(up, raw, ctx_headers), rounds.first_usage)  # the upstream's own bytes
        final = final_message(answer, loop.tools, rounds.usage, rounds.earlier)
        headers = with_tool_rounds(ctx_headers, rounds.rounds)
        return relayed(await relay_body(up, orjson.dumps(final), headers), rounds.first_usage)
