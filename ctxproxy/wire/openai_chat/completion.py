"""Asking an OpenAI-compatible upstream for one text answer (``ctxproxy.upstream.completion``).

``POST /chat/completions`` with ``{model, messages: [system, user], max_tokens, temperature: 0}``
and the key as ``Authorization: Bearer``; the answer is the first choice's message content (a
string, or the text of its content parts), unless ``finish_reason`` says it was cut at
``max_tokens`` (``truncated``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctxproxy.upstream.completion import CallFailed, KeyedCompletion, Prompt, answer_text_of
from ctxproxy.upstream.headers import BEARER, KeyHeader
from ctxproxy.vocabulary import CHAT_COMPLETIONS_PATH, ROLE_SYSTEM, ROLE_USER

__all__ = ["CHAT_COMPLETION", "ChatCompletion"]


@dataclass(frozen=True)
class ChatCompletion(KeyedCompletion):
    path: str = CHAT_COMPLETIONS_PATH
    key_header: KeyHeader = BEARER

    def payload(self, prompt: Prompt) -> dict[str, Any]:
        return {
            "model": prompt.model,
            "messages": [
                {"role": ROLE_SYSTEM, "content": prompt.system},
                {"role": ROLE_USER, "content": prompt.user},
            ],
            "max_tokens": prompt.max_tokens,
            "temperature": 0,
        }

    def answer_text(self, answer: Any) -> str:
        choices = answer.get("choices") if isinstance(answer, Mapping) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            raise CallFailed("no_choices")
        if choices[0].get("finish_reason") == "length":
            raise CallFailed("truncated")  # cut at max_tokens: its last sections are missing
        message = choices[0].get("message")
        return answer_text_of(message.get("content") if isinstance(message, Mapping) else None)


CHAT_COMPLETION = ChatCompletion()
