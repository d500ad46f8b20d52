"""A retrieval with a query returns the lines (or JSON rows) with the most of its words."""

from __future__ import annotations

import json

from ctxproxy.tool_outputs import select
from tests.tool_outputs.test_kinds import pytest_log, rows


def test_no_query_returns_the_original() -> None:
    assert select("a\nb", None) == "a\nb" and select("a\nb", "  ") == "a\nb"


def test_lines_matching_the_query_with_neighbours() -> None:
    out = select(pytest_log(), "test_total FAILED")
    assert out.startswith("2 of 206 lines match")
    assert "203: tests/test_a.py::test_total FAILED" in out and "test_17 PASSED" not in out


def test_json_rows_are_returned_whole() -> None:
    out = select(json.dumps(rows(100)), "user5")
    matched = [json.loads(line.split("] ", 1)[1]) for line in out.splitlines()[1:]]
    assert matched and all(str(r["owner"]).startswith("user5") for r in matched)


def test_nothing_matching_says_so() -> None:
    assert select(pytest_log(), "zebra").startswith("Nothing in the output matches 'zebra'")
