"""Agent facts that survive compaction (issue 27.4), measured on what the upstream received.

For the last request of an agent conversation: its *compacted part* is the client's messages
whose text the forwarded prompt no longer holds word for word (summarised, archived, masked or
dropped). From that part come the facts an agent needs again: file paths, the shell commands its
tool calls ran, error lines of tool output, and numbers of three or more digits. A fact is
*present* when the forwarded prompt's text (every string in its messages and system prompt, tool
call arguments included) still contains it; a path also when a list by directory names it
(``dir/{a.py,b.py}``, as the summary's ``Seen:`` line writes them: ``ctxproxy.summarize.paths``).
Shares are of distinct facts.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
from _agent_recall import reached
from _compaction_servers import Upstream
from _prompt_cost import Shape

from ctxproxy.summarize.paths import expand_paths

KINDS = ("paths", "commands", "errors", "numbers")
RECALLED = ("paths", "commands", "errors")  # what is asked for by recall (a bare number is no query)
_PATH = re.compile(r"(?<![\w/.-])(?:[\w.-]+/)+[\w-]+\.[A-Za-z]{1,5}\b")
_ERROR = re.compile(r"\b(?:Error|Exception|Traceback|FAILED|error:|failed)\b")
_NUMBER = re.compile(r"(?<![\w.])\d{3,}(?![\w.])")
_GROUPED = re.compile(r"[^\s,{}]*/\{[^{}\s]*\}[^\s,{}/]*")


def strings(value: Any, key: str = "") -> Iterator[tuple[str, str]]:
    """Every ``(key, string)`` in a JSON value; a tool call's ``arguments`` string is read as JSON."""
    if isinstance(value, str):
        if key == "arguments":
            try:
                yield from strings(orjson.loads(value))
                return
            except orjson.JSONDecodeError:
                pass
        yield key, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from strings(v, str(k))
    elif isinstance(value, list):
        for item in value:
            yield from strings(item, key)


def _facts(message: Any) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {kind: set() for kind in KINDS}
    for key, text in strings(message):
        if key == "command":
            found["commands"].add(text.strip())
        found["paths"].update(_PATH.findall(text))
        found["numbers"].update(_NUMBER.findall(text))
        if key in ("content", "text", "output"):
            found["errors"].update(line.strip() for line in text.splitlines() if _ERROR.search(line))
    found["errors"].discard("")
    return found


@dataclass(frozen=True)
class Asking:
    """One conversation's last request and the facts its forwarded prompt lacked, to ask for."""

    base: str
    shape: Shape
    client: bytes
    headers: Mapping[str, str] | None
    tag: str
    missing: dict[str, set[str]]
    refs: dict[str, str]


_REF = re.compile(r'ref="(r[0-9a-f]+)"')


def _results(message: Any) -> list[dict[str, Any]]:
    """A message's tool results: a chat ``tool`` message, or Messages' ``tool_result`` blocks."""
    if not isinstance(message, dict):
        return []
    if message.get("role") == "tool":
        return [message]
    content = message.get("content")
    blocks = content if isinstance(content, list) else []
    return [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]


def _masked(sent: dict[str, Any]) -> dict[str, str]:
    """The forwarded prompt's masked tool outputs: call id -> the ref ``ctxproxy_retrieve`` takes."""
    found = {}
    for message in sent.get("messages") or []:
        for result in _results(message):
            ref = _REF.search("\n".join(text for _, text in strings(result.get("content"))))
            if ref:
                found[str(result.get("tool_call_id", result.get("tool_use_id")))] = ref.group(1)
    return found


@dataclass
class FactCounts:
    present: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    total: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    reached: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))  # present, or found by recall
    recalled: bool = False  # the recall calls were made
    refs: dict[str, str] = field(default_factory=dict)  # a fact of a masked tool output: its ref (last add)
    pending: list[Asking] = field(default_factory=list)  # what ``recall`` asks for

    def add(self, client: bytes, forwarded: bytes) -> dict[str, set[str]]:
        """Count the facts of ``client``'s compacted part and those ``forwarded`` still holds;
        the others, by kind."""
        sent = orjson.loads(forwarded)
        held = "\n".join(text for _, text in strings([sent.get("system"), sent.get("messages"), sent.get("input")]))
        compacted: dict[str, set[str]] = {kind: set() for kind in KINDS}
        masked = _masked(sent)
        for message in orjson.loads(client).get("messages") or []:
            texts = [text for _, text in strings(message) if len(text) > 20]
            if texts and not all(text in held for text in texts):
                for kind, facts in _facts(message).items():
                    compacted[kind] |= facts
                for result in _results(message):
                    ref = masked.get(str(result.get("tool_call_id", result.get("tool_use_id"))))
                    self.refs.update(
                        dict.fromkeys(_facts(result)["paths"] | _facts(result)["errors"], ref) if ref else {}
                    )
        grouped = set(expand_paths(_GROUPED.findall(held)))
        missing: dict[str, set[str]] = {}
        for kind in KINDS:
            self.total[kind] += len(compacted[kind])
            missing[kind] = {fact for fact in compacted[kind] if fact not in held and fact not in grouped}
            self.present[kind] += len(compacted[kind]) - len(missing[kind])
            self.reached[kind] += len(compacted[kind]) - len(missing[kind])  # in the prompt: no call needed
        return missing

    def ask_later(self, asking: Asking) -> None:
        """Keep what ``recall`` asks for, once the replay's own measures are taken."""
        self.pending.append(asking)

    async def recall(self, http: aiohttp.ClientSession, upstream: Upstream) -> None:
        """Ask for the facts the prompt lacked, one call each (``_agent_recall``), and count the
        ones the answers held."""
        for asking in self.pending:
            asked = [fact for kind in RECALLED for fact in sorted(asking.missing[kind])]
            a = asking
            found = await reached(http, a.base, a.shape, a.client, a.headers, upstream, a.tag, asked, a.refs)
            for kind in RECALLED:
                self.reached[kind] += len(asking.missing[kind] & found)
            self.recalled = True
        self.pending.clear()

    def __iadd__(self, other: FactCounts) -> FactCounts:
        for kind in KINDS:
            self.present[kind] += other.present[kind]
            self.reached[kind] += other.reached[kind]
            self.total[kind] += other.total[kind]
        self.recalled |= other.recalled
        return self

    def _shares(self, counts: dict[str, int], kinds: Sequence[str]) -> str:
        return " · ".join(f"{counts[k] / self.total[k]:.0%}" if self.total[k] else "–" for k in kinds)

    def cell(self) -> str:
        if not any(self.total.values()):
            return "–"
        return self._shares(self.present, KINDS) + f" ({sum(self.total.values())})"

    def reached_cell(self) -> str:
        return self._shares(self.reached, RECALLED) if self.recalled and any(self.total.values()) else "–"


def report_facts(rows: Sequence[tuple[str, str, str, FactCounts]]) -> None:
    """``(workload, window, strategy, counts)`` rows as a Markdown table."""
    if not rows:
        return
    print("## Agent facts of the compacted part still in the forwarded prompt (issue 27)\n")
    print(
        "Last request of each agent conversation: paths · commands · error lines · numbers present (facts); "
        "paths · commands · error lines present or reachable with one `ctxproxy_search_memory` call "
        "(`bench/_agent_recall.py`)\n"
    )
    print("| workload | window | strategy | present | with one recall |\n|---|---|---|---|---|")
    for workload, window, strategy, counts in rows:
        print(f"| {workload} | {window} | {strategy} | {counts.cell()} | {counts.reached_cell()} |")
    print()
