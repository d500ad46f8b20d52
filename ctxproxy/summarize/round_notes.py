"""Note 002's per-round memories, written by the tenant's model: one small call per finished round.

One non-streaming call to the tenant upstream, in the protocol of the request (``ctxproxy
.upstream.completion``), with the round's transcript (without its system messages and the
client's scaffolding, ``ctxproxy.summarize.scaffolding``), asking for one JSON object: what the
round says of the user (who they are, how they want to be answered) and of the project (its
facts, decisions, plans), each a list of short statements. The answer is validated — an object
with those two lists of strings, at most ``MAX_NOTES`` each, each cut to ``NOTE_MAX_CHARS`` —
and any failure gives ``None``, so the caller extracts deterministically instead; the reason is
logged (``round_notes.llm_fallback``), never message text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ctxproxy.summarize.json_answer import answer_json
from ctxproxy.summarize.scaffolding import strip_scaffolding
from ctxproxy.summarize.transcript import render_transcript
from ctxproxy.upstream.completion import CallFailed, CompletionClient, Prompt
from ctxproxy.vocabulary import SYSTEM_ROLES

__all__ = ["RoundNotes", "llm_round_notes"]

MAX_NOTES: Final = 5
NOTE_MAX_CHARS: Final = 300
MAX_PROMPT_CHARS: Final = 12_000  # a round is one exchange; a huge tool result is not what this is about
MIN_MESSAGE_CHARS: Final = 200
ANSWER_TOKENS: Final = 400

SYSTEM_PROMPT = f"""You keep an assistant's long-term memory. You are given one finished exchange \
between a user and the assistant. Write down only what is worth remembering in later conversations:
- "user": what the exchange says about the user themselves: who they are (name, role, background) \
and their preferences and standing instructions for how the assistant should answer;
- "project": facts of the work or project being discussed: decisions, constraints, plans, names, \
versions, numbers.
Each item is one short self-contained statement (at most {NOTE_MAX_CHARS} characters) in the \
conversation's language; leave out small talk and what only matters for this exchange; at most \
{MAX_NOTES} items per list, empty lists when there is nothing.
Answer with one JSON object and nothing else: {{"user": ["..."], "project": ["..."]}}"""


@dataclass(frozen=True)
class RoundNotes:
    user: tuple[str, ...]
    project: tuple[str, ...]


def _user_prompt(messages: Sequence[Mapping[str, Any]]) -> str:
    spoken = [m for m in strip_scaffolding(messages) if m.get("role") not in SYSTEM_ROLES]
    per_message = max(MIN_MESSAGE_CHARS, MAX_PROMPT_CHARS // max(1, len(spoken)))
    return f"The exchange:\n\n{render_transcript(spoken, per_message)}"


def _notes(value: Any, key: str) -> tuple[str, ...]:
    items = value.get(key, []) if isinstance(value, Mapping) else None
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise CallFailed("malformed", key=key)
    lines = (" ".join(item.split()) for item in items)
    return tuple(line[:NOTE_MAX_CHARS] for line in lines if line)[:MAX_NOTES]


async def llm_round_notes(
    client: CompletionClient, model: str, messages: Sequence[Mapping[str, Any]]
) -> RoundNotes | None:
    """What the round ``messages`` says of the user and of the project, by one call of ``model``
    through ``client``; None on any failure (see the module docstring). Never raises, except
    ``asyncio.CancelledError``."""
    prompt = Prompt(model, SYSTEM_PROMPT, _user_prompt(messages), ANSWER_TOKENS)
    return await answer_json(client, prompt, _read, "round_notes.llm_fallback")


def _read(answer: Any) -> RoundNotes:
    return RoundNotes(_notes(answer, "user"), _notes(answer, "project"))
