"""The fake Anthropic upstream's request validation, with the API's own wording (pure).

Each check returns the ``error.message`` of a 400 ``invalid_request_error``, or None. The wordings
are Anthropic's as seen in the wild (quoted in GitHub issues of its SDKs' users):

* ``max_tokens: Field required`` (any required field missing);
* ``messages: first message must use the "user" role``;
* ``messages: roles must alternate between "user" and "assistant", but found multiple "user" roles
  in a row`` (``strict_roles``: today's API merges consecutive same-role turns instead, as its
  reference says, but older API versions and other Claude hosts refuse them);
* ``messages.N.content.M: unexpected `tool_use_id` found in `tool_result` blocks: ID. Each
  `tool_result` block must have a corresponding `tool_use` block in the previous message.``;
* ``messages.N: `tool_use` ids were found without `tool_result` blocks immediately after: IDS. Each
  `tool_use` block must have a corresponding `tool_result` block in the next message.`` (N: the
  assistant message; results only count at the start of the next user turn, before any other block);
* ``A maximum of 4 blocks with cache_control may be provided. Found N.``;
* ``messages.N: all messages must have non-empty content except for the optional final assistant
  message`` and ``messages: final assistant content cannot end with trailing whitespace``.

System messages inside ``messages`` (``role: "system"``) are accepted only with the
``mid-conversation-system-…`` beta (``system_messages``), as Claude Code sends them: never first,
never empty, and outside the user / assistant alternation (the turns around one are judged as if
it were not there).

Shapes the real API refuses with pydantic's wording (``messages.0.role: Input should be 'user' or
'assistant'``) are refused here in that style too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_CACHE_BREAKPOINTS", "check_request"]

MAX_CACHE_BREAKPOINTS = 4
_ID_FIELDS = {"tool_use": "id", "tool_result": "tool_use_id"}


@dataclass
class _Turn:
    """Consecutive messages of one role: the API's unit of conversation."""

    role: str
    blocks: list[tuple[int, int, dict[str, Any]]]  # (message index, block index, block)
    first: int  # index of its first message
    last: int  # index of its last message


def check_request(
    payload: Any, *, needs_max_tokens: bool = True, strict_roles: bool = True, system_messages: bool = False
) -> str | None:
    if not isinstance(payload, dict):
        return "Input should be a valid dictionary"
    required = ("model", "messages", "max_tokens") if needs_max_tokens else ("model", "messages")
    for name in required:
        if name not in payload:
            return f"{name}: Field required"
    roles = ("user", "assistant", "system") if system_messages else ("user", "assistant")
    shape = _check_shape(payload, roles)
    if shape is not None:
        return shape
    messages = payload["messages"]
    if messages[0]["role"] == "system":
        return "messages.0.role: a system message cannot be the first message"
    turns = _turns([m for m in messages if m["role"] != "system"])
    for check in (_check_roles(turns, strict_roles), _check_empty(messages), _check_tools(turns)):
        if check is not None:
            return check
    found = _cache_breakpoints(payload)
    if found > MAX_CACHE_BREAKPOINTS:
        return f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. Found {found}."
    return None


def _check_shape(payload: dict[str, Any], roles: tuple[str, ...]) -> str | None:
    if "max_tokens" in payload and (type(payload["max_tokens"]) is not int or payload["max_tokens"] < 0):
        return "max_tokens: Input should be a valid integer"
    if not isinstance(payload["model"], str):
        return "model: Input should be a valid string"
    messages = payload["messages"]
    if not isinstance(messages, list):
        return "messages: Input should be a valid list"
    if not messages:
        return "messages: at least one message is required"
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in roles:
            return f"messages.{i}.role: Input should be {' or '.join(repr(r) for r in roles)}"
        content = message.get("content")
        if not isinstance(content, (str, list)):
            return f"messages.{i}.content: Input should be a valid list"
        if isinstance(content, list) and not all(
            isinstance(b, dict) and isinstance(b.get("type"), str) for b in content
        ):
            return f"messages.{i}.content: Input should be a valid list of content blocks"
        for j, block in enumerate(content if isinstance(content, list) else []):
            name = _ID_FIELDS.get(block["type"])
            if name is not None and not isinstance(block.get(name), str):
                return f"messages.{i}.content.{j}.{name}: Input should be a valid string"
    return None


