"""Optional embeddings from the tenant upstream's ``/v1/embeddings``, and cosine similarity.

Embeddings only ever *add* to BM25 (fused by reciprocal rank in ``docs.py``), so any failure
here — transport error, timeout, non-200 status, a body that is not the OpenAI shape, a count
that does not match the input — returns None and search goes on with BM25 alone. Failures are
logged with the reason and status only: never the texts, never a key.

The call is posted as every upstream call is (``ctxproxy.upstream.port``): the tenant's
``upstream.api_key`` when configured, else the client's own ``Authorization`` header;
``upstream.headers`` are added last. It is ctxproxy's own work (``ctxproxy.stopwatch``): its
time is not ctxproxy's overhead, and its first byte is not the upstream's answer to the client.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import orjson
import structlog

from ctxproxy.config.models import UpstreamConfig
from ctxproxy.errors import UpstreamError
from ctxproxy.stopwatch import own_work
from ctxproxy.upstream.client import UpstreamHttp
from ctxproxy.upstream.port import UpstreamPort, transport_failure
from ctxproxy.vocabulary import EMBEDDINGS_PATH

__all__ = ["cosine", "embed"]


def _vectors(data: Any, count: int) -> list[list[float]] | None:
    """The embeddings of an OpenAI ``list`` answer in input order, or None if it is not one."""
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list) or len(items) != count:
        return None
    out: list[list[float] | None] = [None] * count
    for position, item in enumerate(items):
        if not isinstance(item, dict):
            return None
        index = item.get("index", position)
        vector = item.get("embedding")
        if not isinstance(index, int) or not 0 <= index < count or out[index] is not None:
            return None
        if not isinstance(vector, list) or not vector:
            return None  # includes base64-encoded answers: we never ask for them
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in vector):
            return None
        out[index] = [float(x) for x in vector]
    return [vector for vector in out if vector is not None]


async def embed(
    http: UpstreamHttp,
    upstream: UpstreamConfig,
    model: str,
    texts: list[str],
    authorization: str | None,
    timeout: float,
) -> list[list[float]] | None:
    """One vector per text, in order, or None on any failure (see the module docstring)."""
    if not texts:
        return []
    log = structlog.get_logger(__name__)
    payload = orjson.dumps({"model": model, "input": texts, "encoding_format": "float"})
    port = UpstreamPort(http, upstream)
    try:
        with own_work():  # the client's answer is not waiting for this call's first byte
            async with port.post(
                EMBEDDINGS_PATH, payload, port.own_call_headers(authorization), deadline=timeout
            ) as response:
                if response.status != 200:
                    log.warning("memory.embeddings_failed", reason="status", status=response.status, model=model)
                    return None
                raw = await port.read(response)
    except UpstreamError as error:
        failure = transport_failure(error)
        reason = "timeout" if failure.reason == "timeout" else "transport"
        log.warning("memory.embeddings_failed", reason=reason, error=failure.error, model=model)
        return None
    try:
        vectors = _vectors(orjson.loads(raw), len(texts))
    except orjson.JSONDecodeError:
        vectors = None
    if vectors is None:
        log.warning("memory.embeddings_failed", reason="malformed", model=model, texts=len(texts))
    return vectors


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity; 0.0 when either vector is zero or their lengths differ."""
    if len(a) != len(b):
        return 0.0
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm > 0 else 0.0
