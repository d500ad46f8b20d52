"""Each kind is detected from the text and compressed by its own rules; what does not parse as
its kind is left as it is (``compress`` returns None), and whole lines and rows are kept."""

from __future__ import annotations

import json

import pytest

from ctxproxy.tool_outputs import Kind, compress, detect, diffs, json_tree, logs, ref_of

TOOL = "ctxproxy_retrieve"


def rows(n: int) -> list[dict[str, object]]:
    out: list[dict[str, object]] = [
        {"id": i, "path": f"/api/items/{i}", "status": 200, "owner": f"user{i % 97}", "ms": 10 + i % 13}
        for i in range(n)
    ]
    out[41] = {**out[41], "status": 503}
    out[77] = {**out[77], "owner": None}
    out[90] = {**out[90], "note": "upstream timeout: connection error"}
    return out


def pytest_log(passed: int = 200) -> str:
    lines = ["===== test session starts =====", "collected 201 items"]
    lines += [f"tests/test_a.py::test_{i} PASSED [{i // 2:3d}%]" for i in range(passed)]
    lines += ["tests/test_a.py::test_total FAILED", "E   AssertionError: assert 11 == 12"]
    lines += ["FAILED tests/test_a.py::test_total - AssertionError", "===== 1 failed, 200 passed in 3.10s ====="]
    return "\n".join(lines)


def diff(files: int = 3, changed: int = 30) -> str:
    out = []
    for f in range(files):
        out += [f"diff --git a/pkg/m{f}.py b/pkg/m{f}.py", "index 1111111..2222222 100644"]
        out += [f"--- a/pkg/m{f}.py", f"+++ b/pkg/m{f}.py", f"@@ -1,{changed + 6} +1,{changed + 6} @@ def f{f}():"]
        out += ["     context line"] * 3
        out += [f"-    old_{i} = {i}" if i % 2 else f"+    new_{i} = {i}" for i in range(changed)]
        out += [f"+    new_{i} = {i}" if i % 2 else f"-    old_{i} = {i}" for i in range(changed)]
        out += ["     context line"] * 3
    return "\n".join(out)


def source(functions: int = 20) -> str:
    out = ["import os", "from pathlib import Path", ""]
    for i in range(functions):
        out += ["@cached", f"def step_{i}(path: Path, n: int = {i}) -> int:", f'    """Step {i} of the build."""']
        out += [f"    total = n * {i}", "    for x in range(n):", "        total += x", "    return total", ""]
    return "\n".join(out)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (json.dumps(rows(100), indent=2), Kind.JSON_ROWS),
        (json.dumps({"items": rows(100), "next": None}), Kind.JSON_ROWS),
        (pytest_log(), Kind.LOG),
        (diff(), Kind.DIFF),
        ("\n".join(f"ctxproxy/mod{i}.py:{i + 1}:def f{i}():" for i in range(60)), Kind.LISTING),
        ("\n".join(f"./src/pkg{i % 5}/file{i}.py" for i in range(60)), Kind.LISTING),
        (source(), Kind.CODE),
        ("The quick brown fox jumps over the lazy dog.\n" * 50, Kind.TEXT),
        ('[{"a": 1}, "not a row"]', Kind.TEXT),
    ],
    ids=["json", "json-under-key", "log", "diff", "grep", "listing", "code", "text", "mixed-json"],
)
def test_the_kind_is_detected(text: str, kind: Kind) -> None:
    assert detect(text) is kind


def test_json_rows_keep_schema_values_and_every_anomaly() -> None:
    text = json.dumps(rows(100), indent=2)
    out = compress(text, TOOL)
    assert out is not None and out.kind is Kind.JSON_ROWS
    assert "JSON array of 100 objects" in out.text and "status (number)" in out.text
    assert "Values of status: 200 (99), 503 (1)" in out.text
    for anomalous in ('"status":503', '"owner":null', "connection error"):
        assert anomalous in out.text
    assert len(out.text) < 0.3 * len(text)
    last = out.text.splitlines()[-1]
    assert last.startswith("[ctxproxy: 83 rows of 100 elided") and f'{TOOL}(ref="{ref_of(text)}")' in last
    for line in out.text.splitlines():  # every row shown is whole JSON
        if line.startswith("  ["):
            json.loads(line.split("] ", 1)[1])


def test_a_long_value_is_shortened_whole_never_cut_inside_its_string() -> None:
    big = [{"id": i, "body": "x" * 500 + f" end {i}"} for i in range(10)]
    shrunk = json_tree.compress(json.dumps(big))
    assert shrunk is not None
    row = json.loads(shrunk.text.splitlines()[-1].split("] ", 1)[1])
    assert row["body"].endswith("… (506 chars)")


def test_logs_keep_failures_with_neighbours_first_and_last_lines() -> None:
    text = pytest_log()
    shrunk = logs.compress(text)
    assert shrunk is not None
    kept = shrunk.text.splitlines()
    assert kept[0] == "===== test session starts =====" and kept[-1].startswith("===== 1 failed")
    assert "tests/test_a.py::test_total FAILED" in kept and "E   AssertionError: assert 11 == 12" in kept
    assert any(line.startswith("… ") and "PASSED), their tests by file:" in line for line in kept)
    named = [line for line in kept if line.startswith("  tests/test_a.py passed: ")]
    assert len(named) == 1 and ", test_100, " in named[0]
    shown = {line.split("  (×")[0] for line in kept if not line.startswith("… ") and line not in named}
    assert shown <= set(text.splitlines())  # whole lines, as they came


