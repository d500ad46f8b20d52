"""``Augmented`` (a NamedTuple, made at every request) keeps the frozen dataclass's defaults,
equality and immutability; ``_replace`` changes only the fields named."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxproxy.pipeline.turn import Augmented, ToolOutputCounts


def test_augmented_keeps_its_defaults_and_cannot_change() -> None:
    untouched = Augmented(messages=None, tools=None, answers=None, tokens=0, injected=0)
    assert untouched.summary_at is None and untouched.tool_outputs is None
    with pytest.raises(AttributeError):
        untouched.tokens = 1  # type: ignore[misc]
    assert untouched == Augmented(None, None, None, 0, 0) != Augmented(None, None, None, 1, 0)


@given(st.integers(0, 2**20), st.integers(0, 50), st.none() | st.integers(0, 9), st.integers(0, 2**20))
def test_replacing_changes_only_the_fields_named(
    tokens: int, injected: int, summary_at: int | None, saved: int
) -> None:
    added = Augmented([{"role": "user", "content": "x"}], None, None, tokens, injected, summary_at)
    out = [{"role": "user", "content": "y"}]
    counts = ToolOutputCounts(2, 1, 1, saved)
    rewritten = added._replace(messages=out, tokens=tokens - saved, tool_outputs=counts)
    assert (rewritten.messages, rewritten.tokens, rewritten.tool_outputs) == (out, tokens - saved, counts)
    assert (rewritten.tools, rewritten.answers, rewritten.injected, rewritten.summary_at) == (
        None,
        None,
        injected,
        summary_at,
    )
    assert added.tokens == tokens and added.tool_outputs is None
