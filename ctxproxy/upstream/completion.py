"""Asking the tenant's upstream for one text answer of ctxproxy's own: an LLM summary, page lines.

The caller says what to ask (``Prompt``: a model, a system text, a user text, the answer's
``max_tokens``; always at temperature 0, never streamed); a ``Completion`` says how the protocol
of the request being compacted asks it: the path, the header that carries the key, the payload,
and how the text is read out of the JSON answer. Each wire adapter has one
(``ctxproxy.wire.<protocol>.completion``), so a tenant whose upstream speaks Anthropic's Messages
API is asked in that protocol, and nothing here knows a protocol's name.

``CompletionClient.answer`` makes the call through ``UpstreamPort`` with the protocol's key
header: the tenant's key when it has one, else the client's ``Credential`` (its key as it sent it,
in the header it sent it in, and what its protocol requires on every call). Why an answer cannot
be used is a ``CallFailed`` with a short reason (``status``, ``bad_json``, ``no_choices``,
``empty_content``, …); a transport failure or a passed deadline is the port's ``UpstreamError``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson
from multidict import CIMultiDict

from ctxproxy.config.models import UpstreamConfig
from ctxproxy.upstream.client import UpstreamHttp
from ctxproxy.upstream.headers import KeyHeader
from ctxproxy.upstream.port import UpstreamPort

__all__ = ["CallFailed", "Completion", "CompletionClient", "Credential", "KeyedCompletion", "Prompt", "answer_text_of"]

Headers = tuple[tuple[str, str], ...]


class CallFailed(Exception):
    """Why the model's answer cannot be used; the caller falls back, never raises it further."""

    def __init__(self, reason: str, **details: Any) -> None:
        super().__init__(reason)
        self.reason = reason
        self.details = details


@dataclass(frozen=True)
class Prompt:
    model: str
    system: str
    user: str
    max_tokens: int


@dataclass(frozen=True)
class Credential:
    """What of a client's headers a call ctxproxy makes on its behalf carries: its key, in the
    header(s) it sent it in (``key``), and what its protocol requires on every call (``protocol``).
    A secret: never logged, only hashed (``caller``)."""

    key: Headers = field(default=(), repr=False)
    protocol: Headers = ()

    @staticmethod
    def of(key_header: KeyHeader, client: Mapping[str, str], protocol: Iterable[tuple[str, str]] = ()) -> Credential:
        """The key a client sent in ``key_header`` or a header it ``replaces``, as it sent it."""
        names = (key_header.name, *key_header.replaces)
        return Credential(tuple((name, client[name]) for name in names if client.get(name)), tuple(protocol))

    def value(self, name: str) -> str | None:
        """The value of the client's key header ``name`` (case-insensitive), if it sent one."""
        return next((value for key, value in self.key if key.lower() == name.lower()), None)

    def caller(self) -> str:
        """Whose key this is, as a hash: equal for equal keys sent in the same header."""
        shown = "\n".join(f"{name.lower()}: {value}" for name, value in sorted(self.key))
        return hashlib.blake2b(shown.encode(), digest_size=16).hexdigest()


class Completion(Protocol):
    """One protocol's way to ask for one text answer."""

    @property
    def path(self) -> str:
        """Where the call is posted, after the upstream's ``/v1`` (a protocol whose path names the
        model: its pattern, the protocol's name in a session's record)."""
        ...

    def path_for(self, prompt: Prompt) -> str:
        """Where the call asking ``prompt`` is posted."""
        ...

    @property
    def key_header(self) -> KeyHeader:
        """The header this protocol carries a key in."""
        ...

    def credential(self, client: Mapping[str, str]) -> Credential:
        """What of the client's request headers a call of ctxproxy's own on its behalf carries."""
        ...

    def payload(self, prompt: Prompt) -> dict[str, Any]:
        """The request body asking ``prompt``, at temperature 0, not streamed."""
        ...

    def answer_text(self, answer: Any) -> str:
        """The answer's text, from its decoded JSON; ``CallFailed`` when it has none."""
        ...


@dataclass(frozen=True)
class KeyedCompletion:
    """The path and key header of a ``Completion`` whose calls carry the client's key alone (no
    header its protocol requires): a protocol's own subclass brings its payload and answer."""

    path: str
    key_header: KeyHeader

    def credential(self, client: Mapping[str, str]) -> Credential:
        return Credential.of(self.key_header, client)

    def path_for(self, prompt: Prompt) -> str:
        return self.path


@dataclass(frozen=True)
class CompletionClient:
    """The tenant's ``upstream``, asked with ``completion`` on the behalf of the client whose
    ``credential`` this is; each call ends after ``timeout`` seconds."""

    http: UpstreamHttp
    upstream: UpstreamConfig
    completion: Completion
    credential: Credential
    timeout: float

    async def answer(self, prompt: Prompt) -> str:
        """The model's text answer to ``prompt``. Raises ``CallFailed`` (a status other than 200,
        a body that is not JSON, no text in it), or the port's ``UpstreamError`` on a transport
        failure or once ``timeout`` seconds have passed (``transport_failure`` says which)."""
        port = UpstreamPort(self.http, self.upstream, key_header=self.completion.key_header)
        headers = CIMultiDict({"Accept": "application/json"})
        headers.extend(self.credential.key)
        headers.extend(self.credential.protocol)
        body = orjson.dumps(self.completion.payload(prompt))
        async with port.post(self.completion.path_for(prompt), body, headers, deadline=self.timeout) as response:
            if response.status != 200:
                raise CallFailed("status", status=response.status)
            raw = await port.read(response)
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise CallFailed("bad_json") from None
        return self.completion.answer_text(data)


def answer_text_of(content: Any) -> str:
    """An answer's text: ``content`` itself when it is a string, else the concatenated ``text`` of
    its ``{"type": "text"}`` parts (OpenAI's content parts and Anthropic's content blocks alike);
    ``CallFailed("empty_content")`` when that is empty or blank."""
    if isinstance(content, list):
        texts = [part.get("text") for part in content if isinstance(part, Mapping) and part.get("type") == "text"]
        content = "".join(text for text in texts if isinstance(text, str))
    if not isinstance(content, str) or not content.strip():
        raise CallFailed("empty_content")
    return content
