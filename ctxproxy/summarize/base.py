"""The summariser contract.

A ``SummaryTask`` names what to summarise and how:

- ``fresh``: summarise ``messages`` from scratch;
- ``update``: fold ``messages`` into ``previous`` (a summary this project produced earlier),
  returning one updated summary — rolling, never stacked;
- ``split_turn``: ``messages`` are the start of a turn whose end stays raw; summarise what the
  user asked and what has happened so far in that turn;
- ``branch``: ``messages`` are a branch the conversation left (the user went back to an earlier
  point and went on differently, note 003); summarise what was explored there.

``context`` is the whole conversation ``messages`` were taken from, as the request sent it
(system messages included), or empty: summarisers read it only to tell the client's scaffolding
(text repeated across turns, ``ctxproxy.summarize.scaffolding``) from what the user said.

The result is the summary **body**: Markdown sections headed ``### <name>`` in the order of
``SECTIONS`` (empty sections omitted), never longer than ``max_tokens``. The caller adds the
``## Context Summary`` header when it renders the summary into a message. ``Requests``,
``Commands`` and ``Errors`` are the work of an agent session (``ctxproxy.summarize.work``): a
chat without tool calls has none of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

Flavour = Literal["fresh", "update", "split_turn", "branch"]

SECTIONS = (
    "Goal",
    "Requests",
    "Background",
    "Key facts",
    "Constraints",
    "Decisions",
    "Commands",
    "Errors",
    "TODOs / next steps",
    "Important snippets",
)
FILES_SECTION = "Files"  # "Read: a, b" / "Modified: c" lines, after SECTIONS


@dataclass(frozen=True)
class SummaryTask:
    flavour: Flavour
    messages: Sequence[Mapping[str, Any]]
    previous: str | None = None
    max_tokens: int = 1200
    files_read: tuple[str, ...] = ()
    files_modified: tuple[str, ...] = ()
    context: Sequence[Mapping[str, Any]] = ()
    files_seen: tuple[str, ...] = ()  # other paths the range names (``ctxproxy.summarize.paths``)


@dataclass(frozen=True)
class SummaryResult:
    text: str
    summarizer: str  # "llm" | "extractive" (also when the LLM one fell back)


class Summarizer(Protocol):
    name: str

    async def summarize(self, task: SummaryTask) -> SummaryResult: ...
