"""A test run's elided passing verdicts name their tests under their file, as compactly as the
budget needs."""

from __future__ import annotations

import pytest

from ctxproxy.tool_outputs import logs, verdicts
from tests.tool_outputs.test_kinds import pytest_log


def run(cases: int, name: str = "test_case") -> str:
    lines = ["===== test session starts =====", "collected items"] + [""] * 8
    lines += [f"tests/test_{f}.py::{name}[{i}] PASSED [ {i % 100:2d}%]" for f in "ab" for i in range(cases)]
    lines += ["tests/test_b.py::test_total FAILED", "E   assert 11 == 12"] + ["x"] * 10
    return "\n".join(lines)


def named(text: str) -> list[str]:
    shrunk = logs.compress(text)
    assert shrunk is not None
    return [line for line in shrunk.text.splitlines() if " passed: " in line]


def test_passing_tests_are_named_under_their_file() -> None:
    lines = named(pytest_log())
    assert len(lines) == 1 and lines[0].startswith("  tests/test_a.py passed: test_6, test_7, ")
    assert lines[0].endswith(", test_191") and ", test_100, " in lines[0]


def test_parametrized_cases_shorten_when_whole_names_do_not_fit() -> None:
    lines = named(run(60, "test_a_rather_long_name_for_a_parametrized_test"))
    assert lines[0].startswith("  tests/test_a.py passed: test_a_rather_long_name_for_a_parametrized_test[")
    assert ", [30], [31], " in lines[0] and lines[0].count("test_a_rather_long") == 1
    assert lines[1].startswith("  tests/test_b.py passed: test_a_rather_long_name_for_a_parametrized_test[")


def test_names_that_would_crowd_the_log_are_left_counted() -> None:
    text = run(60).replace("test_case[", "test_" + "x" * 80 + "_")  # not parametrized: nothing to shorten
    assert named(text) == []
    shrunk = logs.compress(text)
    assert shrunk is not None and "lines elided (" in shrunk.text and "PASSED)" in shrunk.text


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ("tests/a.py::test_x[p 1] PASSED                [ 10%]", ("tests/a.py", "test_x[p 1]")),
        ("test net::tcp::connects ... ok", ("net::tcp", "connects")),
        ("    --- PASS: TestParse/empty (0.00s)", ("", "TestParse/empty")),
        ("test_sum (pkg.test_math.MathTest.test_sum) ... ok", ("pkg.test_math.MathTest.test_sum", "test_sum")),
        ("tests/a.py::test_x FAILED", None),
        ("test net::tcp::connects ... FAILED", None),
    ],
    ids=["pytest", "cargo", "go", "unittest", "pytest-red", "cargo-red"],
)
def test_passing_verdicts_of_each_runner(line: str, found: tuple[str, str] | None) -> None:
    assert verdicts.passing(line) == found
