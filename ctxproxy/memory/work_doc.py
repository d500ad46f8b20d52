"""An archived page's agent facts as one searchable document. Pure.

A page document (``cards.page_doc``) holds the page's text cut to a few thousand characters, each
tool result to its start: the paths a ``grep`` or ``git log --stat`` printed further down, the
command lines and error lines of a long page are not in it, so ``search_memory`` cannot find the
page by them. ``work_doc`` is the rest, whole: every path the page names
(``ctxproxy.summarize.paths``), one a line; every command it ran, with how it went; every error
``ctxproxy.summarize.work`` recognises, and every line of its tool results that reports a problem
(``tool_outputs.logs.IMPORTANT``: an error, a failure, a traceback, a warning), up to
``MAX_PROBLEM_LINES``. It is a page document of the same page (``[page 12]``, recall
it for all of it), made only for a page that has any of these; a chat with no tools and no
paths gets none. A summary's range (``page`` None) gets one too, as a card: the summary holds
only what its budget allows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from ctxproxy.memory.cards import MemoryCard, card_id, page_id
from ctxproxy.summarize.paths import mentioned_paths
from ctxproxy.summarize.work import find_work
from ctxproxy.tool_outputs.logs import IMPORTANT
from ctxproxy.vocabulary import ROLE_TOOL

__all__ = ["MAX_DOC_CHARS", "work_doc"]

MAX_DOC_CHARS: Final = 20_000  # a page of a hundred tool calls stays one document of bounded size
MAX_LINE_CHARS: Final = 300
MAX_PROBLEM_LINES: Final = 200  # a page's problem lines, the first ones, each once


def _lines(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    work = find_work(messages)
    lines = [f"$ {' '.join(run.command.split())[:MAX_LINE_CHARS]}" for run in work.commands]
    lines += [f"error: {error.render()[:MAX_LINE_CHARS]}" for error in work.errors]
    lines += [
        f"error: {run.outcome.line[:MAX_LINE_CHARS]}" for run in work.commands if run.outcome and run.outcome.failed
    ]
    return [*dict.fromkeys([*lines, *_problems(messages)]), *mentioned_paths(messages)]


def _problems(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The lines of the tool results that report a problem, stripped, each once, the first
    ``MAX_PROBLEM_LINES``."""
    found: dict[str, None] = {}
    for message in messages:
        if message.get("role") != ROLE_TOOL:
            continue
        for text in _texts(message.get("content")):
            for line in text.splitlines():
                if len(found) >= MAX_PROBLEM_LINES:
                    return list(found)
                line = line.strip()
                if line and IMPORTANT.search(line):
                    found.setdefault(line[:MAX_LINE_CHARS])
    return list(found)


def _texts(content: object) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str)]
    return []


def work_doc(
    page: int | None, messages: Sequence[Mapping[str, Any]], source: str, now: float, when: str | None = None
) -> MemoryCard | None:
    """The document of page ``page``'s paths, commands and errors (``page`` None: of a range a
    summary stands for, named by ``source``); None when it has none."""
    lines = _lines([m for m in messages if isinstance(m, Mapping)])
    if not lines:
        return None
    title = f"Page {page}" if page is not None else source[:1].upper() + source[1:]
    content = f"{title}: files, commands and errors\n" + "\n".join(lines)
    content = content if len(content) <= MAX_DOC_CHARS else content[: content.rfind("\n", 0, MAX_DOC_CHARS)]
    if page is None:
        return MemoryCard(card_id(content), content, "fact", (), now, source, None, when=when)
    return MemoryCard(page_id(page, content), content, "fact", (), now, source, page, kind="page", when=when)
