"""Old tool results, masked: which agent turns are, and the one line that stands for a result.

An agent turn is an assistant message that calls tools. The results of turns older than the
newest ``keep_turns`` are masked — in batches, with hysteresis: once more than ``keep_turns``
turns would be whole, every turn but the newest is masked at once, so the masked count moves
only in steps of ``keep_turns``; between two steps every request sends the same prefix and the
provider's prompt cache keeps hitting, and a step sends again, after the placeholders, only the
newest turn, which is new anyway (masking down to ``keep_turns`` instead would send the older
kept turns' whole results again, uncached, at every step). A pure function of the turn count:
the same conversation masks the same results in every request and every replay.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import orjson

GIST_CHARS: Final = 160  # the arguments' gist in a placeholder
VALUE_CHARS: Final = 60  # one argument's value in the gist


def masked_turns(turns: int, keep_turns: int) -> int:
    """How many of the oldest ``turns`` agent turns have their results masked: the largest
    multiple of ``keep_turns`` that leaves the newest turn unmasked, so between 1 and
    ``keep_turns`` turns are whole."""
    if keep_turns <= 0 or turns <= 1:
        return 0
    return ((turns - 1) // keep_turns) * keep_turns


def gist(arguments: object) -> str:
    """A call's arguments in a few words: ``command="pytest -v"``, its values shortened."""
    parsed: Any = arguments
    if isinstance(arguments, str):
        try:
            parsed = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            parsed = arguments
    if isinstance(parsed, Mapping):
        parts = [f"{key}={_short(value)}" for key, value in parsed.items()]
    elif parsed in (None, "", {}):
        parts = []
    else:
        parts = [_short(parsed)]
    out = ", ".join(parts)
    return out if len(out) <= GIST_CHARS else out[: GIST_CHARS - 1] + "…"


def _short(value: object) -> str:
    text = orjson.dumps(value).decode() if not isinstance(value, str) else f'"{value}"'
    text = " ".join(text.split())
    return text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 2] + '…"'


def placeholder(tool: str | None, arguments: object, original: str, ref: str, retrieve: str) -> str:
    """The line a masked result becomes: the tool, its arguments' gist, the result's size, and
    how ``retrieve`` (the retrieval tool's name) gets it back."""
    lines = original.count("\n") + 1
    call = f"{tool or 'a tool'}({gist(arguments)})"
    return (
        f"[ctxproxy: the output of {call} was removed from the prompt ({len(original):,} characters, "
        f'{lines:,} lines). {retrieve}(ref="{ref}") returns it; add query="…" for only what matches.]'
    )
