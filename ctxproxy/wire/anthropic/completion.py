"""Asking an Anthropic upstream for one text answer (``ctxproxy.upstream.completion``).

``POST /messages`` with ``{model, system, messages: [{role: user, content}], max_tokens,
temperature: 0}``; the answer is the concatenated ``text`` of its ``content`` blocks (none, or only
empty ones: ``empty_content``; no ``content`` list: ``no_content``; ``stop_reason: max_tokens``:
``truncated``). The key goes as
``forward.API_KEY`` says: the tenant's in ``x-api-key``, else the client's as it sent it
(``x-api-key``, or ``Authorization: Bearer`` as the anthropic SDK 2.x does). The API refuses a
call without ``anthropic-version``: the client's goes along, or :data:`ANTHROPIC_VERSION` when it
sent none (a tenant's ``[upstream] headers`` still win over both).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctxproxy.upstream.completion import CallFailed, Credential, KeyedCompletion, Prompt, answer_text_of
from ctxproxy.upstream.headers import KeyHeader
from ctxproxy.vocabulary import ROLE_USER
from ctxproxy.wire.anthropic.forward import API_KEY, MESSAGES_PATH

__all__ = ["ANTHROPIC_VERSION", "MESSAGES_COMPLETION", "MessagesCompletion"]

VERSION_HEADER = "anthropic-version"
ANTHROPIC_VERSION = "2023-06-01"  # the Messages API's current version (its only one since 2023)


@dataclass(frozen=True)
class MessagesCompletion(KeyedCompletion):
    path: str = MESSAGES_PATH
    key_header: KeyHeader = API_KEY

    def credential(self, client: Mapping[str, str]) -> Credential:
        version = client.get(VERSION_HEADER) or ANTHROPIC_VERSION
        return Credential.of(self.key_header, client, ((VERSION_HEADER, version),))

    def payload(self, prompt: Prompt) -> dict[str, Any]:
        return {
            "model": prompt.model,
            "system": prompt.system,
            "messages": [{"role": ROLE_USER, "content": prompt.user}],
            "max_tokens": prompt.max_tokens,
            "temperature": 0,
        }

    def answer_text(self, answer: Any) -> str:
        content = answer.get("content") if isinstance(answer, Mapping) else None
        if not isinstance(content, list):
            raise CallFailed("no_content")
        if answer.get("stop_reason") == "max_tokens":
            raise CallFailed("truncated")  # cut at max_tokens: its last sections are missing
        return answer_text_of(content)


MESSAGES_COMPLETION = MessagesCompletion()
