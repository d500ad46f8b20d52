"""Asking a Responses upstream for one text answer (``ctxproxy.upstream.completion``).

``POST /responses`` with ``{model, instructions, input: [one user message], max_output_tokens,
store: false}`` and the key as ``Authorization: Bearer``. No ``temperature``: the models served
through the Responses API are mostly reasoning models, which refuse it. The answer is the text of
its assistant message items' ``output_text`` parts, unless ``status`` is ``incomplete`` because
``max_output_tokens`` was reached (``truncated``); no output list is ``no_output``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctxproxy.upstream.completion import CallFailed, KeyedCompletion, Prompt
from ctxproxy.upstream.headers import BEARER, KeyHeader
from ctxproxy.vocabulary import ROLE_USER
from ctxproxy.wire.openai_responses.forward import RESPONSES_PATH

__all__ = ["RESPONSES_COMPLETION", "ResponsesCompletion", "output_text"]


@dataclass(frozen=True)
class ResponsesCompletion(KeyedCompletion):
    path: str = RESPONSES_PATH
    key_header: KeyHeader = BEARER

    def payload(self, prompt: Prompt) -> dict[str, Any]:
        return {
            "model": prompt.model,
            "instructions": prompt.system,
            "input": [{"type": "message", "role": ROLE_USER, "content": prompt.user}],
            "max_output_tokens": prompt.max_tokens,
            "store": False,
        }

    def answer_text(self, answer: Any) -> str:
        output = answer.get("output") if isinstance(answer, Mapping) else None
        if not isinstance(output, list):
            raise CallFailed("no_output")
        details = answer.get("incomplete_details")
        if answer.get("status") == "incomplete" and isinstance(details, Mapping):
            if details.get("reason") == "max_output_tokens":
                raise CallFailed("truncated")  # cut at max_output_tokens: its last sections are missing
        text = output_text(output)
        if not text.strip():
            raise CallFailed("empty_content")
        return text


def output_text(output: list[Any]) -> str:
    """The text of the assistant message items of a response's ``output``."""
    texts = []
    for item in output:
        if not isinstance(item, Mapping) or item.get("type") != "message":
            continue
        content = item.get("content")
        for part in content if isinstance(content, list) else ():
            if isinstance(part, Mapping) and part.get("type") == "output_text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
    return "".join(texts)


RESPONSES_COMPLETION = ResponsesCompletion()
