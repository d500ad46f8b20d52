"""What the fake Responses upstream refuses, as the real API does (pure): the first problem, or None.

* ``model`` must be a string; ``input`` a string or a list of item objects; ``tools`` objects with
  a ``type`` (a function tool with a ``name``);
* a message has role user, assistant, system or developer and string or part-list content; user,
  system and developer parts are ``input_*`` parts, assistant parts ``output_text`` or ``refusal``;
* a ``function_call`` / ``custom_tool_call`` has a string ``call_id`` and ``name``; every
  ``*_output`` answers a call before it ("No tool call found for function call output with call_id
  …"), and every function call is answered ("No tool output found for function call …");
* a ``reasoning`` item comes right before the item it produced, an assistant message or a call
  ("… was provided without its required following item"), and its ``encrypted_content`` is the one
  this fake issued for its id;
* a ``compaction`` item carries content this fake issued; a ``compaction_trigger`` is refused unless
  ``compaction`` is served (then only last);
* no key ctxproxy keeps for itself reaches the wire (``responses_*``, ``ctx_tokens``: "Unknown
  parameter").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.fakes.responses_wire import compaction_content, encrypted_reasoning

__all__ = ["check_request"]

ROLES = ("user", "assistant", "system", "developer")
_USER_PARTS = frozenset({"input_text", "input_image", "input_file", "input_audio"})
_ASSISTANT_PARTS = frozenset({"output_text", "refusal"})
_CALLS = frozenset({"function_call", "custom_tool_call"})
_PRODUCED = frozenset({"message", "function_call", "custom_tool_call", "web_search_call", "compaction"})


def check_request(payload: Any, *, serves_compaction: bool = False, issued: frozenset[int] = frozenset()) -> str | None:
    """``issued``: the numbers of the compaction items this fake gave out."""
    if not isinstance(payload, dict):
        return "The request body must be a JSON object."
    if not isinstance(payload.get("model"), str):
        return "Missing required parameter: 'model'."
    leak = _private_key(payload)
    if leak is not None:
        return f"Unknown parameter: '{leak}'."
    for i, tool in enumerate(payload.get("tools") or []):
        if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
            return f"Invalid type for 'tools[{i}]'."
        if tool["type"] == "function" and not isinstance(tool.get("name"), str):
            return f"Missing required parameter: 'tools[{i}].name'."
    source = payload.get("input")
    if source is None or isinstance(source, str):
        return None
    if not isinstance(source, list):
        return "Invalid type for 'input': expected a string or an array of items."
    return _check_items(source, serves_compaction, issued)


def _check_items(items: list[Any], serves_compaction: bool, issued: frozenset[int]) -> str | None:
    called: set[str] = set()
    answered: set[str] = set()
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            return f"Invalid type for 'input[{i}]': expected an object."
        kind = _name(item.get("type", "message" if "role" in item else None))
        problem = _check_item(item, kind, i, items, serves_compaction, issued)
        if problem is not None:
            return problem
        call_id = item.get("call_id")
        if kind in _CALLS:
            called.add(call_id)
        elif isinstance(kind, str) and kind.endswith("_output") and isinstance(call_id, str):
            if call_id not in called:
                return f"No tool call found for function call output with call_id {call_id}."
            answered.add(call_id)
    missing = sorted(called - answered)
    return f"No tool output found for function call {missing[0]}." if missing else None


def _check_item(
    item: dict[str, Any], kind: Any, i: int, items: list[Any], serves_compaction: bool, issued: frozenset[int]
) -> str | None:
    where = f"input[{i}]"
    if kind == "message":
        return _check_message(item, where)
    if kind in _CALLS and not (isinstance(item.get("call_id"), str) and isinstance(item.get("name"), str)):
        return f"Missing required parameter: '{where}.call_id' or '{where}.name'."
    if kind == "reasoning":
        following = items[i + 1] if i + 1 < len(items) else None
        follows = _name(following.get("type", "message")) if isinstance(following, dict) else None
        if follows not in _PRODUCED or (
            isinstance(following, dict) and follows == "message" and following.get("role") != "assistant"
        ):
            return f"Item '{item.get('id')}' of type 'reasoning' was provided without its required following item."
        if item.get("encrypted_content") != encrypted_reasoning(str(item.get("id"))):
            return f"The encrypted content for item {item.get('id')} could not be verified."
    if kind == "compaction" and _name(item.get("encrypted_content")) not in {compaction_content(n) for n in issued}:
        return f"The encrypted content of '{where}' could not be verified."
    if kind == "compaction_trigger" and not (serves_compaction and i == len(items) - 1):
        return f"Invalid value: 'compaction_trigger'. Supported values are message and function_call ({where})."
    return None


def _check_message(item: Mapping[str, Any], where: str) -> str | None:
    role = item.get("role")
    if role not in ROLES:
        return f"Invalid value: '{role}' for '{where}.role'."
    content = item.get("content")
    if isinstance(content, str):
        return None
    if not isinstance(content, list):
        return f"Invalid type for '{where}.content'."
    allowed = _ASSISTANT_PARTS if role == "assistant" else _USER_PARTS
    for j, part in enumerate(content):
        kind = _name(part.get("type")) if isinstance(part, dict) else None
        if kind not in allowed:
            return f"Invalid value: '{kind}' for '{where}.content[{j}].type'."
    return None


def _private_key(value: Any, where: str = "") -> str | None:
    """The first key ctxproxy keeps for itself found anywhere in ``value``."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if isinstance(key, str) and (key.startswith("responses_") or key == "ctx_tokens"):
                return f"{where}.{key}".lstrip(".")
            found = _private_key(inner, f"{where}.{key}")
            if found is not None:
                return found
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            found = _private_key(inner, f"{where}[{i}]")
            if found is not None:
                return found
    return None


def _name(value: Any) -> str | None:
    """A type or content as the checks compare it: a string, else None (never an unhashable value)."""
    return value if isinstance(value, str) else None