def test_repeated_lines_are_collapsed_with_a_count() -> None:
    text = "\n".join(
        ["start"] + [f"12:00:{i:02d} retrying connection (attempt {i})" for i in range(40)] + ["ERROR gave up"]
    )
    shrunk = logs.compress(text)
    assert shrunk is not None
    assert "(×" in shrunk.text and "ERROR gave up" in shrunk.text


def test_diffs_keep_headers_and_changed_lines_cut_context() -> None:
    text = diff()
    out = compress(text, TOOL)
    assert out is not None and out.kind is Kind.DIFF
    lines = out.text.splitlines()
    assert lines[0] == "3 files changed:" and "  pkg/m1.py (+30 -30)" in lines
    assert sum(1 for line in lines if line.startswith("@@ -1,36 +1,36 @@")) == 3  # hunk headers whole
    assert "     context line" not in lines and len(out.text) < 0.5 * len(text)


def test_a_removed_line_that_reads_like_a_header_stays_a_removed_line() -> None:
    text = "--- a/x\n+++ b/x\n@@ -1,2 +1,1 @@\n--- not a header\n-gone\n+kept\n"
    shrunk = diffs.compress(text.replace("@@ -1,2 +1,1", "@@ -1,2 +1,1"))
    assert shrunk is not None and shrunk.text.splitlines()[:2] == ["1 file changed:", "  x (+1 -2)"]


@pytest.mark.parametrize(
    "text",
    ["--- a/x\n+++ b/x\n@@ broken @@\n-a\n+b\n", "some words first\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"],
    ids=["bad-hunk-header", "text-before"],
)
def test_what_does_not_parse_as_a_diff_is_left_alone(text: str) -> None:
    assert diffs.compress(text) is None


def test_code_keeps_signatures_with_line_numbers_and_docstrings() -> None:
    text = source()
    out = compress(text, TOOL)
    assert out is not None and out.kind is Kind.CODE
    assert "5: def step_0(path: Path, n: int = 0) -> int:" in out.text
    assert '6:     """Step 0 of the build."""' in out.text and "4: @cached" in out.text
    assert "total += x" not in out.text


def test_grep_results_are_counted_by_file() -> None:
    text = "\n".join(f"pkg/mod{i % 4}.py:{i + 1}:    call_{i}()" for i in range(80))
    out = compress(text, TOOL)
    assert out is not None and out.kind is Kind.LISTING
    assert out.text.startswith("80 matches in 4 files:") and "  pkg/mod0.py: 20" in out.text


def test_small_or_barely_compressible_results_are_not_rewritten() -> None:
    assert compress("ok", TOOL) is None
    assert compress(json.dumps([{"a": 1}, {"a": 2}, {"a": 3}]), TOOL) is None  # nothing worth eliding


def test_rows_of_few_short_fields_are_kept_whole_as_a_table() -> None:
    packages = [{"package_name": f"p{i}", "installed_version": f"1.{i}", "editable_location": None} for i in range(60)]
    packages[7] = {"package_name": "p7", "installed_version": "1.7"}  # a field missing: an empty cell
    out = compress(json.dumps(packages, indent=2), TOOL)
    assert out is not None
    header = "JSON array of 60 objects, one per line: package_name installed_version editable_location"
    assert out.text.splitlines()[:2] == [header, "p0 1.0 null"]
    assert "\np7 1.7\n" in out.text and "p59 1.59 null" in out.text
    packages[9] = {"package_name": "p 9", "installed_version": "1.9", "editable_location": None}  # a space
    spaced = compress(json.dumps(packages, indent=2), TOOL)
    assert spaced is not None and "\np0 | 1.0 | null\n" in spaced.text and "\np 9 | 1.9 | null\n" in spaced.text


def test_a_table_is_not_used_when_it_saves_too_little() -> None:
    packages = [{"name": f"package number {i}", "version": f"1.{i}.0"} for i in range(60)]
    out = json_tree.compress(json.dumps(packages))
    assert out is not None and out.text.startswith("JSON array of 60 objects.\nFields:")


def test_a_git_log_keeps_each_commit_subject_and_files() -> None:
    commits = []
    for i in range(5):
        commits += [f"commit {i:x}{'a' * 39}", "Author: A <a@example.com>", "Date:   Fri Nov 27 2026", ""]
        commits += [f"    Subject of change {i}", "", "    A body line that is elided.", ""]
        commits += [
            f" ctxproxy/m{i}.py  | 12 +++++-----",
            f" tests/test_m{i}.py |  3 +++",
            " 2 files changed, 10 insertions(+), 5 deletions(-)",
            "",
        ]
    text = "\n".join(commits)
    out = compress(text, TOOL)
    assert out is not None and out.kind is Kind.LOG
    assert "2aaaaaaaaaaa Subject of change 2" in out.text
    assert "  2 files: ctxproxy/m2.py, tests/test_m2.py" in out.text
    assert "Author" not in out.text and "body line" not in out.text


def test_a_git_log_with_long_messages_is_still_a_log() -> None:
    commits = []
    for i in range(4):
        commits += [f"commit {i:x}{'c' * 39}", "Author: A <a@example.com>", "Date:   Fri Nov 27 2026", ""]
        commits += [f"    Subject {i}", ""] + [f"    A long body's line {n}, in words." for n in range(30)] + [""]
    text = "\n".join(commits)
    assert detect(text) is Kind.LOG
    out = compress(text, TOOL)
    assert out is not None and "3ccccccccccc Subject 3" in out.text and "body" not in out.text
    assert out.text.splitlines()[-1].endswith('") returns the whole output; add query="…" for only what matches.]')
