"""Where a conversation may be cut, and its turns and rounds. Pure functions over messages.

A cut at index ``i`` means ``messages[:i]`` are covered and ``messages[i:]`` are kept raw. A
cut is valid when ``messages[i]`` is not a tool (or legacy function) result: a result is never
separated from the assistant message whose ``tool_calls`` it answers, and since results
follow their call directly, this also means no call is left without its results. Nor may a cut
keep system messages alone: a conversation may end in one (Claude Code's first request is
``[user, system]``), and the newest user or assistant message is never summarised away.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxproxy.strategies.base import SYSTEM_ROLES, Message
from ctxproxy.vocabulary import RESULT_ROLES, ROLE_USER


def leading_system_count(messages: Sequence[Message]) -> int:
    for i, message in enumerate(messages):
        if message.get("role") not in SYSTEM_ROLES:
            return i
    return len(messages)


def is_valid_cut(messages: Sequence[Message], i: int) -> bool:
    if i <= 0 or i >= len(messages):
        return False
    role = messages[i].get("role")
    if role in SYSTEM_ROLES:
        return any(m.get("role") not in SYSTEM_ROLES for m in messages[i + 1 :])
    return role not in RESULT_ROLES


def valid_cut_at_or_before(messages: Sequence[Message], i: int, floor: int) -> int | None:
    """The nearest valid cut ``c`` with ``floor < c <= i`` (keeps more), else None."""
    for c in range(min(i, len(messages) - 1), floor, -1):
        if is_valid_cut(messages, c):
            return c
    return None


def valid_cut_at_or_after(messages: Sequence[Message], i: int, ceiling: int) -> int | None:
    """The nearest valid cut ``c`` with ``i <= c < ceiling`` (keeps less), else None."""
    for c in range(max(i, 1), min(ceiling, len(messages))):
        if is_valid_cut(messages, c):
            return c
    return None


def user_indices(messages: Sequence[Message], start: int = 0) -> list[int]:
    return [i for i in range(start, len(messages)) if messages[i].get("role") == ROLE_USER]


def turn_start(messages: Sequence[Message], i: int, floor: int) -> int:
    """Index of the user message that opened the turn containing ``i`` (``floor`` if none)."""
    for j in range(i, floor - 1, -1):
        if messages[j].get("role") == ROLE_USER:
            return j
    return floor
