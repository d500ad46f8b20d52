"""How many agent turns keep their results whole (``tool_outputs.kept_turns``): ``keep_turns``
where the window holds ``keep_turns`` turns as large as the largest so far in half its budget,
else 1; and so the masked count never goes down as a conversation grows."""

from __future__ import annotations

from typing import Any

from ctxproxy.pipeline.tool_outputs import kept_turns
from ctxproxy.tool_outputs.mask import masked_turns


def turn(calls: int, chars: int) -> list[dict[str, Any]]:
    """An assistant message calling ``calls`` tools, and their results of ``chars`` characters each."""
    ids = [f"call_{i}" for i in range(calls)]
    out: list[dict[str, Any]] = [{"role": "assistant", "tool_calls": [{"id": i} for i in ids]}]
    return out + [{"role": "tool", "tool_call_id": i, "content": "x" * chars} for i in ids]


def test_keep_turns_where_the_window_holds_them() -> None:
    messages = [{"role": "user", "content": "go"}, *turn(1, 8000), *turn(1, 8000)]  # 2,000 tokens a turn
    assert kept_turns(2, messages, 8_000) == 2  # 2 turns: 4,000 tokens, half the budget
    assert kept_turns(2, messages, 7_999) == 1
    assert kept_turns(4, messages, 16_000) == 4  # 4 turns: 8,000
    assert kept_turns(4, messages, 15_000) == 1  # never 3 or 2: see the monotonic test
    assert kept_turns(0, messages, 100) == 0 and kept_turns(1, messages, 100) == 1


def test_a_turns_results_add_up_and_parts_count_their_text() -> None:
    parts = {"role": "tool", "content": [{"type": "text", "text": "y" * 6000}, {"type": "image"}]}
    messages = [*turn(2, 4000), {"role": "user", "content": "z" * 100_000}, {"role": "assistant"}, parts]
    assert kept_turns(2, messages, 12_000) == 2  # the batch: 8,000 characters, 2,000 tokens
    assert kept_turns(2, [*messages, *turn(3, 4000)], 11_999) == 1  # 12,000 characters


def test_the_masked_count_never_goes_down_as_turns_grow() -> None:
    """Larger turns arrive late: keep_turns falls from 4 to 1 and the masked count only grows."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    masked, keeps = [], []
    for n in range(1, 30):
        messages += turn(1, 1000 * n)
        keep = kept_turns(4, messages, 24_000)
        keeps.append(keep)
        masked.append(masked_turns(n, keep))
    assert keeps[0] == 4 and keeps[-1] == 1
    assert masked == sorted(masked) and masked[-1] == 28 and masked[8] == 8
