"""The LLM summariser: the tenant's upstream writes the body.

One non-streaming call per chunk, a system and a user prompt at temperature 0, asked in the
protocol of the request being compacted (``ctxproxy.upstream.completion``: OpenAI's chat
completions for a chat client, Anthropic's Messages API for a Messages client), with the
tenant's key or else the client's own.

A range whose transcript does not fit the summary model's window (``context_window`` minus the
answer's ``max_tokens`` minus the prompts) is cut into consecutive chunks that do: the first is
summarised with the task's flavour, each next one folded into the result so far with ``update``.

The answer is read in whatever reasonable shape it came (``ctxproxy.summarize.answer``: any
heading level or bold label, bullets of any kind, a fence, a preamble, a JSON object, plain prose
kept as Background) and mapped onto ``SECTIONS``; the model's own Files section is replaced by
the task's lists, and whole bullets are trimmed from the end of the largest sections until it
fits ``max_tokens``. Only an answer cut at ``max_tokens`` by the upstream (``truncated``), one
with no text in it (``empty_body``) or one more than
``OFF_BUDGET`` times ``max_tokens`` long (``off_budget``: the model ignored the task) is not used.
System and developer messages of the range are not sent: they are instructions the proxy
forwards verbatim, not conversation; nor is the client's scaffolding
(``ctxproxy.summarize.scaffolding``: wrapper blocks such as ``<system-reminder>``, text repeated
across the turns of the range or of the task's ``context``). The files the range's tool calls
read and modified join the task's lists, in the prompt and in the Files section.

Any failure — transport error, the tenant's ``summary_timeout`` passing (per call), a status
other than 200, a body that is not JSON, no choices (or no content), empty content or an unusable
answer, a window too small for even one message — falls back to the ``fallback`` summariser for
the whole task and logs
``summary.llm_fallback`` with the reason (never message text, summaries or keys).
``summarize`` never raises, except ``asyncio.CancelledError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import structlog

from ctxproxy.errors import UpstreamError
from ctxproxy.summarize.answer import read_answer
from ctxproxy.summarize.base import Summarizer, SummaryResult, SummaryTask
from ctxproxy.summarize.body import Body, fit_body, note_seen, parse_body
from ctxproxy.summarize.paths import mentioned_paths
from ctxproxy.summarize.prompts import system_prompt, user_prompt
from ctxproxy.summarize.scaffolding import Repeated, repeated_in, strip_scaffolding
from ctxproxy.summarize.transcript import DEFAULT_MAX_CHARS, render_message, truncate
from ctxproxy.summarize.work import find_work, merged_files
from ctxproxy.tokens import TokenCounter
from ctxproxy.upstream.completion import CallFailed, CompletionClient, Prompt
from ctxproxy.upstream.port import transport_failure
from ctxproxy.vocabulary import SYSTEM_ROLES

__all__ = ["LLMSummarizer"]

# Tokens of the chat framing around the two prompt messages, plus slack for estimates.
PROMPT_FRAMING_TOKENS = 32
# A chunk must hold at least this many tokens of transcript, else the window is too small.
MIN_CHUNK_TOKENS = 64
# An answer this many times longer than asked for ignored the task: trimming would keep a sliver
# (under 5 %) of it, so it is not used. A shorter over-long answer is trimmed, whole bullets first.
OFF_BUDGET = 20


class LLMSummarizer:
    """Summaries written by ``model``, asked through ``client`` (the tenant's upstream, in the
    request's protocol, on its client's behalf), with ``fallback`` on any failure."""

    name = "llm"

    def __init__(
        self,
        client: CompletionClient,
        model: str,
        counter: TokenCounter,
        context_window: int,
        fallback: Summarizer,
        *,
        max_chunks: int = 16,
        max_message_chars: int = DEFAULT_MAX_CHARS,
        repeated: Repeated = repeated_in,
    ) -> None:
        """``repeated``: what finds the texts the history repeats (the client's scaffolding): the
        extractive summariser's, which reads a conversation's history once, where there is one."""
        self._client = client
        self._model = model
        self._counter = counter
        self._context_window = context_window
        self._fallback = fallback
        self._max_chunks = max_chunks
        self._max_chars = max_message_chars
        self._repeated = repeated

    async def summarize(self, task: SummaryTask) -> SummaryResult:
        try:
            return SummaryResult(await self._summarize(task), self.name)
        except CallFailed as failure:
            return await self._fall_back(task, failure.reason, failure.details)
        except UpstreamError as error:
            reason, name = transport_failure(error)
            return await self._fall_back(
                task, reason, {"timeout": self._client.timeout} if reason == "timeout" else {"error": name}
            )
        except Exception as exc:  # a bug here must not fail the user's request either
            return await self._fall_back(task, "error", {"error": type(exc).__name__})

    # --- the work ----------------------------------------------------------------------------

    async def _summarize(self, task: SummaryTask) -> str:
        ranged = [m for m in task.messages if isinstance(m, Mapping)]
        cleaned = strip_scaffolding(ranged, repeated=self._repeated(ranged, task.context))
        messages = [m for m in cleaned if m.get("role") not in SYSTEM_ROLES]
        if not messages:  # nothing for a model to say: the fallback's (silent) answer
            raise CallFailed("empty_range")
        work = find_work(messages)
        read, modified = merged_files((task.files_read, task.files_modified), (work.files_read, work.files_modified))
        seen = tuple(mentioned_paths(messages))
        task = replace(task, files_read=tuple(read), files_modified=tuple(modified), files_seen=seen)
        chunks = self._chunks([render_message(m, self._max_chars) for m in messages], task)
        summary = ""
        for number, chunk in enumerate(chunks, 1):
            step = task if number == 1 else replace(task, flavour="update", previous=summary)
            try:
                summary = await self._call(step, chunk)
            except CallFailed as failure:
                failure.details.update(chunk=number, chunks=len(chunks))
                raise
        return summary

    def _tokens(self, text: str) -> int:
        return self._counter.count_text(text, self._model)

    def _room(self, task: SummaryTask, previous_tokens: int = 0) -> int:
        """Transcript tokens that fit one call of ``task`` (its previous summary included)."""
        prompts = self._tokens(system_prompt(task.max_tokens)) + self._tokens(user_prompt(task, ""))
        used = task.max_tokens + prompts + previous_tokens + PROMPT_FRAMING_TOKENS
        return self._context_window - used

    def _chunks(self, blocks: list[str], task: SummaryTask) -> list[str]:
        first = self._room(task)
        # Later chunks fold into the summary so far, which is at most max_tokens long.
        rest = self._room(replace(task, flavour="update", previous="-"), task.max_tokens)
        if first < MIN_CHUNK_TOKENS:
            raise CallFailed("window_too_small", context_window=self._context_window)
        chunks: list[list[str]] = [[]]
        used = 0
        for block in blocks:
            room = first if len(chunks) == 1 else rest
            cost = self._tokens(block) + 2  # the blank line between blocks
            if chunks[-1] and used + cost > room:
                if rest < MIN_CHUNK_TOKENS:
                    raise CallFailed("window_too_small", context_window=self._context_window)
                if len(chunks) == self._max_chunks:
                    raise CallFailed("too_many_chunks", max_chunks=self._max_chunks)
                chunks.append([])
                used, room = 0, rest
            if cost > room:  # too big for a chunk on its own: cut it to fit one
                block = self._cut(block, room - 2)
                cost = self._tokens(block) + 2
            chunks[-1].append(block)
            used += cost
        return ["\n\n".join(chunk) for chunk in chunks]

    def _cut(self, block: str, tokens: int) -> str:
        size = len(block)
        while size > 0:
            size = size * 9 // 10
            cut = truncate(block, size)
            if self._tokens(cut) <= tokens:
                return cut
        return truncate(block, 0)

    async def _call(self, task: SummaryTask, transcript: str) -> str:
        prompt = Prompt(self._model, system_prompt(task.max_tokens), user_prompt(task, transcript), task.max_tokens)
        return self._body(await self._client.answer(prompt), task)

    def _body(self, content: str, task: SummaryTask) -> str:
        if self._tokens(content) > OFF_BUDGET * task.max_tokens:
            raise CallFailed("off_budget", max_tokens=task.max_tokens)
        body = read_answer(content)
        if body.item_count() == 0:
            raise CallFailed("empty_body")
        previous = parse_body(task.previous) if task.flavour == "update" and task.previous else Body()
        body.files_read, body.files_modified = merged_files(
            (previous.files_read, previous.files_modified), (task.files_read, task.files_modified)
        )
        note_seen(body, previous.files_seen, body.files_seen, task.files_seen)
        return fit_body(body, task.max_tokens, self._counter, drop="last")

    async def _fall_back(self, task: SummaryTask, reason: str, details: Mapping[str, Any]) -> SummaryResult:
        log = structlog.get_logger(__name__)  # looked up per use: configuration may change (tests)
        if reason != "empty_range":
            log.warning("summary.llm_fallback", reason=reason, model=self._model, flavour=task.flavour, **details)
        try:
            return await self._fallback.summarize(task)
        except Exception as exc:
            log.error("summary.fallback_failed", error=type(exc).__name__)
            first = next((render_message(m, 200) for m in task.messages if isinstance(m, Mapping)), "")
            text = f"### Background\n- {' '.join(first.split())}" if first else (task.previous or "")
            return SummaryResult(text, self._fallback.name)
