"""The built-in window table read as one regular expression finds what a scan of its patterns
in order with ``fnmatchcase`` finds: the first pattern that matches, for any name."""

from __future__ import annotations

from fnmatch import fnmatchcase

from hypothesis import given
from hypothesis import strategies as st

from ctxproxy.compaction.windows import BUILTIN_WINDOWS, builtin_window

_PIECES = sorted({part for pattern, _ in BUILTIN_WINDOWS for part in pattern.split("*") if part})


def _scanned(name: str) -> tuple[int, str] | None:
    return next(((tokens, f"built-in {p}") for p, tokens in BUILTIN_WINDOWS if fnmatchcase(name, p)), None)


@given(st.lists(st.sampled_from([*_PIECES, "-", "x", "\n", "mini", "3.1", ""]), max_size=4))
def test_the_first_matching_pattern_wins(parts: list[str]) -> None:
    name = "".join(parts)
    assert builtin_window(name) == _scanned(name)


def test_known_and_unknown_names() -> None:
    assert builtin_window("gpt-4-32k-0613") == (32_768, "built-in gpt-4-32k*")
    assert builtin_window("meta-llama-3.1-8b") == (131_072, "built-in *llama-3.1*")
    assert builtin_window("my-model") is None
