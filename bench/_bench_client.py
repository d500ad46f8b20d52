"""How bench/compaction.py's client sends one request through ctxproxy and reads what its answer
says (the ``X-Ctx-*`` headers)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import aiohttp
from _compaction_servers import TAG
from _prompt_cost import Shape


@dataclass(frozen=True)
class Answer:
    ok: bool
    compacted: bool
    tokens_after: int
    summarized: int
    session: str
    error: str = ""  # status and the start of the body, when not ok


async def post(
    http: aiohttp.ClientSession,
    base: str,
    shape: Shape,
    body: bytes,
    tag: str | None,
    headers: Mapping[str, str] | None = None,
) -> Answer:
    """``base``: the proxy's URL with the tenant's prefix (``…/t/w8k``, or nothing for the default tenant)."""
    sent = {**shape.headers, **(headers or {})}
    if tag is not None:
        sent[TAG] = tag
    async with http.post(base + shape.path, data=body, headers=sent) as r:
        data = await r.read()
        ok = r.status == 200 and shape.answer_mark in data
        return Answer(
            ok,
            r.headers.get("X-Ctx-Compacted") == "1",
            int(r.headers.get("X-Ctx-Tokens-After", "-1")),
            int(r.headers.get("X-Ctx-Summarized", "0")),
            r.headers.get("X-Ctx-Session", ""),
            "" if ok else f"{r.status}: {data[:300]!r}",
        )
