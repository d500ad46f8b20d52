"""What the Gemini API refuses in a ``generateContent`` body, as the fake upstream checks it.

The real API's rules that a proxy rewriting ``contents`` could break, each with the API's wording:
contents a non-empty list of ``{role, parts}`` (roles ``user`` and ``model``, the first a user
one), every part with exactly one data field, a turn's function responses as many as the calls
of the model turn right before it, and no field the API does not know (ctxproxy's own private keys,
``gemini_*``, must never reach the wire). Fields are accepted under either spelling.
"""

from __future__ import annotations

from typing import Any

__all__ = ["check_request"]

DATA = ("text", "inlineData", "fileData", "functionCall", "functionResponse", "executableCode", "codeExecutionResult")
_SNAKE = {"inline_data", "file_data", "function_call", "function_response", "executable_code", "code_execution_result"}


def _get(obj: dict[str, Any], camel: str) -> Any:
    snake = "".join("_" + c.lower() if c.isupper() else c for c in camel)
    return obj.get(camel, obj.get(snake))


def _private(value: Any) -> str | None:
    if isinstance(value, dict):
        for key, inner in value.items():
            if key.startswith(("gemini_", "ctx_")):
                return key
            found = _private(inner)
            if found:
                return found
    if isinstance(value, list):
        return next((found for found in map(_private, value) if found), None)
    return None


def check_request(body: dict[str, Any]) -> str | None:
    """The API's 400 message for ``body``, or None when it would be taken."""
    private = _private(body)
    if private:
        return f'Invalid JSON payload received. Unknown name "{private}": Cannot find field.'
    contents = _get(body, "contents")
    if not isinstance(contents, list) or not contents:
        return "* GenerateContentRequest.contents: contents is not specified"
    calls_before = 0
    for i, content in enumerate(contents):
        if not isinstance(content, dict) or content.get("role", "user") not in ("user", "model"):
            return f"Please use a valid role: user, model. (contents[{i}])"
        if i == 0 and content.get("role") == "model":
            return "Please ensure that multiturn requests begin with a user turn."
        parts = content.get("parts")
        if not isinstance(parts, list) or not parts:
            return f"* GenerateContentRequest.contents[{i}].parts: contents.parts must not be empty."
        for j, part in enumerate(parts):
            fields = [name for name in DATA if _get(part, name) is not None] if isinstance(part, dict) else []
            if len(fields) != 1:
                return f"* GenerateContentRequest.contents[{i}].parts[{j}].data: required oneof field 'data' must have one initialized field"
        responses = sum(1 for p in parts if _get(p, "functionResponse") is not None)
        if content.get("role") != "model" and (responses or calls_before) and responses != calls_before:
            return (
                "Please ensure that the number of function response parts is equal to the number of function "
                "call parts of the function call turn."
            )
        calls_before = (
            sum(1 for p in parts if _get(p, "functionCall") is not None) if content.get("role") == "model" else 0
        )
    return None
