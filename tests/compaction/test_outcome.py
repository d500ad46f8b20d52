"""``CompactionOutcome`` (a NamedTuple, made at every request) keeps the frozen dataclass's
defaults, equality and immutability; ``_replace`` changes only the field named."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxproxy.compaction.inputs import CompactionOutcome


def test_an_outcome_keeps_its_defaults_and_cannot_change() -> None:
    plain = CompactionOutcome(None, 5, None)
    assert (plain.compacted, plain.branches, plain.kind) == (False, 0, None)
    with pytest.raises(AttributeError):
        plain.kind = "planned"  # type: ignore[misc]
    assert plain == CompactionOutcome(None, 5, None) != CompactionOutcome(None, 6, None)


@given(st.integers(0, 2**20), st.booleans(), st.integers(0, 9), st.sampled_from(["planned", "emergency", "recovery"]))
def test_replacing_the_kind_changes_nothing_else(tokens: int, compacted: bool, branches: int, kind: str) -> None:
    outcome = CompactionOutcome([{"role": "user", "content": "x"}], tokens, None, compacted, branches)
    kinded = outcome._replace(kind=kind)  # type: ignore[arg-type]
    assert kinded.kind == kind and outcome.kind is None
    assert (kinded.messages, kinded.tokens_after, kinded.checkpoint, kinded.compacted, kinded.branches) == (
        outcome.messages,
        tokens,
        None,
        compacted,
        branches,
    )
