"""A deterministic summariser that needs no model: sentences sorted into the summary sections.

Messages are read without the client's scaffolding (``ctxproxy.summarize.scaffolding``: wrapper
blocks such as ``<system-reminder>``, text repeated across the turns of the range or of the
task's ``context``). What goes where (the sentence rules are in ``ctxproxy.summarize.sentences``):

- **Goal**: the first user request of the range — the first sentence of the first user message
  that says something (``content_score`` ≥ 2 or four CJK characters; else its first sentence).
  ``update`` keeps the previous summary's Goal; ``split_turn`` uses the turn's request.
- **Requests**, **Commands**, **Errors** (``ctxproxy.summarize.work``): each later user message
  that the assistant answered with tool calls, by the same sentence as a Goal; each command
  run, ``- `grep -c ERROR a.log` → 42`` (``→ failed (exit 1): <error line>``); each other
  call whose result is an error, ``- Read: File does not exist.``.
- **Key facts**, **Constraints**, **Decisions**, **TODOs / next steps**, **Background**: the
  sentences of every non-system message, classified, each prefixed with its speaker (the
  message's ``name``, else its role): ``- Melanie: We went camping with the kids.`` — except
  the results of the calls told of under Commands, Errors and Files (a command's output, a
  file's contents), and the sentences already under Goal or Requests. Key facts
  keep the ``fact_score``-best of the range, Background the ``content_score``-best (a budget-sized
  number, shown in conversation order). ``split_turn``: Background is instead what the
  assistant and its tools did so far, in order (commands left to Commands).
- **Important snippets**: the first line of each fenced code block and inline commands.
- **Files**: ``Read: …`` / ``Modified: …`` from the previous body (``update``), the task and the
  range's tool calls; a file modified anywhere is listed only as modified. ``Seen: …``: every
  other path the range's texts name (``ctxproxy.summarize.paths``), by directory.

``update`` parses the previous body, appends the new range's items after the old ones, drops
items whose normalised text is already there, and fits the result to ``max_tokens`` dropping
the oldest items of the largest sections first (``ctxproxy.summarize.body.fit_body``). Questions,
system messages, and sentences past the 20th of a message are ignored; a message's text counts
up to ``max_message_chars`` (a tool result up to 600). A non-empty range never gives an empty
body: without any classified sentence, the first messages' text is the Background (their raw
text when the range held nothing but scaffolding).

Cost is linear in the range: about 10 µs per sentence. The per-message analysis (snippets,
sentences, their sections) is pure and memoised by speaker and text in a small LRU, so a range
that was seen before — the same history in the next request, a benchmark replaying a session —
costs a fraction of that.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ctxproxy.cache import ByteLRU, CachePool, json_size
from ctxproxy.summarize.base import SECTIONS, SummaryResult, SummaryTask
from ctxproxy.summarize.body import MAX_CHARS_PER_TOKEN, Body, bullet, fit_body, item_key, note_seen, parse_body
from ctxproxy.summarize.paths import mentioned_paths
from ctxproxy.summarize.repeats import RepeatScans
from ctxproxy.summarize.scaffolding import strip_scaffolding, text_units
from ctxproxy.summarize.sentences import cjk_count, classify, content_score, sentences, split_code
from ctxproxy.summarize.transcript import (
    DEFAULT_MAX_CHARS,
    SYSTEM_ROLES,
    content_text,
    render_message,
    speaker,
    tool_calls,
)
from ctxproxy.summarize.work import CommandRun, Work, find_work, merged_files
from ctxproxy.tokens import TokenCounter
from ctxproxy.vocabulary import RESULT_ROLES, ROLE_ASSISTANT, ROLE_USER

__all__ = ["ExtractiveSummarizer"]

MAX_SENTENCES_PER_MESSAGE = 20
MAX_TOOL_CHARS = 600
MAX_ITEM_CHARS = 240
MAX_ACTION_CHARS = 120
FALLBACK_MESSAGES = 3
# Key facts / Background keep about one item per this many tokens of the budget.
TOKENS_PER_FACT = 50
TOKENS_PER_BACKGROUND = 100
_UNITS = "\x00units"  # the memo's key for a text's repetition keys, beside its analyses by speaker


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _says_something(sentence: str) -> bool:
    return content_score(sentence) >= 2 or cjk_count(sentence) >= 4


def _request(text: str) -> str:
    """What a user message asks: its first sentence that says something, else its first one."""
    found = sentences(split_code(text)[0])
    return next((s for s in found if _says_something(s)), found[0] if found else text.strip())


def _goal(messages: Sequence[Mapping[str, Any]], max_chars: int) -> str | None:
    for message in messages:
        if message.get("role") != ROLE_USER:
            continue
        chosen = _request(content_text(message.get("content"))[:max_chars])
        if chosen:
            return chosen
    return None


def _command_item(run: CommandRun) -> str:
    command = _clip(run.command, MAX_ACTION_CHARS).replace("`", "'")
    said = run.outcome
    if said is None:
        return f"`{command}`"
    line = _clip(said.line, MAX_ACTION_CHARS) if said.line else ""
    if said.failed:
        code = f" (exit {said.exit_code})" if said.exit_code not in (None, 0) else ""
        return f"`{command}` → failed{code}" + (f": {line}" if line else "")
    return f"`{command}` → {line or '(no output)'}"


class _Analysis(NamedTuple):
    snippets: tuple[str, ...]  # rendered
    sentences: tuple[str, ...]
    classified: tuple[tuple[str, str, int, str], ...]  # (sentence, section, score, item)


def _analyse(who: str, text: str) -> _Analysis:
    """One message's snippets and classified sentences. Pure, so each summariser memoises it:
    a rolling session and a benchmark replaying it see the same messages again and again."""
    prose, snippets = split_code(text)
    found = tuple(sentences(prose)[:MAX_SENTENCES_PER_MESSAGE])
    classified = []
    for sentence in found:
        section = classify(sentence)
        if section is not None:
            classified.append((sentence, section[0], section[1], f"- {who}: {_clip(sentence, MAX_ITEM_CHARS)}"))
    return _Analysis(tuple(snippet.render() for snippet in snippets), found, tuple(classified))


@dataclass
class _Ranked:
    """Candidates of a section that keeps only its best ``limit``, shown in their order."""

    limit: int
    candidates: list[tuple[int, int, str]] = field(default_factory=list)  # (-score, order, item)

    def add(self, score: int, item: str) -> None:
        self.candidates.append((-score, len(self.candidates), item))

    def best(self, seen: set[str]) -> list[str]:
        kept: list[tuple[int, int, str]] = []
        for candidate in sorted(self.candidates):
            if len(kept) == self.limit:
                break
            if _unseen(candidate[2], seen):
                kept.append(candidate)
        return [item for _, _, item in sorted(kept, key=lambda c: c[1])]


def _unseen(item: str, seen: set[str]) -> bool:
    """True (and now seen) when no item with the same normalised text was kept before."""
    key = item_key(item)
    if not key or key in seen:
        return False
    seen.add(key)
    return True


def _newest(items: list[str], seen: set[str], max_chars: int) -> list[str]:
    """The newest unseen items that fit ``max_chars``: all the budget could ever keep."""
    kept: list[str] = []
    total = 0
    for item in reversed(items):
        if total > max_chars:
            break
        if _unseen(item, seen):
            kept.append(item)
            total += len(item) + 1
    return kept[::-1]


class _Extraction:
    """Candidate items of one range. Exact repeats are skipped here; items with the same
    normalised text only when the kept ones are chosen (``result``), which is much cheaper."""

    def __init__(
        self, goal: str | None, max_tokens: int, split_turn: bool, analyse: Callable[[str, str], _Analysis]
    ) -> None:
        self.analyse = analyse
        self.said = {goal}  # the Goal's and the Requests' sentences: not repeated in another section
        self.covered: set[str | None] = set()  # the calls told of elsewhere: their results are not read
        self.split_turn = split_turn
        self.max_chars = max_tokens * MAX_CHARS_PER_TOKEN
        self.sections: dict[str, list[str]] = {}
        self.exact: set[str] = set()
        self.facts = _Ranked(max(3, max_tokens // TOKENS_PER_FACT))
        self.background = _Ranked(max(2, max_tokens // TOKENS_PER_BACKGROUND))

    def _new(self, item: str) -> bool:
        if item in self.exact:
            return False
        self.exact.add(item)
        return True

    def add(self, section: str, text: str) -> None:
        item = bullet(_clip(text, MAX_ITEM_CHARS))
        if self._new(item):
            self.sections.setdefault(section, []).append(item)

    def message(self, message: Mapping[str, Any], max_chars: int) -> None:
        role = message.get("role")
        if role in RESULT_ROLES and message.get("tool_call_id") in self.covered:
            return  # a command's output, an error, a file's contents: told in their sections
        who = speaker(message)
        limit = MAX_TOOL_CHARS if role in RESULT_ROLES else max_chars
        analysis = self.analyse(who, content_text(message.get("content"))[:limit])
        for snippet in analysis.snippets:
            self.add("Important snippets", snippet)
        if self.split_turn:  # first: what was done belongs to Background, even "I'll …"
            self.action(message, who, analysis.sentences)
        for sentence, section, score, item in analysis.classified:
            if (section == "Background" and self.split_turn) or sentence in self.said or not self._new(item):
                continue
            if section == "Key facts":
                self.facts.add(score, item)
            elif section == "Background":
                self.background.add(score, item)
            else:
                self.sections.setdefault(section, []).append(item)

    def work(self, work: Work, max_chars: int) -> None:
        """Requests, Commands and Errors of the range (the Goal's request is not repeated)."""
        for text in work.requests:
            request = _request(text[:max_chars])
            if request and request not in self.said:
                self.said.add(request)
                self.add("Requests", request)
        for run in work.commands:
            self.add("Commands", _command_item(run))
        for error in work.errors:
            self.add("Errors", error.render())
        # split_turn tells what was done in order, in Background: only commands are told apart.
        self.covered = {run.call_id for run in work.commands} if self.split_turn else set(work.covered)
        self.covered.discard(None)

    def action(self, message: Mapping[str, Any], who: str, found: Sequence[str]) -> None:
        """split_turn's Background: what the assistant and its tools did, one item each."""
        role = message.get("role")
        if role == ROLE_ASSISTANT:
            said = next((s for s in found if _says_something(s)), found[0] if found else None)
            if said is not None:
                self.add("Background", f"{who}: {_clip(said, MAX_ACTION_CHARS)}")
            calls = message.get("tool_calls")
            ids = [c.get("id") if isinstance(c, Mapping) else None for c in calls] if isinstance(calls, list) else []
            for i, (name, arguments) in enumerate(tool_calls(message)):
                if i >= len(ids) or ids[i] not in self.covered:
                    self.add("Background", f"{who} → tool {name} {_clip(arguments, MAX_ACTION_CHARS)}")
        elif role in RESULT_ROLES:
            label = "tool result" + (f" {who}" if who not in RESULT_ROLES else "")
            self.add("Background", f"{label}: {_clip(' '.join(found), MAX_ACTION_CHARS) or '(empty)'}")

    def result(self, seen: set[str]) -> dict[str, list[str]]:
        """The kept items per section, none whose normalised text is in ``seen`` (updated)."""
        out: dict[str, list[str]] = {}
        for name in SECTIONS:
            if name == "Key facts":
                items = self.facts.best(seen)
            elif name == "Background":
                ranked = self.background.best(seen)
                items = ranked + _newest(self.sections.get(name, []), seen, self.max_chars)
            else:
                items = _newest(self.sections.get(name, []), seen, self.max_chars)
            if items:
                out[name] = items
        return out


class ExtractiveSummarizer:
    """Deterministic, model-free summaries in the contract's format (see the module docstring)."""

    name = "extractive"

    def __init__(
        self,
        counter: TokenCounter,
        *,
        max_message_chars: int = DEFAULT_MAX_CHARS,
        cache: ByteLRU[Any, Any] | None = None,
    ) -> None:
        """``cache``: the memo of per-message analyses, of the texts' repetition keys and of each
        conversation's scan for repeated texts (default: its share of the default budget)."""
        self._counter = counter
        self._max_chars = max_message_chars
        self._analyses = cache if cache is not None else CachePool().lru("summary_analysis")
        self._repeats = RepeatScans(self._analyses, self._units)

    def _analyse(self, who: str, text: str) -> _Analysis:
        key = (who, text)
        found = self._analyses.get(key)
        if not isinstance(found, _Analysis):
            found = _analyse(who, text)
            self._analyses.put(key, found, json_size(key) + json_size(found))
        return found

    def _units(self, text: str) -> frozenset[bytes]:
        """``text_units``, remembered: a conversation's texts are the same strings at every summary
        of it (one hash each), when its history is scanned anew (``RepeatScans``)."""
        key = (_UNITS, text)
        found = self._analyses.get(key)
        if not isinstance(found, frozenset):
            found = text_units(text)
            self._analyses.put(key, found, 2 * len(text) + 64 + 24 * len(found))
        return found

    def repeated(self, messages: Sequence[Mapping[str, Any]], context: Sequence[Mapping[str, Any]]) -> frozenset[bytes]:
        """The keys of the texts ``messages`` and their ``context`` repeat (``scaffolding.repeated_in``),
        the conversation's history read once (``RepeatScans``): the LLM summariser asks it too."""
        return self._repeats.repeated(messages, context)

    async def summarize(self, task: SummaryTask) -> SummaryResult:
        return SummaryResult(self.summarize_text(task), self.name)

    def summarize_text(self, task: SummaryTask) -> str:
        """The summary body, synchronously (benchmarks call this directly)."""
        messages = [m for m in task.messages if isinstance(m, Mapping)]
        messages = strip_scaffolding(messages, repeated=self.repeated(messages, task.context))
        spoken = [m for m in messages if m.get("role") not in SYSTEM_ROLES]
        work = find_work(spoken)
        previous = parse_body(task.previous) if task.flavour == "update" and task.previous else Body()
        seen = {item_key(item) for items in previous.sections.values() for item in items}
        files = merged_files(
            (previous.files_read, previous.files_modified),
            (task.files_read, task.files_modified),
            (work.files_read, work.files_modified),
        )
        body = Body({name: list(items) for name, items in previous.sections.items()}, *files)
        note_seen(body, previous.files_seen, mentioned_paths(spoken))
        goal = None if body.sections.get("Goal") else _goal(spoken, self._max_chars)
        if goal is not None:
            body.items("Goal").append(bullet(_clip(goal, MAX_ITEM_CHARS)))
        extraction = _Extraction(goal, task.max_tokens, task.flavour == "split_turn", self._analyse)
        extraction.work(work, self._max_chars)
        for message in messages:
            if message.get("role") not in SYSTEM_ROLES:
                extraction.message(message, self._max_chars)
        for name, items in extraction.result(seen).items():
            body.items(name).extend(items)
        if body.item_count() == 0 and task.messages:  # nothing said, maybe scaffolding alone: its first lines
            raw = [m for m in task.messages if isinstance(m, Mapping)]
            unspoken = [m for m in raw if m.get("role") not in SYSTEM_ROLES]
            body.items("Background").extend(self._first_lines(spoken or unspoken or raw))
        body.sections = {name: items for name, items in body.sections.items() if items}
        self._repeats.keep()
        return fit_body(body, task.max_tokens, self._counter, drop="oldest")

    def _first_lines(self, messages: Sequence[Mapping[str, Any]]) -> list[str]:
        lines = (render_message(m, MAX_ITEM_CHARS).partition("\n")[0] for m in messages[:FALLBACK_MESSAGES])
        return [bullet(_clip(line, MAX_ITEM_CHARS)) for line in lines if line.strip()]
