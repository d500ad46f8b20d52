"""A diff's hunks keep their first changed lines, as deep as a share of the diff allows: short
hunks whole, long ones cut at one depth, never fewer than ``HUNK_LINES``."""

from __future__ import annotations

from ctxproxy.tool_outputs import diffs


def hunk(start: int, changed: int, context: int) -> list[str]:
    lines = [f"@@ -{start},{2 * context} +{start},{changed + 2 * context} @@"]
    lines += [f"     kept_{start}_{i} = {i}" for i in range(context)]
    lines += [f"+    added_{start}_{i} = {i}" for i in range(changed)]
    lines += [f"     kept_{start}_{i} = {i}" for i in range(context)]
    return lines


def text(context: int) -> str:
    out = ["diff --git a/a.py b/a.py", "--- a/a.py", "+++ b/a.py"]
    for n in range(10):
        out += hunk(100 * n + 1, 3, context)
    out += ["diff --git a/b.py b/b.py", "--- a/b.py", "+++ b/b.py", *hunk(5000, 60, context)]
    return "\n".join(out)


def shown(kept: str, start: int) -> list[int]:
    return [int(line.rsplit("= ", 1)[1]) for line in kept.splitlines() if line.startswith(f"+    added_{start}_")]


def test_a_long_hunk_keeps_more_lines_when_the_diff_has_room() -> None:
    whole = text(context=5)  # context, cut: room for more changed lines
    shrunk = diffs.compress(whole)
    assert shrunk is not None
    long = shown(shrunk.text, 5000)
    depth = len(long)
    assert diffs.HUNK_LINES < depth < 60 and long == list(range(depth))
    assert shrunk.text.endswith(f"_{depth - 1} = {depth - 1}\n…") and all(
        shown(shrunk.text, 100 * n + 1) == [0, 1, 2] for n in range(10)
    )
    kept = sum(len(line) + 1 for line in shrunk.text.splitlines() if line.startswith("+"))
    assert kept <= diffs.CHANGED_SHARE * len(whole)
    assert shrunk.elided.startswith(f"{11 * 10 + 60 - depth} of ")


def test_a_diff_without_room_keeps_the_first_lines_of_each_hunk() -> None:
    shrunk = diffs.compress(text(context=0))
    assert shrunk is not None
    assert shown(shrunk.text, 5000) == list(range(diffs.HUNK_LINES))
