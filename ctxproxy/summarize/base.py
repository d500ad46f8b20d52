"""The summariser contract.

A ``SummaryTask`` names what to summarise and how:

- ``fresh``: summarise ``messages`` from scratch;
- ``update``: fold ``messages`` into ``previous`` (a summary this project produced earlier),
  returning one updated summary — rolling, never stacked;
- ``split_turn``: ``messages`` are the start of a turn whose end stays raw; summarise what the
  user asked and what has happened so far in that turn;
- ``branch``: ``messages`` are a branch the conversation left (the user went back to an earlier
  point and went on differently, note 003); summarise what was explored there.

The result is the summary **body**: Markdown sections headed ``### <name>`` in the order of
``SECTIONS`` (empty sections omitted), never longer than ``max_tokens``. The caller adds the
``## Context Summary`` header when it renders the summary into a message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

Flavour = Literal["fresh", "update", "split_turn", "branch"]

SECTIONS = (
    "Goal",
    "Background",
    "Key facts",
    "Constraints",
    "Decisions",
    "TODOs / next steps",
    "Important snippets",
)
FILES_SECTION = "Files"  # cut_point: "Read: a, b" / "Modified: c" lines, after SECTIONS


@dataclass(frozen=True)
class SummaryTask:
    flavour: Flavour
    messages: Sequence[Mapping[str, Any]]
    previous: str | None = None
    max_tokens: int = 1200
    files_read: tuple[str, ...] = ()
    files_modified: tuple[str, ...] = ()


@dataclass(frozen=True)
class SummaryResult:
    text: str
    summarizer: str  # "llm" | "extractive" (also when the LLM one fell back)


class Summarizer(Protocol):
    name: str

    async def summarize(self, task: SummaryTask) -> SummaryResult: ...
