"""Prompt-caching breakpoints in a Messages body: the API takes at most
:data:`MAX_CACHE_BREAKPOINTS` ``cache_control`` marks (tools, system, messages — a tool result's own
blocks included); beyond that the earliest go, never the one ctxproxy put on its summary."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_CACHE_BREAKPOINTS", "limit_breakpoints"]

MAX_CACHE_BREAKPOINTS = 4
Block = dict[str, Any]


def limit_breakpoints(body: dict[str, Any], keep: Block | None) -> None:
    """Drop the earliest ``cache_control`` beyond :data:`MAX_CACHE_BREAKPOINTS`, never ``keep``'s
    (in lists ``render_body`` built; a block is replaced, never changed)."""
    slots = [slot for slot in _breakpoints(body) if slot[0][slot[1]] is not keep]
    excess = len(slots) + (keep is not None and "cache_control" in keep) - MAX_CACHE_BREAKPOINTS
    for outer, i, inner in slots[: max(0, excess)]:
        if inner is None:
            outer[i] = _without_cache_control(outer[i])
            continue
        parent = dict(outer[i])
        content = list(parent["content"])
        content[inner] = _without_cache_control(content[inner])
        parent["content"] = content
        outer[i] = parent


def _breakpoints(body: Mapping[str, Any]) -> list[tuple[list[Any], int, int | None]]:
    """Where ``cache_control`` is, in the order of the cached prefix: tools, system, messages
    (a tool result's own blocks included): (list, index, index in the tool result or None)."""
    lists = [body[name] for name in ("tools", "system") if isinstance(body.get(name), list)]
    lists.extend(m["content"] for m in body.get("messages") or () if isinstance(m.get("content"), list))
    slots: list[tuple[list[Any], int, int | None]] = []
    for blocks in lists:
        for i, block in enumerate(blocks):
            if not isinstance(block, Mapping):
                continue
            if block.get("cache_control") is not None:
                slots.append((blocks, i, None))
            inner = block.get("content") if block.get("type") == "tool_result" else None
            for j, nested in enumerate(inner if isinstance(inner, list) else ()):
                if isinstance(nested, Mapping) and nested.get("cache_control") is not None:
                    slots.append((blocks, i, j))
    return slots


def _without_cache_control(block: Mapping[str, Any]) -> Block:
    return {key: value for key, value in block.items() if key != "cache_control"}
