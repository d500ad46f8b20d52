"""Asking a Gemini upstream for one text answer (``ctxproxy.upstream.completion``).

``POST /models/{model}:generateContent`` with ``{systemInstruction, contents: [one user content],
generationConfig: {temperature: 0, maxOutputTokens}}`` and the key as ``x-goog-api-key``: the
tenant's, else the client's (from its headers, or the ``?key=`` it sent, which ``GeminiCall``
moved into them). The answer is the text of the first candidate's parts, thoughts left out,
unless its ``finishReason`` is ``MAX_TOKENS`` (``truncated``); no candidate is ``no_candidates``.
A thinking model spends part of ``maxOutputTokens`` thinking: a summary it cut short is refused
(``truncated``) and the summariser falls back, as for any truncated answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctxproxy.upstream.completion import CallFailed, Credential, KeyedCompletion, Prompt
from ctxproxy.upstream.headers import KeyHeader
from ctxproxy.wire.gemini.canonical import USER
from ctxproxy.wire.gemini.fields import field
from ctxproxy.wire.gemini.forward import API_KEY, GENERATE

__all__ = ["GeminiCompletion"]


@dataclass(frozen=True)
class GeminiCompletion(KeyedCompletion):
    path: str = f"/models/{{model}}:{GENERATE}"
    key_header: KeyHeader = API_KEY
    client_headers: Mapping[str, str] | None = None  # the request's, its query's key moved in

    def credential(self, client: Mapping[str, str]) -> Credential:
        return Credential.of(self.key_header, self.client_headers if self.client_headers is not None else client)

    def path_for(self, prompt: Prompt) -> str:
        return self.path.format(model=prompt.model)

    def payload(self, prompt: Prompt) -> dict[str, Any]:
        return {
            "systemInstruction": {"parts": [{"text": prompt.system}]},
            "contents": [{"role": USER, "parts": [{"text": prompt.user}]}],
            "generationConfig": {"temperature": 0, "maxOutputTokens": prompt.max_tokens},
        }

    def answer_text(self, answer: Any) -> str:
        candidates = answer.get("candidates") if isinstance(answer, Mapping) else None
        if not isinstance(candidates, list) or not candidates or not isinstance(candidates[0], Mapping):
            raise CallFailed("no_candidates")
        if field(candidates[0], "finishReason") == "MAX_TOKENS":
            raise CallFailed("truncated")  # cut at maxOutputTokens: its last sections are missing
        content = candidates[0].get("content")
        parts = content.get("parts") if isinstance(content, Mapping) else None
        texts = [
            part["text"]
            for part in (parts if isinstance(parts, list) else ())
            if isinstance(part, Mapping) and isinstance(part.get("text"), str) and part.get("thought") is not True
        ]
        text = "".join(texts)
        if not text.strip():
            raise CallFailed("empty_content")
        return text