def _turns(messages: list[dict[str, Any]]) -> list[_Turn]:
    turns: list[_Turn] = []
    for i, message in enumerate(messages):
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        indexed = [(i, j, block) for j, block in enumerate(blocks)]
        if turns and turns[-1].role == message["role"]:
            turns[-1].blocks += indexed
            turns[-1].last = i
        else:
            turns.append(_Turn(message["role"], indexed, i, i))
    return turns


def _check_roles(turns: list[_Turn], strict: bool) -> str | None:
    if turns[0].role != "user":
        return 'messages: first message must use the "user" role'
    if strict:
        for turn in turns:
            if turn.first != turn.last:
                return (
                    f'messages: roles must alternate between "user" and "assistant", '
                    f'but found multiple "{turn.role}" roles in a row'
                )
    return None


def _check_empty(messages: list[dict[str, Any]]) -> str | None:
    for i, message in enumerate(messages):
        final_assistant = i == len(messages) - 1 and message["role"] == "assistant"
        if not message["content"] and not final_assistant:
            return f"messages.{i}: all messages must have non-empty content except for the optional final assistant message"
    last = messages[-1]
    if last["role"] == "assistant":
        content = last["content"]
        text = content if isinstance(content, str) else (content[-1].get("text", "") if content else "")
        if isinstance(text, str) and text != text.rstrip():
            return "messages: final assistant content cannot end with trailing whitespace"
    return None


def _check_tools(turns: list[_Turn]) -> str | None:
    """Every tool_result answers a tool_use of the turn before; every tool_use of a turn that is
    not the last is answered at the start of the next one."""
    for t, turn in enumerate(turns):
        if turn.role == "user":
            offered = _tool_use_ids(turns[t - 1]) if t > 0 else set()
            for i, j, block in turn.blocks:
                if block["type"] == "tool_result" and block.get("tool_use_id") not in offered:
                    return (
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: "
                        f"{block.get('tool_use_id')}. Each `tool_result` block must have a corresponding "
                        "`tool_use` block in the previous message."
                    )
        elif t + 1 < len(turns):
            missing = [
                tool_id
                for tool_id in _tool_use_ids(turn, ordered=True)
                if tool_id not in _leading_results(turns[t + 1])
            ]
            if missing:
                index = next(i for i, _, block in turn.blocks if block.get("id") == missing[0])
                return (
                    f"messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                    f"{', '.join(str(m) for m in missing)}. Each `tool_use` block must have a corresponding `tool_result` block "
                    "in the next message."
                )
    return None


def _tool_use_ids(turn: _Turn, *, ordered: bool = False) -> Any:
    ids = [block.get("id") for _, _, block in turn.blocks if block["type"] == "tool_use"]
    return ids if ordered else set(ids)


def _leading_results(turn: _Turn) -> set[Any]:
    """The tool_use ids answered by the tool_result blocks that open ``turn``."""
    answered = set()
    for _, _, block in turn.blocks:
        if block["type"] != "tool_result":
            break
        answered.add(block.get("tool_use_id"))
    return answered


def _cache_breakpoints(payload: dict[str, Any]) -> int:
    """Blocks carrying ``cache_control``: tools, system blocks, message blocks (tool results'
    content included)."""
    found = 0
    system = payload.get("system")
    places = [*(payload.get("tools") or []), *(system if isinstance(system, list) else [])]
    for message in payload["messages"]:
        content = message["content"]
        places += content if isinstance(content, list) else []
    for place in places:
        if isinstance(place, dict):
            found += place.get("cache_control") is not None
            nested = place.get("content") if place.get("type") == "tool_result" else None
            found += (
                sum(1 for b in nested if isinstance(b, dict) and b.get("cache_control"))
                if isinstance(nested, list)
                else 0
            )
    return found
