"""Tiny message factories shared by the strategy tests.

Messages are plain OpenAI-shaped dicts. ``conversation`` builds the ``Conversation`` a strategy
sees (its head counted as the proxy counts it); ``apply_plan`` does what the executor does with
a ``Plan``, minus the summariser, so tests can chain requests through successive checkpoints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxproxy.strategies.base import (
    DEFAULT_SUMMARY_TOKENS,
    Block,
    Checkpoint,
    Conversation,
    Message,
    Optimise,
    Plan,
    Window,
)
from ctxproxy.strategies.boundaries import leading_system_count

DEFAULT_TOKENS = 10  # per message when a test does not care about tokens


def system(text: str = "You are helpful.") -> dict[str, Any]:
    return {"role": "system", "content": text}


def developer(text: str) -> dict[str, Any]:
    return {"role": "developer", "content": text}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def call_id(name: str) -> str:
    """The id ``assistant_calls`` gives a call of ``name`` unless told otherwise."""
    return f"call_{name}"


def assistant_calls(*names: str, text: str | None = None, ids: Sequence[str] | None = None) -> dict[str, Any]:
    """An assistant message calling the tools ``names`` (ids ``call_<name>`` unless ``ids``)."""
    call_ids = list(ids) if ids is not None else [call_id(n) for n in names]
    assert len(call_ids) == len(names), "one id per call"
    return {
        "role": "assistant",
        "content": text,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": n, "arguments": "{}"}}
            for n, i in zip(names, call_ids, strict=True)
        ],
    }


def tool(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def conversation(
    messages: Sequence[Message],
    tokens: Sequence[int] | int | None = None,
    window: int = 8192,
    reserve_output: int = 0,
    summary_tokens: int = 0,
    optimise: Optimise = "cost",
    summary_budget: int = DEFAULT_SUMMARY_TOKENS,
) -> Conversation:
    """``tokens``: one count per message, or one count for every message (default 10).
    ``optimise``: what the tenant saves, as the engine passes it ("tokens": the notes' rules as
    they are; "cost", the default: with hysteresis)."""
    if tokens is None or isinstance(tokens, int):
        per_message = [DEFAULT_TOKENS if tokens is None else tokens] * len(messages)
    else:
        per_message = list(tokens)
        assert len(per_message) == len(messages), "one token count per message"
    return Conversation(
        messages=list(messages),
        tokens=per_message,
        head=leading_system_count(messages),
        window=Window(window, reserve_output),
        summary_tokens=summary_tokens,
        optimise=optimise,
        summary_budget=summary_budget,
    )


def checkpoint(
    start: int,
    end: int,
    *,
    created_at: float = 0.0,
    state: Mapping[str, Any] | None = None,
    text: str = "summary",
    kind: str = "history",
) -> Checkpoint:
    """A checkpoint with one block covering ``[start, end)`` (``start`` is the head)."""
    return Checkpoint(
        end=end,
        prefix_hash="x" * 64,
        blocks=(Block(start, end, text, kind),),
        created_at=created_at,
        state=dict(state or {}),
    )


def apply_plan(
    plan: Plan, previous: Checkpoint | None, now: float, *, kind: str = "history", text: str | None = None
) -> Checkpoint:
    """The checkpoint an executor would save for ``plan``; block texts name their range.

    ``merge``: one rolling block from the first covered message to ``plan.end``. Otherwise the
    new range is one more block after ``previous``'s. A split turn (``turn_start``) ends the
    range with its own ``turn_prefix`` block.
    """
    kept = () if previous is None or plan.merge else previous.blocks
    first = previous.blocks[0].start if plan.merge and previous is not None and previous.blocks else plan.start
    split = plan.end if plan.turn_start is None else plan.turn_start
    blocks = [*kept]
    if first < split:
        blocks.append(Block(first, split, text or f"summary of [{first}, {split})", kind))
    if split < plan.end:
        blocks.append(Block(split, plan.end, f"turn prefix [{split}, {plan.end})", "turn_prefix"))
    return Checkpoint(
        end=plan.end,
        prefix_hash="x" * 64,
        blocks=tuple(blocks),
        created_at=now,
        state=dict(plan.state),
    )
