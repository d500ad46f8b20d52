"""Note 002's per-round memories: what one finished round says of the user and of the project. Pure.

A round is a user message and everything up to the next user message (read from the roles
alone: memory knows no strategy). A round is *finished* once an assistant answered in it and
the next user message came (``completed_rounds``); each is extracted once, after it ended.

- **User memory**, the profile: what the user says of themselves — who they are ("I'm a data
  engineer", "my name is …", "I live in …", "我是 …") and how they want to be answered ("I
  prefer metric units", "always answer in French", "please don't …", "我喜欢 …", "请不要 …").
  Sentences of the user's own messages, questions skipped, at most ``MAX_USER_CARDS``; an
  instruction to the assistant is a ``constraint``, the rest typed by cue words (``card_type``).
- **Scope memory**, the project's facts: the round's most informative sentences and code
  (``cards_from_messages``: decisions, facts, plans), less what went to the user memory.

The LLM summariser writes the same two lists (``ctxproxy.summarize.round_notes``);
``from_notes`` turns its lines into cards, typed by cue words.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ctxproxy.memory.cards import (
    CardType,
    MemoryCard,
    card_type,
    cards_from_messages,
    dedupe,
    new_card,
    normalise,
    speaker_of,
)
from ctxproxy.summarize.sentences import is_question, sentences, split_code
from ctxproxy.summarize.transcript import content_text
from ctxproxy.vocabulary import ROLE_ASSISTANT, ROLE_USER

__all__ = ["MAX_USER_CARDS", "RoundMemories", "completed_rounds", "extract_round", "from_notes"]

MAX_USER_CARDS: Final = 3
MAX_NOTES: Final = 5  # lines of each list taken from a model's answer
MAX_SENTENCES: Final = 20  # of one message

# Instructions to the assistant: how this user wants to be answered, in every conversation.
_INSTRUCTION: Final = re.compile(
    r"^(?:please )?(?:always|never|don't|do not)\b|\bfrom now on\b|\b(?:i want|i'd like|i would like) you to\b"
    r"|\b(?:always|never) (?:answer|reply|respond|use|write|give|include|explain|format|show|call|speak)\b"
)
# What a user says of themselves: who they are, what they like.
_SELF: Final = re.compile(
    r"(?<![\w'])(?:i(?:'m| am) (?:a|an|from|based in|allergic|vegetarian|vegan)\b|my name is|call me\b"
    r"|i work (?:as|at|for|in|on)\b|i live in\b|i come from\b|i speak\b|my (?:job|role|team|company|pronouns"
    r"|time ?zone|native language|background)\b|i(?:'d| would)? (?:really )?(?:prefer|rather)\b"
    r"|i (?:really )?(?:like|love|enjoy|hate|dislike)\b|i (?:don't|do not) like\b)"
)
_INSTRUCTION_CJK: Final = ("请总是", "请始终", "请不要", "永远不要", "以后请", "不要用")
_SELF_CJK: Final = (
    "我叫",
    "我是",
    "我的名字",
    "我住在",
    "我来自",
    "我喜欢",
    "我偏好",
    "我更喜欢",
    "我习惯",
    "我讨厌",
    "我不喜欢",
)


@dataclass(frozen=True)
class RoundMemories:
    user: tuple[MemoryCard, ...] = ()  # for the user layer
    scope: tuple[MemoryCard, ...] = ()  # for the scope layer


def completed_rounds(messages: Sequence[Mapping[str, Any]]) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each finished round, newest first: a round from a user message up to
    the next user message, with an assistant message in it. Only when the newest message is a
    user message: a request that ends otherwise (a tool result) is inside a round."""
    end = len(messages) - 1
    if end < 1 or messages[end].get("role") != ROLE_USER:
        return
    answered = False
    for i in range(end - 1, -1, -1):
        role = messages[i].get("role")
        if role == ROLE_USER:
            if answered:
                yield i, end
            end, answered = i, False
        answered = answered or role == ROLE_ASSISTANT


def extract_round(messages: Sequence[Mapping[str, Any]], source: str, now: float) -> RoundMemories:
    """The deterministic extraction of one round (see the module docstring)."""
    user: list[tuple[MemoryCard, str]] = []
    for message in messages:
        if message.get("role") == ROLE_USER:
            user += _profile(message, source, now)
    kept = dedupe([card for card, _ in user])[:MAX_USER_CARDS]
    taken = frozenset(normalise(sentence) for card, sentence in user if card in kept)
    scope = cards_from_messages(messages, source, now, None, skip=taken)
    return RoundMemories(tuple(kept), tuple(scope))


def from_notes(user: Sequence[str], project: Sequence[str], source: str, now: float) -> RoundMemories:
    """Cards of a model's two lists (each line one statement), typed by cue words."""

    def cards(lines: Sequence[str], instruction_type: bool) -> tuple[MemoryCard, ...]:
        made = [
            new_card(line, _type(line) if instruction_type else card_type(line), source, now, None) for line in lines
        ]
        return tuple(dedupe([card for card in made if card.content])[:MAX_NOTES])

    return RoundMemories(cards(user, True), cards(project, False))


def _profile(message: Mapping[str, Any], source: str, now: float) -> list[tuple[MemoryCard, str]]:
    """The message's sentences about its speaker: each card and the sentence it quotes."""
    label, name = speaker_of(message)
    text = content_text(message.get("content"))
    if name is not None and text.startswith(f"{name}:"):
        text = text[len(name) + 1 :]
    prose, _ = split_code(text)
    return [
        (new_card(f"{label}: {sentence}", _type(sentence), source, now, None, name), sentence)
        for sentence in sentences(prose)[:MAX_SENTENCES]
        if _about_self(sentence)
    ]


def _lower(sentence: str) -> str:
    return sentence.lower().replace("’", "'")


def _about_self(sentence: str) -> bool:
    lower = _lower(sentence)
    if is_question(sentence):
        return False
    if _SELF.search(lower) or _is_instruction(lower):
        return True
    return not lower.isascii() and any(cue in lower for cue in _SELF_CJK)


def _is_instruction(lower: str) -> bool:
    return bool(_INSTRUCTION.search(lower)) or (not lower.isascii() and any(c in lower for c in _INSTRUCTION_CJK))


def _type(sentence: str) -> CardType:
    """A rule for the assistant is a constraint; anything else as its cue words say."""
    return "constraint" if _is_instruction(_lower(sentence)) else card_type(sentence)
