"""Which protocol a path ctxproxy relays as it is belongs to (``server.passthrough``): the header
that carries its API key, and the shape of the errors ctxproxy itself answers on it (an upstream
that cannot be reached, a body over the limit, an unknown tenant, ...).

Each protocol other than OpenAI's names its paths here (after ``/v1``) with its
``RelayedProtocol``; every other path is OpenAI's (``BEARER``, OpenAI's error object). A path is a
prefix's when it is the prefix or lies below it: ``/messages/count_tokens`` is the Messages API's,
``/messages2`` is not. Gemini's paths are told by their whole path (``is_gemini_path``): every one
under ``/v1beta``, and a method call on a model (``/v1/models/{model}:{method}``) under ``/v1``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

import orjson

from ctxproxy.errors import ProxyError
from ctxproxy.upstream.headers import BEARER, KeyHeader
from ctxproxy.wire.anthropic.errors import error_json
from ctxproxy.wire.anthropic.forward import API_KEY, MESSAGES_PATH
from ctxproxy.wire.gemini import errors as gemini_errors
from ctxproxy.wire.gemini.forward import API_KEY as GEMINI_KEY

__all__ = [
    "GEMINI",
    "OPENAI",
    "RELAYED_PROTOCOLS",
    "is_gemini_path",
    "ErrorJson",
    "RelayedProtocol",
    "key_header_for",
    "relayed_protocol",
]


class ErrorJson(Protocol):
    """The JSON body of ``error`` in one protocol's shape (``request_id``: the request's, for a
    protocol whose errors name it)."""

    def __call__(self, error: ProxyError, *, request_id: str | None = None) -> bytes: ...


@dataclass(frozen=True)
class RelayedProtocol:
    key_header: KeyHeader
    error_json: ErrorJson


def _openai_error_json(error: ProxyError, *, request_id: str | None = None) -> bytes:
    return orjson.dumps(error.body())


OPENAI = RelayedProtocol(BEARER, _openai_error_json)
RELAYED_PROTOCOLS: tuple[tuple[str, RelayedProtocol], ...] = ((MESSAGES_PATH, RelayedProtocol(API_KEY, error_json)),)


GEMINI = RelayedProtocol(GEMINI_KEY, gemini_errors.error_json)
_GEMINI_PATH = re.compile(r"^(?:/t/[^/]+)?(?:/v1beta(?:/|$)|/v1/models/[^/:]+:[A-Za-z]+$)")


def is_gemini_path(path: str) -> bool:
    """Whether ``path`` (as the client sent it, a tenant's prefix included) is Gemini's."""
    return _GEMINI_PATH.match(path) is not None


def relayed_protocol(tail: str) -> RelayedProtocol:
    """The protocol whose path ``tail`` (``/messages/count_tokens``) is."""
    for prefix, protocol in RELAYED_PROTOCOLS:
        if tail == prefix or tail.startswith(prefix + "/"):
            return protocol
    return OPENAI


def key_header_for(tail: str) -> KeyHeader:
    """The key header of the protocol whose path ``tail`` is."""
    return relayed_protocol(tail).key_header
